"""Real tool outputs as users paste them (tests/data/SOURCES.md): the fields a user reads, and cut-short copies.

Each table row is one real output; the values are what the output itself shows. Every output is then cut
at many points and re-read: a field is either what the whole output says or unknown (None), never a
different value, and no parser raises. Framing a paste adds (CRLF, colour escapes, block quotes, code
fences, indentation, a BOM) must not change what is read.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from doctor import collect_env, parsers

DATA = Path(__file__).parent / "data"


def read(rel: str) -> str:
    return (DATA / rel).read_text(encoding="utf-8")


def gpu_view(gpu: dict[str, Any]) -> tuple[Any, ...]:
    return (gpu["index"], gpu["name"], gpu["pci_bus_id"], gpu["memory_used_mib"], gpu["memory_total_mib"],
            gpu["temperature_c"], gpu["power_draw_w"], gpu["utilization_pct"])


# --- plain nvidia-smi -------------------------------------------------------------------------------

# file -> (driver, max CUDA, NVIDIA-SMI version, [(index, name, bus, used MiB, total MiB, temp C, power W, util %)])
SMI_TEXT = {
    "wsl-9134-windows-517.48-2x-wddm-indented.txt": ("517.48", "11.7", "517.48", [
        (0, "NVIDIA GeForce ...", "00000000:0A:00.0", 576, 11264, 31, 16.0, 0),
        (1, "NVIDIA GeForce ...", "00000000:43:00.0", 2152, 11264, 29, 17.0, None)]),  # cut after the memory cell
    "wsl-11589-smi-545.46-driver-546.80-cuda-err.txt": ("546.80", None, "545.46", [  # "CUDA Version: ERR!"
        (0, "NVIDIA GeForce RTX 3060 ...", "00000000:01:00.0", 816, 6144, 54, 16.0, 3)]),
    "wsl-6014-windows-460.15-rtx2070-insufficient-permissions.txt": ("460.15", "11.1", "460.15", [
        (0, "GeForce RTX 207...", "00000000:01:00.0", 176, 8192, 45, 12.0, 0)]),
    "wsl-11277-smi-535.103-driver-537.13-gtx1650.txt": ("537.13", "12.2", "535.103", [
        (0, "NVIDIA GeForce GTX 1650 ...", "00000000:02:00.0", 128, 4096, 48, 3.0, 15)]),
    "wsl-9099-windows-526.47-prompt.txt": ("526.47", "12.0", "526.47", [
        (0, "NVIDIA GeForce ...", "00000000:0B:00.0", 1619, 12288, 37, 17.0, 8)]),
    "nvtop-124-wsl-smi-470.57.02-driver-510.06.txt": ("510.06", "11.6", "470.57.02", [
        (0, "NVIDIA GeForce ...", "00000000:01:00.0", 161, 8192, 48, 3.0, None)]),  # GPU-Util N/A
    "xmr-stak-39-384.66-titan-xp-no-cuda-version.txt": ("384.66", None, "384.66", [
        (0, "TITAN Xp", "00000000:41:00.0", 2789, 12174, 47, 28.0, 0)]),
    "cbio-38-331.62-3x-gtx680-narrow-banner.txt": ("331.62", None, "331.62", [
        (0, "GeForce GTX 680", "0000:03:00.0", 9, 4095, 35, None, None),
        (1, "GeForce GTX 680", "0000:04:00.0", 9, 4095, 35, None, None),
        (2, "GeForce GTX 680", "0000:83:00.0", 9, 4095, 34, None, None)]),
    "bidmach-128-367.48-quadro-k3100m.txt": ("367.48", None, "367.48", [
        (0, "Quadro K3100M", "0000:01:00.0", 46, 4034, 32, 9.0, 54)]),
    "gpu-burn-89-535.171.04-banner-only.txt": ("535.171.04", "12.2", "535.171.04", []),
    "open-gpu-kernel-modules-862-no-devices.txt": (None, None, None, []),
    "geforce-470.63.01-cuda-11.4.txt": ("470.63.01", "11.4", "470.63.01", [
        (0, "NVIDIA GeForce ...", "00000000:01:00.0", 393, 16116, 55, 21.0, 3)]),
    "rtx-2000-ada-580.95.05-cuda-13.0.txt": ("580.95.05", "13.0", "580.95.05", [
        (0, "NVIDIA RTX 2000 Ada Gene...", "00000000:01:00.0", 15, 8188, 38, 1.0, 0)]),
    "truenas-driver-library-mismatch-580.txt": (None, None, None, []),
}


@pytest.mark.parametrize("name", sorted(SMI_TEXT))
def test_smi_table_reads_what_the_user_sees(name: str) -> None:
    driver, cuda, smi, gpus = SMI_TEXT[name]
    parsed = parsers.parse_nvidia_smi_text(read(f"nvidia-smi-text/{name}"))
    assert (parsed["driver_version"], parsed["cuda_version"], parsed["smi_version"]) == (driver, cuda, smi)
    assert [gpu_view(g) for g in parsed["gpus"]] == gpus
    assert parsers.parse_cuda_driver_version_from_smi_text(read(f"nvidia-smi-text/{name}")) == {
        "driver_version": driver, "cuda_version": cuda}


def test_smi_table_flags_shortened_names_and_reads_driver_model_and_persistence() -> None:
    wsl = parsers.parse_nvidia_smi_text(read("nvidia-smi-text/wsl-9134-windows-517.48-2x-wddm-indented.txt"))
    assert [(g["name_truncated"], g["driver_model"], g["persistence_mode"]) for g in wsl["gpus"]] == [
        (True, "WDDM", None)] * 2
    titan = parsers.parse_nvidia_smi_text(read("nvidia-smi-text/xmr-stak-39-384.66-titan-xp-no-cuda-version.txt"))
    assert [(g["name_truncated"], g["persistence_mode"], g["power_limit_w"]) for g in titan["gpus"]] == [
        (False, False, 250.0)]


def test_no_devices_were_found_is_said_and_gives_no_gpu() -> None:
    parsed = parsers.parse_nvidia_smi_text(read("nvidia-smi-text/open-gpu-kernel-modules-862-no-devices.txt"))
    assert parsed["no_devices"] is True and parsed["gpus"] == []
    ok = parsers.parse_nvidia_smi_text(read("nvidia-smi-text/bidmach-128-367.48-quadro-k3100m.txt"))
    assert ok["no_devices"] is False


def test_process_rows_insufficient_permissions_and_na_memory_are_unknown() -> None:
    parsed = parsers.parse_nvidia_smi_text(
        read("nvidia-smi-text/wsl-6014-windows-460.15-rtx2070-insufficient-permissions.txt"))
    assert parsed["processes"] == [
        {"gpu": 0, "pid": 1752, "type": "C+G", "name": None, "used_mib": None},
        {"gpu": 0, "pid": 2424, "type": "C+G", "name": "...b3d8bbwe\\WinStore.App.exe", "used_mib": None}]
    titan = parsers.parse_nvidia_smi_text(read("nvidia-smi-text/xmr-stak-39-384.66-titan-xp-no-cuda-version.txt"))
    assert titan["processes"] == [{"gpu": 0, "pid": 1568, "type": "G", "name": "/usr/lib/xorg/Xorg",
                                   "used_mib": 1850}]


def test_mig_devices_table_gives_each_instance_and_its_memory() -> None:
    parsed = parsers.parse_nvidia_smi_text(read("nvidia-smi-text/nvitop-8-mig-devices-table.txt"))
    assert [(m["gpu"], m["gi"], m["ci"], m["index"], m["memory_used_mib"], m["memory_total_mib"])
            for m in parsed["mig_devices"]] == [
        (1, 3, 0, 0, 14366, 19968), (1, 5, 0, 1, 9826, 19968), (1, 6, 0, 2, 13, 19968), (2, 3, 0, 0, 15210, 19968)]
    assert parsed["gpus"] == []


# --- nvidia-smi -q / -a -----------------------------------------------------------------------------

SMI_Q = {
    "nvidia-docker-1604-wsl-510.06-gtx1650ti.txt": ("510.06", "11.6", [
        ("NVIDIA GeForce GTX 1650 Ti with Max-Q Design", "00000000:01:00.0", "GPU-b5e386b4-3e71-5837-aca5-80c5914cf07f",
         True, "WDDM")]),
    "gputil-38-windows-442.92-gtx1080ti.txt": ("442.92", "10.2", [
        ("GeForce GTX 1080 Ti", "00000000:18:00.0", "GPU-95ef7c5d-fc11-835b-cd38-2020193cf8e0", None, "WDDM")]),
}


@pytest.mark.parametrize("name", sorted(SMI_Q))
def test_smi_q_reads_driver_cuda_and_each_gpu_block(name: str) -> None:
    driver, cuda, gpus = SMI_Q[name]
    parsed = parsers.parse_nvidia_smi_text(read(f"nvidia-smi-q/{name}"))
    assert (parsed["driver_version"], parsed["cuda_version"]) == (driver, cuda)
    assert [(g["name"], g["pci_bus_id"], g["uuid"], g["persistence_mode"], g["driver_model"])
            for g in parsed["gpus"]] == gpus


def test_smi_q_memory_and_power_sections_are_read_by_path() -> None:
    # Derived from the real -a output above: the memory, temperature and power sections a full -q prints
    # after "Module ID" (their layout as NVIDIA's R510 -q prints it), and one value cut at the very end.
    text = read("nvidia-smi-q/nvidia-docker-1604-wsl-510.06-gtx1650ti.txt") + "\n".join([
        "    FB Memory Usage", "        Total                             : 4096 MiB",
        "        Used                              : 1163 MiB", "    BAR1 Memory Usage",
        "        Total                             : 256 MiB", "    Temperature",
        "        GPU Current Temp                  : 52 C", "    Power Readings",
        "        Power Draw                        : N/A", "    Utilization", "        Gpu                 : 4"])
    gpu = parsers.parse_nvidia_smi_text(text)["gpus"][0]
    assert (gpu["memory_total_mib"], gpu["memory_used_mib"], gpu["temperature_c"], gpu["power_draw_w"],
            gpu["utilization_pct"]) == (4096, 1163, 52, None, None)


def test_smi_list_lines_give_names_and_uuids() -> None:
    # The `nvidia-smi -L` line quoted in TheTumultuousUnicornOfDarkness/CPU-X#115, and its UUID cut short there.
    text = "GPU 0: GeForce GTX 1660 Ti (UUID: GPU-e18afb8d-1627-f8ff-2ba3-c05c5a8e9e67)\n"
    gpus = parsers.parse_nvidia_smi_text(text)["gpus"]
    assert [(g["index"], g["name"], g["uuid"]) for g in gpus] == [
        (0, "GeForce GTX 1660 Ti", "GPU-e18afb8d-1627-f8ff-2ba3-c05c5a8e9e67")]
    assert parsers.parse_nvidia_smi_text(text[:-2])["gpus"] == []


# --- nvidia-smi --query-gpu CSV ----------------------------------------------------------------------


def test_query_gpu_csv_rows_without_units() -> None:
    rows = parsers.parse_nvidia_smi_csv(read("nvidia-smi-csv/ksysguard-27-520-query-gpu-csv.txt"))
    assert len(rows) == 3
    assert rows[0] == {"index": "0", "temperature.gpu": "56", "utilization.gpu": "26", "utilization.memory": "4",
                       "fan.speed": "34", "pstate": "P3", "power.draw": "83.92", "clocks.current.sm": "1320",
                       "clocks.current.memory": "5001", "clocks.current.graphics": "1320"}


@pytest.mark.parametrize(("text", "fields", "expected"), [
    ("name, driver_version, memory.total [MiB]\nTesla T4, 535.54.03, 15360 MiB\n", None,
     [{"name": "Tesla T4", "driver_version": "535.54.03", "memory.total": "15360"}]),
    ("name, power.draw [W]\nNVIDIA A10G, [N/A]\nGRID P4-1Q, [Not Supported]\n", None,
     [{"name": "NVIDIA A10G", "power.draw": None}, {"name": "GRID P4-1Q", "power.draw": None}]),
    ("NVIDIA GeForce RTX 3080, 83,92\n", ["name", "power.draw"], [{"name": "NVIDIA GeForce RTX 3080",
                                                                   "power.draw": "83.92"}]),
    ("No devices were found\n", ["name"], []),
])
def test_query_gpu_csv_unknowns_and_decimal_commas(text: str, fields: list[str] | None,
                                                   expected: list[dict[str, Any]]) -> None:
    assert parsers.parse_nvidia_smi_csv(text, fields) == expected


# --- -q -x pasted, /proc, nvcc ------------------------------------------------------------------------


def test_smi_xml_pasted_after_its_command_line_is_read_up_to_the_cut() -> None:
    parsed = parsers.parse_nvidia_smi_xml(read("nvidia-smi-xml/cpu-x-115-430.64-gtx1660ti-pasted-cut.txt"))
    assert (parsed["driver_version"], parsed["cuda_version"], parsed["gpus"]) == ("430.64", "10.1", [])


@pytest.mark.parametrize("prefix", ["\n  ", "$ nvidia-smi -q -x\n", "```xml\n", "\ufeff", "> "])
def test_smi_xml_with_framing_before_the_declaration(prefix: str) -> None:
    text = read("nvidia-smi-xml/a10g-515.105.01.xml")
    text = "".join("> " + line for line in text.splitlines(True)) if prefix == "> " else prefix + text
    parsed = parsers.parse_nvidia_smi_xml(text)
    assert (parsed["driver_version"], [g["name"] for g in parsed["gpus"]]) == ("515.105.01", ["NVIDIA A10G"])


@pytest.mark.parametrize(("rel", "expected"), [
    ("proc-driver-version/neofetch-876-384.98-ubuntu.txt", {"version": "384.98", "flavor": "proprietary",
                                                            "gcc": "7.2.0"}),
    # Jetson (L4T r35.3.1): the module states the L4T release where a desktop driver states its version
    ("proc-driver-version/nixgl-139-jetson-orin-nx-l4t-35.3.1.txt", {"version": "35.3.1", "flavor": "open",
                                                                     "gcc": "9.3.0"}),
])
def test_proc_driver_version_real_files(rel: str, expected: dict[str, Any]) -> None:
    assert parsers.parse_proc_driver_version(read(rel)) == expected


@pytest.mark.parametrize(("rel", "expected"), [
    ("nvcc/bidmach-128-7.5.17-prompt.txt", "7.5.17"),
    ("nvcc/paddle-52865-windows-11.6.55.txt", "11.6.55"),
])
def test_nvcc_real_outputs(rel: str, expected: str) -> None:
    assert parsers.parse_nvcc_version(read(rel)) == expected


# --- framing noise changes nothing --------------------------------------------------------------------


def framings(text: str) -> Iterator[tuple[str, str]]:
    yield "crlf", text.replace("\n", "\r\n")
    yield "quote", "".join("> " + line for line in text.splitlines(True))
    yield "fence", "```text\n" + text + "```\n"
    yield "ansi", re.sub(r"(\d+\.\d+)", "\x1b[01;31m\\1\x1b[0m", text, count=3)
    yield "grep-colour", text.replace("Xid", "\x1b[01;31m\x1b[KXid\x1b[m\x1b[K").replace(
        "NVRM", "\x1b[01;31m\x1b[KNVRM\x1b[m\x1b[K")
    yield "indent", "".join("    " + line for line in text.splitlines(True))
    yield "bom", "\ufeff" + text
    yield "nbsp", text.replace(" ", "\u00a0")


PARSER_OF: dict[str, Callable[[str], Any]] = {
    "proc-driver-version": parsers.parse_proc_driver_version, "nvcc": parsers.parse_nvcc_version,
    "xid": parsers.parse_xid_lines, "nvidia-smi-text": parsers.parse_nvidia_smi_text,
    "nvidia-smi-q": parsers.parse_nvidia_smi_text, "nvidia-smi-xml": parsers.parse_nvidia_smi_xml,
    "nvidia-smi-csv": parsers.parse_nvidia_smi_csv, "cuda-version-txt": parsers.parse_cuda_version_txt,
}
REAL = sorted(str(p.relative_to(DATA)) for d in PARSER_OF for p in (DATA / d).glob("*")
              if p.is_file() and p.name != "SOURCES.md")


@pytest.mark.parametrize("rel", REAL)
def test_framing_a_paste_adds_changes_nothing(rel: str) -> None:
    parse = PARSER_OF[rel.split("/")[0]]
    text = read(rel)
    for name, framed in framings(text):
        assert parse(framed) == parse(text), name


def ce_view(facts: Any) -> dict[str, Any]:
    torch = next((p for e in facts.python_envs for p in e.packages if p.name == "torch"), None)
    return {"driver": facts.driver.userspace, "gpus": [g.name for g in facts.gpus],
            "nvcc": [t.nvcc_version for t in facts.toolkits], "cudnn": [c.version for c in facts.cudnn],
            "python": [e.version for e in facts.python_envs],
            "torch": (torch.version, torch.cuda, torch.deep.is_available if torch.deep else None) if torch else None}


CE = sorted(p.name for p in (DATA / "collect_env").glob("*.txt"))


@pytest.mark.parametrize("name", CE)
def test_collect_env_framing_changes_nothing(name: str) -> None:
    text = read(f"collect_env/{name}")
    for label, framed in framings(text):
        assert ce_view(collect_env.parse(framed)) == ce_view(collect_env.parse(text)), label


# --- cut short: unknown, never another value, never an exception ---------------------------------------


def same_or_unknown(cut: Any, full: Any) -> bool:
    if isinstance(cut, dict):
        return isinstance(full, dict) and all(same_or_unknown(v, full.get(k)) for k, v in cut.items()
                                              if k != "no_devices")
    if isinstance(cut, list | tuple):
        return isinstance(full, list | tuple) and len(cut) <= len(full) and all(
            same_or_unknown(c, f) for c, f in zip(cut, full, strict=False))
    return cut is None or cut == full


def cuts(text: str) -> range:
    return range(0, len(text) + 1, max(1, len(text) // 150))


@pytest.mark.parametrize("rel", REAL)
def test_a_cut_short_output_reads_unknown_never_wrong(rel: str) -> None:
    parse = PARSER_OF[rel.split("/")[0]]
    text = read(rel)
    full = parse(text)
    for at in cuts(text):
        cut = parse(text[:at])
        if rel.startswith("xid/"):  # a cut message is the start of the message
            cut = [{**e, "message": None} for e in cut]
        if rel.startswith("nvcc/") and cut and full.startswith(cut + ".") and cut.count(".") == 1:
            continue  # "release 13.0," complete, "V13.0.88" cut: the release is what is known
        assert same_or_unknown(cut, full), (at, text[max(0, at - 40):at], cut)


@pytest.mark.parametrize("name", CE)
def test_a_cut_short_collect_env_report_reads_unknown_never_wrong(name: str) -> None:
    text = read(f"collect_env/{name}")
    full = ce_view(collect_env.parse(text))
    for at in cuts(text):
        try:
            cut = ce_view(collect_env.parse(text[:at]))
        except collect_env.CollectEnvError:
            continue  # too little left to be a report: said so, not a crash
        if cut["torch"] and full["torch"] and text[:at].rstrip("\n").endswith(cut["torch"][0]):
            continue  # a package line cut inside torch's version: kept, see collect_env._read
        assert same_or_unknown(cut, full), (at, text[max(0, at - 40):at], cut)


# --- deviceQuery and jax.print_environment_info() -----------------------------------------------------

DEVICE_QUERY = {
    "cudaminer-57-gtx460-5.0.txt": ("GeForce GTX 460", "5.0", "5.0", "2.1", 1023),
    "pocl-890-jetson-nano-tegra-x1-10.2.txt": ("NVIDIA Tegra X1", "10.2", "10.2", "5.3", 3960),
    "rpg-open-remode-9-gtx770-driver7.0-runtime6.5.txt": ("GeForce GTX 770", "7.0", "6.5", "3.0", 2047),
    "scenereco-32-gtx1080-8.0.txt": ("GeForce GTX 1080", "8.0", "8.0", "6.1", 8105),
}


@pytest.mark.parametrize("name", sorted(DEVICE_QUERY))
def test_device_query_reads_name_cuda_versions_cc_and_memory(name: str) -> None:
    parsed = parsers.parse_device_query(read(f"devicequery/{name}"))
    assert parsed["device_count"] == 1 and parsed["result"] is None  # every paste stops before "Result ="
    d = parsed["devices"][0]
    assert (d["name"], d["driver_cuda"], d["runtime_cuda"], d["compute_capability"], d["memory_total_mib"]) == \
        DEVICE_QUERY[name]


JAX = {
    "jax-12213-colab-cpu-0.3.17.txt": (("0.3.17", "0.3.15", "3.7.13", 1, ["CpuDevice"]), None),
    "jax-12213-colab-gpu-0.3.17-t4.txt": (("0.3.17", "0.3.15", "3.7.13", 1, ["GpuDevice"]),
                                          ("460.32.03", "11.2", [("Tesla T4", None)])),  # cut in the memory cell
    "jax-21295-0.4.33-8x-a10g.txt": (("0.4.33", "0.4.33", "3.10.12", 8, ["CudaDevice"]),
                                     ("550.127.05", "12.4", [("NVIDIA A10G", None)])),  # cut after the bus id
}


@pytest.mark.parametrize("name", sorted(JAX))
def test_jax_environment_info_reads_versions_devices_and_its_nvidia_smi(name: str) -> None:
    parsed = parsers.parse_jax_environment_info(read(f"jax-env-info/{name}"))
    versions, smi = JAX[name]
    assert (parsed["jax"], parsed["jaxlib"], parsed["python"], parsed["device_count"], parsed["device_kinds"]) == \
        versions
    got = parsed["nvidia_smi"]
    assert (got and (got["driver_version"], got["cuda_version"],
                     [(g["name"], g["memory_total_mib"]) for g in got["gpus"]])) == smi


CUT_PARSERS: dict[str, Callable[[str], Any]] = {
    "devicequery": parsers.parse_device_query, "jax-env-info": parsers.parse_jax_environment_info}


@pytest.mark.parametrize("rel", sorted(str(p.relative_to(DATA)) for d in CUT_PARSERS for p in (DATA / d).glob("*")))
def test_device_query_and_jax_cut_short_read_unknown_never_wrong(rel: str) -> None:
    parse = CUT_PARSERS[rel.split("/")[0]]
    text = read(rel)
    full = parse(text)
    for at in cuts(text):
        assert same_or_unknown(parse(text[:at]), full), (at, text[max(0, at - 40):at])
    for label, framed in framings(text):
        assert parse(framed) == full, label


# --- tf.sysconfig.get_build_info() as printed ----------------------------------------------------------


def test_tf_build_info_as_printed_reads_cuda_cudnn_and_cuda_build() -> None:
    text = read("tf-build-info/conda-forge-157-printed-ordereddict-cuda11.2.txt")
    assert parsers.parse_tf_build_info(text) == {"cuda": "11.2", "cudnn": "8", "is_cuda_build": True}
    full = parsers.parse_tf_build_info(text)
    for at in cuts(text):
        assert same_or_unknown(parsers.parse_tf_build_info(text[:at]), full), at
    for label, framed in framings(text):
        assert parsers.parse_tf_build_info(framed) == full, label


# --- nvidia-smi topo -m ---------------------------------------------------------------------------------


def test_topo_tab_layout_with_numa_columns() -> None:
    parsed = parsers.parse_nvidia_smi_topo(read("nvidia-smi-topo/club-3090-1229-2x-rtx5090-tabs.txt"))
    assert parsed == {"columns": ["GPU0", "GPU1"],
                      "links": {"GPU0": {"GPU0": "X", "GPU1": "PHB"}, "GPU1": {"GPU0": "PHB", "GPU1": "X"}},
                      "cpu_affinity": {"GPU0": "0-63", "GPU1": "0-63"}, "numa_affinity": {"GPU0": "0", "GPU1": "0"}}


def test_topo_space_layout_with_a_nic_column_cut_after_gpu4() -> None:
    parsed = parsers.parse_nvidia_smi_topo(read("nvidia-smi-topo/kubernetes-53497-8gpu-mlx4-cut.txt"))
    assert parsed["columns"][-1] == "mlx4_0" and len(parsed["columns"]) == 9
    assert sorted(parsed["links"]) == ["GPU0", "GPU1", "GPU2", "GPU3", "GPU4"]
    assert parsed["links"]["GPU0"]["GPU1"] == "PIX" and parsed["links"]["GPU4"]["mlx4_0"] == "SYS"
    assert parsed["cpu_affinity"]["GPU4"] == "10-19,30-39"


@pytest.mark.parametrize("name", ["club-3090-1229-2x-rtx5090-tabs.txt", "kubernetes-53497-8gpu-mlx4-cut.txt",
                                  "h100-x1-580.159.04-ansi-underlined-header.txt"])
def test_topo_cut_short_reads_unknown_never_wrong(name: str) -> None:
    text = read(f"nvidia-smi-topo/{name}")
    full = parsers.parse_nvidia_smi_topo(text)
    for at in cuts(text):
        assert same_or_unknown(parsers.parse_nvidia_smi_topo(text[:at]), full), at
    for label, framed in framings(text):
        if label != "nbsp":  # a no-break space inside "CPU Affinity" is read as a space too
            assert parsers.parse_nvidia_smi_topo(framed) == full, label


@pytest.mark.parametrize(("cell", "expected"), [("N/A", None), ("Enabled", True), ("Disabled", False)])
def test_smi_table_mig_mode_column(cell: str, expected: bool | None) -> None:
    # The real R535 table (WSL, GTX 1650) says N/A; Enabled/Disabled are what a data-center GPU shows in the
    # same cell, written into that row here.
    text = read("nvidia-smi-text/wsl-11277-smi-535.103-driver-537.13-gtx1650.txt")
    row = "|                                         |                      |                  N/A |"
    assert row in text
    text = text.replace(row, row[: -len(cell) - 2] + cell + " |")
    assert parsers.parse_nvidia_smi_text(text)["gpus"][0]["mig_mode"] is expected
