"""Tier 1: the pure parsers, on real outputs (tests/data/, origins in SOURCES.md) and on mutations of them.

Where a rule needs a state no real fixture shows (an active power cap, a pending row remap), the test
derives it from a real fixture by changing one value, so the rest of the document stays real.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from doctor import parsers

DATA = Path(__file__).parent / "data"


def read(rel: str) -> str:
    # newline="" keeps CRLF files (the Windows TensorFlow build_info) as they were found.
    with open(DATA / rel, encoding="utf-8", newline="") as handle:
        return handle.read()


def smi(rel: str) -> dict[str, Any]:
    return parsers.parse_nvidia_smi_xml(read(f"nvidia-smi-xml/{rel}"))


P100 = "tesla-p100-x2-375.66.xml"
A10G = "a10g-515.105.01.xml"
VGPU = "grid-p4-1q-vgpu-windows-513.46.xml"
A100 = "a100-sxm4-80gb-mig-535.54.03.xml"
RTX3080 = "geforce-rtx-3080-595.58.03.xml"

GPU_KEYS = {
    "index",
    "name",
    "uuid",
    "pci_bus_id",
    "pci_device_id",
    "compute_capability",
    "memory_total_mib",
    "memory_used_mib",
    "mig_mode",
    "persistence_mode",
    "ecc_uncorrected",
    "retired_pages_pending",
    "remapped_rows_pending",
    "temperature_c",
    "power_draw_w",
    "utilization_pct",
    "pcie_gen_current",
    "pcie_gen_max",
    "pcie_width_current",
    "pcie_width_max",
    "throttle_reasons",
    "processes",
    "mig_devices",
    "source",
}


# --- CUDA version integers ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (12020, "12.2"),
        (11080, "11.8"),
        (13000, "13.0"),
        (10010, "10.1"),
        (9020, "9.2"),
        (0, None),
        (-12020, None),
        (999, None),
        (10**12, None),
        (True, None),
    ],
)
def test_cuda_version_from_int_decodes_major_minor(value: int, expected: str | None) -> None:
    assert parsers.cuda_version_from_int(value) == expected


# --- /proc/driver/nvidia/version ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("rel", "version", "flavor", "gcc"),
    [
        ("open-565.57.01-ubuntu2404.txt", "565.57.01", "open", "13.3.0"),
        ("open-525.60.11-arch.txt", "525.60.11", "open", "12.2.0"),
        ("open-555.58-gentoo-first-line.txt", "555.58", "open", None),
        ("proprietary-580.173.02-truenas.txt", "580.173.02", "proprietary", "14.2.0"),
    ],
)
def test_proc_driver_version_reads_version_flavor_and_gcc(rel: str, version: str, flavor: str, gcc: str) -> None:
    assert parsers.parse_proc_driver_version(read(f"proc-driver-version/{rel}")) == {
        "version": version,
        "flavor": flavor,
        "gcc": gcc,
    }


def test_proc_driver_version_without_nvrm_line_is_all_none() -> None:
    text = read("nvidia-smi-text/debian12-535.309.01-no-kernel-module.stdout.txt")
    assert parsers.parse_proc_driver_version(text) == {"version": None, "flavor": None, "gcc": None}


# --- nvidia-smi -q -x --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rel", "driver", "cuda", "names"),
    [
        (P100, "375.66", None, ["Tesla P100-PCIE-12GB", "Tesla P100-PCIE-12GB_2"]),
        (A10G, "515.105.01", "11.7", ["NVIDIA A10G"]),
        (VGPU, "513.46", "11.6", ["GRID P4-1Q"]),
        (A100, "535.54.03", "12.2", ["NVIDIA A100-SXM4-80GB"]),
        (RTX3080, "595.58.03", "13.2", ["NVIDIA GeForce RTX 3080"]),
    ],
)
def test_smi_xml_reads_driver_cuda_and_gpu_names(rel: str, driver: str, cuda: str | None, names: list[str]) -> None:
    parsed = smi(rel)
    assert parsed["driver_version"] == driver
    assert parsed["cuda_version"] == cuda
    assert [g["name"] for g in parsed["gpus"]] == names
    assert [g["index"] for g in parsed["gpus"]] == list(range(len(names)))
    for gpu in parsed["gpus"]:
        assert set(gpu) == GPU_KEYS
        assert gpu["source"] == "nvidia-smi"
        # No driver's XML carries a compute capability; the parser must not guess one.
        assert gpu["compute_capability"] is None


@pytest.mark.parametrize(
    ("rel", "total", "used", "temp", "power"),
    [
        (P100, 11567, 11400, 31, 24.84),
        (A10G, 23028, 22, 17, 25.58),
        (VGPU, 1024, 807, 0, None),
        (A100, 81920, 50, 27, 67.03),
        (RTX3080, 10240, 9184, 27, 142.33),
    ],
)
def test_smi_xml_reads_memory_temperature_and_power_across_layouts(
    rel: str, total: int, used: int, temp: int, power: float | None
) -> None:
    gpu = smi(rel)["gpus"][0]
    assert (gpu["memory_total_mib"], gpu["memory_used_mib"], gpu["temperature_c"]) == (total, used, temp)
    assert gpu["power_draw_w"] == power


@pytest.mark.parametrize(
    ("rel", "gen_current", "gen_max", "width_current", "width_max"),
    [
        (P100, 3, 3, 16, 16),
        (A10G, 1, 4, 8, 16),
        (VGPU, None, None, None, None),
        (A100, 4, 4, 16, 16),
        (RTX3080, 4, 4, 16, 16),
    ],
)
def test_smi_xml_reads_pcie_link_generation_and_width(
    rel: str, gen_current: int | None, gen_max: int | None, width_current: int | None, width_max: int | None
) -> None:
    gpu = smi(rel)["gpus"][0]
    assert (gpu["pcie_gen_current"], gpu["pcie_gen_max"]) == (gen_current, gen_max)
    assert (gpu["pcie_width_current"], gpu["pcie_width_max"]) == (width_current, width_max)


def test_smi_xml_a100_reports_mig_and_ecc() -> None:
    gpu = smi(A100)["gpus"][0]
    assert gpu["mig_mode"] is True
    assert gpu["ecc_uncorrected"] == 0
    assert gpu["persistence_mode"] is False
    assert gpu["pci_bus_id"] == "00000000:01:00.0"
    assert gpu["pci_device_id"] == "20B210DE"
    assert gpu["uuid"] == "GPU-513536b6-7d19-9063-b049-1e69664bb298"
    assert gpu["mig_devices"] == [{"index": i, "uuid": None, "name": None, "memory_total_mib": 19968} for i in range(4)]
    # Retired pages and remapped rows are N/A on this A100: unknown, not "fine".
    assert gpu["retired_pages_pending"] is None
    assert gpu["remapped_rows_pending"] is None
    assert gpu["processes"] == []


def test_smi_xml_p100_old_layout_reads_both_gpus_double_bit_ecc_and_retirement() -> None:
    gpus = smi(P100)["gpus"]
    assert [g["pci_bus_id"] for g in gpus] == ["0000:04:00.0", "0000:82:00.0"]
    assert [g["uuid"] for g in gpus] == [
        "GPU-28604e81-21ec-cc48-6759-bf2648b22e16",
        "GPU-46915a82-3fd2-8e11-ae26-a80b607c04f3",
    ]
    assert [g["ecc_uncorrected"] for g in gpus] == [0, 0]
    assert [g["retired_pages_pending"] for g in gpus] == [False, False]
    assert [g["mig_mode"] for g in gpus] == [None, None]
    # gpu_idle is Active on both: an idle GPU is not a throttling problem.
    assert [g["throttle_reasons"] for g in gpus] == [[], []]


def test_smi_xml_a10g_reports_process_and_remapped_rows() -> None:
    gpu = smi(A10G)["gpus"][0]
    assert gpu["processes"] == [{"pid": 725, "name": "/usr/lib/xorg/Xorg", "used_mib": 22}]
    assert gpu["remapped_rows_pending"] is False
    assert gpu["ecc_uncorrected"] == 0
    assert gpu["mig_mode"] is None
    assert gpu["mig_devices"] == []


def test_smi_xml_rtx3080_r595_has_no_ecc_and_reads_instant_power() -> None:
    gpu = smi(RTX3080)["gpus"][0]
    assert gpu["ecc_uncorrected"] is None  # GeForce: every ECC counter is N/A
    assert gpu["power_draw_w"] == 142.33  # R570+ only has instant/average_power_draw
    assert gpu["pci_device_id"] == "221610DE"
    assert gpu["throttle_reasons"] == []


def test_smi_xml_vgpu_windows_na_fields_are_none_and_processes_kept() -> None:
    gpu = smi(VGPU)["gpus"][0]
    assert gpu["persistence_mode"] is None
    assert gpu["throttle_reasons"] == []  # <clocks_throttle_reasons>N/A</clocks_throttle_reasons>
    assert len(gpu["processes"]) == 13
    assert gpu["processes"][0] == {"pid": 1188, "name": None, "used_mib": None}
    assert gpu["processes"][-1] == {"pid": 15104, "name": "C:\\Windows\\explorer.exe", "used_mib": None}


def test_smi_xml_active_throttle_reasons_are_named_without_prefix_or_gpu_idle() -> None:
    text = read(f"nvidia-smi-xml/{A100}")
    for reason in ("gpu_idle", "sw_power_cap", "hw_slowdown"):
        tag = f"clocks_event_reason_{reason}"
        text = text.replace(f"<{tag}>Not Active</{tag}>", f"<{tag}>Active</{tag}>")
    assert parsers.parse_nvidia_smi_xml(text)["gpus"][0]["throttle_reasons"] == ["sw_power_cap", "hw_slowdown"]


def test_smi_xml_old_throttle_block_is_read_too() -> None:
    tag = "clocks_throttle_reason_hw_slowdown"
    text = read(f"nvidia-smi-xml/{A10G}").replace(f"<{tag}>Not Active</{tag}>", f"<{tag}>Active</{tag}>")
    assert parsers.parse_nvidia_smi_xml(text)["gpus"][0]["throttle_reasons"] == ["hw_slowdown"]


def test_smi_xml_sums_volatile_uncorrectable_ecc_but_not_aggregate() -> None:
    text = read(f"nvidia-smi-xml/{A100}")
    volatile, aggregate = text.split("<aggregate>", 1)
    volatile = volatile.replace(
        "<sram_uncorrectable>0</sram_uncorrectable>\n                <dram_correctable>",
        "<sram_uncorrectable>2</sram_uncorrectable>\n                <dram_correctable>",
    )
    volatile = volatile.replace(
        "<dram_uncorrectable>0</dram_uncorrectable>", "<dram_uncorrectable>3</dram_uncorrectable>"
    )
    aggregate = aggregate.replace(
        "<dram_uncorrectable>0</dram_uncorrectable>", "<dram_uncorrectable>99</dram_uncorrectable>"
    )
    assert parsers.parse_nvidia_smi_xml(volatile + "<aggregate>" + aggregate)["gpus"][0]["ecc_uncorrected"] == 5


def test_smi_xml_old_layout_counts_volatile_double_bit_total() -> None:
    text = read(f"nvidia-smi-xml/{P100}")
    # The first <double_bit><total> of the file is GPU 0's volatile one.
    head, tail = text.split("</double_bit>", 1)
    head = head[: head.rindex("<total>0</total>")] + "<total>4</total>" + head[head.rindex("<total>0</total>") + 16 :]
    gpus = parsers.parse_nvidia_smi_xml(head + "</double_bit>" + tail)["gpus"]
    assert [g["ecc_uncorrected"] for g in gpus] == [4, 0]


def test_smi_xml_reports_pending_row_remap_and_page_retirement() -> None:
    a10g = read(f"nvidia-smi-xml/{A10G}").replace(
        "<remapped_row_pending>No</remapped_row_pending>", "<remapped_row_pending>Yes</remapped_row_pending>"
    )
    assert parsers.parse_nvidia_smi_xml(a10g)["gpus"][0]["remapped_rows_pending"] is True
    p100 = read(f"nvidia-smi-xml/{P100}").replace(
        "<pending_retirement>No</pending_retirement>", "<pending_retirement>Yes</pending_retirement>", 1
    )
    assert [g["retired_pages_pending"] for g in parsers.parse_nvidia_smi_xml(p100)["gpus"]] == [True, False]


def test_smi_xml_cut_short_keeps_the_complete_gpus() -> None:
    text = read(f"nvidia-smi-xml/{P100}")
    cut = text[: text.index("Tesla P100-PCIE-12GB_2") + 100]
    parsed = parsers.parse_nvidia_smi_xml(cut)
    assert parsed["driver_version"] == "375.66"
    assert [g["pci_bus_id"] for g in parsed["gpus"]] == ["0000:04:00.0"]


def test_smi_xml_refuses_entity_declarations() -> None:
    lol = "".join(f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, 10))
    bomb = (
        f'<?xml version="1.0"?><!DOCTYPE nvidia_smi_log [<!ENTITY lol0 "lol">{lol}]>'
        "<nvidia_smi_log>&lol9;</nvidia_smi_log>"
    )
    assert parsers.parse_nvidia_smi_xml(bomb) == {"driver_version": None, "cuda_version": None, "gpus": []}


@pytest.mark.parametrize(
    "text",
    [
        "",
        read("nvidia-smi-text/debian12-535.309.01-no-kernel-module.stdout.txt"),
        "<html><gpu><product_name>x</product_name></gpu></html>",
    ],
    ids=["empty", "nvidia-smi-failure", "other-document"],
)
def test_smi_xml_that_is_not_an_nvidia_smi_log_gives_nothing(text: str) -> None:
    assert parsers.parse_nvidia_smi_xml(text) == {"driver_version": None, "cuda_version": None, "gpus": []}


# --- plain nvidia-smi ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rel", "driver", "cuda"),
    [
        ("geforce-470.63.01-cuda-11.4.txt", "470.63.01", "11.4"),
        ("geforce-rtx-2070-440.100-cuda-10.2.txt", "440.100", "10.2"),
        ("rtx-2000-ada-580.95.05-cuda-13.0.txt", "580.95.05", "13.0"),
        ("debian12-535.309.01-no-kernel-module.stdout.txt", None, None),
        ("truenas-driver-library-mismatch-580.txt", None, None),
    ],
)
def test_smi_banner_reads_driver_and_max_cuda(rel: str, driver: str | None, cuda: str | None) -> None:
    assert parsers.parse_cuda_driver_version_from_smi_text(read(f"nvidia-smi-text/{rel}")) == {
        "driver_version": driver,
        "cuda_version": cuda,
    }


# --- CUDA toolkit -------------------------------------------------------------------------------


def test_cuda_version_json_fragment_gives_sdk_version() -> None:
    assert parsers.parse_cuda_version_json(read("cuda-version-json/hipify-13.0.2-fragment.txt")) == "13.0.2"


def test_cuda_version_json_whole_document_gives_sdk_version() -> None:
    fragment = read("cuda-version-json/hipify-13.0.2-fragment.txt").rstrip().rstrip(",")
    assert parsers.parse_cuda_version_json("{\n" + fragment + "\n}\n") == "13.0.2"


@pytest.mark.parametrize("text", ["", "{}", '{"cuda": "12.4"}', "[1, 2]", "CUDA Version 11.0.207"])
def test_cuda_version_json_without_cuda_entry_is_none(text: str) -> None:
    assert parsers.parse_cuda_version_json(text) is None


def test_cuda_version_txt_reads_full_version() -> None:
    assert parsers.parse_cuda_version_txt(read("cuda-version-txt/cuda-11.0.207.txt")) == "11.0.207"


def test_cuda_h_define_gives_major_minor() -> None:
    assert parsers.parse_cuda_h_version(read("cuda-h/cuda-13.0-pypi-nvidia-cuda-runtime-13.0.96-excerpt.h")) == "13.0"


@pytest.mark.parametrize(
    ("rel", "expected"),
    [
        ("pypi-nvidia-cuda-nvcc-13.0.88.txt", "13.0.88"),
        ("debian12-nvidia-cuda-toolkit-11.8.89.txt", "11.8.89"),
        ("mxochicale-10.1.243.txt", "10.1.243"),
        ("mxochicale-10.2.89.txt", "10.2.89"),
    ],
)
def test_nvcc_version_reads_full_version(rel: str, expected: str) -> None:
    assert parsers.parse_nvcc_version(read(f"nvcc/{rel}")) == expected


def test_nvcc_version_falls_back_to_release_without_v_field() -> None:
    text = read("nvcc/debian12-nvidia-cuda-toolkit-11.8.89.txt").replace(", V11.8.89", "")
    assert parsers.parse_nvcc_version(text) == "11.8"


@pytest.mark.parametrize(
    ("rel", "expected"),
    [
        ("cudnn_version-9.24.0-excerpt.h", "9.24.0"),
        ("cudnn_version-8.2.1-excerpt.h", "8.2.1"),
        ("cudnn-7.2.1-excerpt.h", "7.2.1"),
    ],
)
def test_cudnn_header_reads_major_minor_patch(rel: str, expected: str) -> None:
    assert parsers.parse_cudnn_header(read(f"cudnn/{rel}")) == expected


# --- frameworks ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rel", "expected"),
    [
        (
            "torch-2.13.0+cpu.py.txt",
            {
                "version": "2.13.0+cpu",
                "cuda": None,
                "hip": None,
                "git_version": "cf30153c4c131c8164ee7798e5022d810682e2cb",
            },
        ),
        (
            "torch-2.14.1+cu130.py.txt",
            {
                "version": "2.14.1+cu130",
                "cuda": "13.0",
                "hip": None,
                "git_version": "5c4886908584029761b579af026dcfb627c84070",
            },
        ),
    ],
)
def test_torch_version_py_cpu_build_has_no_cuda(rel: str, expected: dict[str, Any]) -> None:
    assert parsers.parse_torch_version_py(read(f"torch-version-py/{rel}")) == expected


@pytest.mark.parametrize(
    ("rel", "expected"),
    [
        ("tensorflow_cpu-2.21.0-linux.py.txt", {"cuda": None, "cudnn": None, "is_cuda_build": False}),
        ("tensorflow-2.15.1-linux.py.txt", {"cuda": "12.2", "cudnn": "8", "is_cuda_build": True}),
        ("tensorflow_gpu-2.0.0-win_amd64.py.txt", {"cuda": "10.0", "cudnn": "7", "is_cuda_build": True}),
    ],
)
def test_tf_build_info_reads_dict_and_module_level_styles(rel: str, expected: dict[str, Any]) -> None:
    assert parsers.parse_tf_build_info(read(f"tf-build-info/{rel}")) == expected


def test_tf_build_info_cut_short_still_reads_cuda() -> None:
    text = read("tf-build-info/tensorflow-2.15.1-linux.py.txt")
    cut = text[: text.index("('is_rocm_build'")]
    assert parsers.parse_tf_build_info(cut) == {"cuda": "12.2", "cudnn": "8", "is_cuda_build": True}


# --- system -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rel", "expected"),
    [
        (
            "debian12-this-machine",
            {"ID": "debian", "VERSION_ID": "12", "PRETTY_NAME": "Debian GNU/Linux 12 (bookworm)"},
        ),
        ("ubuntu24", {"ID": "ubuntu", "ID_LIKE": "debian", "VERSION_ID": "24.04", "VERSION_CODENAME": "noble"}),
        ("rhel9", {"ID": "rhel", "ID_LIKE": "fedora", "VERSION_ID": "9.6", "PLATFORM_ID": "platform:el9"}),
        ("alpine", {"ID": "alpine", "VERSION_ID": "3.23.2", "PRETTY_NAME": "Alpine Linux v3.23"}),
    ],
)
def test_os_release_unquotes_values(rel: str, expected: dict[str, str]) -> None:
    parsed = parsers.parse_os_release(read(f"os-release/{rel}"))
    assert {k: parsed.get(k) for k in expected} == expected


def test_os_release_undoes_shell_escapes_and_skips_comments() -> None:
    text = read("os-release/ubuntu24").replace('NAME="Ubuntu"', '# a comment\nNAME="Ubuntu \\"Noble\\""')
    assert parsers.parse_os_release(text)["NAME"] == 'Ubuntu "Noble"'
    assert "# a comment" not in parsers.parse_os_release(text)


@pytest.mark.parametrize(
    ("rel", "count", "first"),
    [
        (
            "relion-436-syslog-xid13-old-format.txt",
            3,
            {
                "xid": 13,
                "pci_bus_id": "0000:41:00",
                "message": "Graphics Exception: ESR 0x5067b0=0x9 0x5067b4=0x24 0x5067a8=0x4c1eb72 0x5067ac=0x174",
            },
        ),
        (
            "collenchyma-blas-14-dmesg-xid31.txt",
            8,
            {"xid": 31, "pci_bus_id": "0000:01:00", "message": "Ch 00000013, engmask 00000101, intr 10000000"},
        ),
        (
            "bumblebee-677-dmesg-xid32-31.txt",
            3,
            {"xid": 32, "pci_bus_id": "0000:01:00", "message": "Channel ID 00000000 intr 00004000"},
        ),
        (
            "gpud-pr46-dmesg-ctime-xid13-109.txt",
            4,
            {
                "xid": 13,
                "pci_bus_id": "0000:cb:00",
                "message": "Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter",
            },
        ),
        (
            "open-gpu-kernel-modules-1150-xid45.txt",
            7,
            {"xid": 45, "pci_bus_id": "0000:dc:00", "message": "Ch 00000001 caused by previous Xid 149"},
        ),
        (
            "vllm-5901-dmesg-xid13-unknown-pid.txt",
            2,
            {
                "xid": 13,
                "pci_bus_id": "0000:43:00",
                "message": "Graphics Exception: ESR 0x52e7b0=0x101000e 0x52e7b4=0x4 0x52e7a8=0xc81eb60 0x52e7ac=0x1174",
            },
        ),
        (
            "nixpkgs-539036-journal-xid13-pid-name.txt",
            1,
            {
                "xid": 13,
                "pci_bus_id": "0000:01:00",
                "message": "Graphics Exception: channel 0x00000005, Class 0000c997, Offset 00000000, Data",
            },
        ),
        (
            "nvsentinel-155-xid79-and-fallen-off-bus.txt",
            1,
            {"xid": 79, "pci_bus_id": "0000:44:00", "message": "GPU has fallen off the bus"},
        ),
    ],
)
def test_xid_lines_give_code_bus_and_message_without_pid_fields(rel: str, count: int, first: dict[str, Any]) -> None:
    events = parsers.parse_xid_lines(read(f"xid/{rel}"))
    assert len(events) == count
    assert events[0] == first
    assert all(not e["message"].startswith(("pid=", "name=")) for e in events)


def test_xid_109_message_follows_the_process_fields() -> None:
    last = parsers.parse_xid_lines(read("xid/gpud-pr46-dmesg-ctime-xid13-109.txt"))[-1]
    assert last == {
        "xid": 109,
        "pci_bus_id": "0000:cb:00",
        "message": "Ch 00000008, errorString CTX SWITCH TIMEOUT, Info 0x58005",
    }


def test_ldconfig_p_lists_sonames_and_paths_without_header_or_flags() -> None:
    entries = parsers.parse_ldconfig_p(read("ldconfig/debian12-libcuda1.txt"))
    assert len(entries) == 543  # the header says "543 libs found in cache"
    assert ("libcuda.so.1", "/lib/x86_64-linux-gnu/libcuda.so.1") in entries
    assert ("libnvidia-ml.so.1", "/lib/x86_64-linux-gnu/libnvidia-ml.so.1") in entries
    assert ("libcudart.so.13", "/usr/local/cuda-13.0/lib/libcudart.so.13") in entries
    assert all("(" not in name and path.startswith("/") for name, path in entries)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("libcudart.so.12.2.140", "12.2.140"),
        ("libcuda.so.535.104.05", "535.104.05"),
        ("libnvidia-pkcs11-openssl3.so.535.309.01", "535.309.01"),
        ("libcudnn.so.9", "9"),
        ("/usr/local/cuda-13.0/lib/libcudart.so.13", "13"),
        ("libcudart.so", None),
        ("libcudart.so.", None),
        ("", None),
    ],
)
def test_lib_version_from_name_reads_the_soname_suffix(name: str, expected: str | None) -> None:
    assert parsers.lib_version_from_name(name) == expected


def test_dpkg_status_lists_installed_packages() -> None:
    packages = parsers.parse_dpkg_status(read("dpkg-status/debian12-nvidia-535-stanzas.txt"))
    assert len(packages) == 17
    assert ("libcuda1", "535.309.01-0+deb12u1") in packages
    assert ("nvidia-persistenced", "535.171.04-1~deb12u1") in packages


def test_dpkg_status_skips_removed_but_not_purged_packages() -> None:
    text = read("dpkg-status/debian12-nvidia-535-stanzas.txt")
    stanza = text.index("Package: libcuda1\n")
    status = text.index("Status: install ok installed", stanza)
    text = text[:status] + "Status: deinstall ok config-files" + text[status + len("Status: install ok installed") :]
    names = [name for name, _ in parsers.parse_dpkg_status(text)]
    assert "libcuda1" not in names
    assert len(names) == 16


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (read("gcc/debian12-dumpfullversion.txt"), "12.2.0"),
        (read("gcc/debian12-version.txt"), "12.2.0"),
        ("", None),
    ],
    ids=["dumpfullversion", "version", "empty"],
)
def test_gcc_version_reads_the_compiler_version(text: str, expected: str | None) -> None:
    assert parsers.parse_gcc_version(text) == expected


# --- never raises: Hypothesis -----------------------------------------------------------------

TEXT_PARSERS: list[Callable[[str], Any]] = [
    parsers.parse_proc_driver_version,
    parsers.parse_nvidia_smi_xml,
    parsers.parse_cuda_version_json,
    parsers.parse_cuda_version_txt,
    parsers.parse_cuda_h_version,
    parsers.parse_nvcc_version,
    parsers.parse_cudnn_header,
    parsers.parse_torch_version_py,
    parsers.parse_tf_build_info,
    parsers.parse_os_release,
    parsers.parse_xid_lines,
    parsers.parse_ldconfig_p,
    parsers.lib_version_from_name,
    parsers.parse_dpkg_status,
    parsers.parse_gcc_version,
    parsers.parse_cuda_driver_version_from_smi_text,
    parsers.parse_nvidia_smi_text,
    parsers.parse_nvidia_smi_csv,
    parsers.parse_device_query,
    parsers.parse_jax_environment_info,
    parsers.parse_nvidia_smi_topo,
]

FIXTURES = sorted(str(p.relative_to(DATA)) for p in DATA.rglob("*") if p.is_file() and p.name != "SOURCES.md")
FIXTURE_TEXT = {rel: read(rel) for rel in FIXTURES}
XML_FIXTURES = [rel for rel in FIXTURES if rel.startswith("nvidia-smi-xml/")]

SHAPES: dict[Callable[[str], Any], Callable[[Any], bool]] = {
    parsers.parse_proc_driver_version: lambda r: set(r) == {"version", "flavor", "gcc"},
    parsers.parse_nvidia_smi_xml: lambda r: (
        set(r) == {"driver_version", "cuda_version", "gpus"} and all(set(g) == GPU_KEYS for g in r["gpus"])
    ),
    parsers.parse_torch_version_py: lambda r: set(r) == {"version", "cuda", "hip", "git_version"},
    parsers.parse_tf_build_info: lambda r: set(r) == {"cuda", "cudnn", "is_cuda_build"},
    parsers.parse_os_release: lambda r: isinstance(r, dict) and all(isinstance(v, str) for v in r.values()),
    parsers.parse_xid_lines: lambda r: (
        isinstance(r, list) and all(set(e) == {"xid", "pci_bus_id", "message"} and isinstance(e["xid"], int) for e in r)
    ),
    parsers.parse_ldconfig_p: lambda r: isinstance(r, list) and all(len(e) == 2 for e in r),
    parsers.parse_dpkg_status: lambda r: isinstance(r, list) and all(len(e) == 2 for e in r),
    parsers.parse_cuda_driver_version_from_smi_text: lambda r: set(r) == {"driver_version", "cuda_version"},
    parsers.parse_nvidia_smi_text: lambda r: (
        set(r) == {"driver_version", "cuda_version", "smi_version", "no_devices", "gpus", "mig_devices", "processes"}
        and all(isinstance(g["index"], int) for g in r["gpus"])),
    parsers.parse_nvidia_smi_csv: lambda r: isinstance(r, list) and all(isinstance(row, dict) for row in r),
    parsers.parse_device_query: lambda r: set(r) == {"device_count", "devices", "result"},
    parsers.parse_jax_environment_info: lambda r: "device_kinds" in r and "nvidia_smi" in r,
    parsers.parse_nvidia_smi_topo: lambda r: set(r) == {"columns", "links", "cpu_affinity", "numa_affinity"},
}


def check_all_parsers(text: str) -> None:
    for parse in TEXT_PARSERS:
        result = parse(text)
        shape = SHAPES.get(parse, lambda r: r is None or isinstance(r, str))
        assert shape(result), (parse.__name__, result)


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_every_parser_survives_arbitrary_text(text: str) -> None:
    check_all_parsers(text)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("<>/=\"'!&;[]?# \n\tgpuxmlnvidia_smi_logENTITYDOCTYPE0123456789.:"))))
def test_every_parser_survives_markup_shaped_noise(text: str) -> None:
    check_all_parsers(text)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.integers(), st.none(), st.floats(), st.text(), st.booleans()))
def test_cuda_version_from_int_survives_anything(value: Any) -> None:
    result = parsers.cuda_version_from_int(value)
    assert result is None or isinstance(result, str)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=1000, max_value=99_999))
def test_cuda_version_from_int_round_trips(value: int) -> None:
    major, minor = parsers.cuda_version_from_int(value).split(".")
    assert int(major) * 1000 + int(minor) * 10 == value - value % 10


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(FIXTURES), st.data())
def test_every_parser_survives_mutated_real_fixtures(rel: str, data: st.DataObject) -> None:
    text = FIXTURE_TEXT[rel]
    at = data.draw(st.integers(min_value=0, max_value=len(text)), label="at")
    mutation = data.draw(st.sampled_from(["truncate", "insert", "delete", "duplicate"]), label="mutation")
    if mutation == "truncate":
        text = text[:at]
    elif mutation == "insert":
        text = text[:at] + data.draw(st.text(max_size=40), label="inserted") + text[at:]
    elif mutation == "delete":
        text = text[:at] + text[at + data.draw(st.integers(min_value=1, max_value=200), label="length") :]
    else:
        text = text[:at] + text[at // 2 : at] + text[at:]
    check_all_parsers(text)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(XML_FIXTURES), st.data())
def test_smi_xml_cut_anywhere_never_invents_gpus(rel: str, data: st.DataObject) -> None:
    full = [g["uuid"] for g in parsers.parse_nvidia_smi_xml(FIXTURE_TEXT[rel])["gpus"]]
    cut = FIXTURE_TEXT[rel][: data.draw(st.integers(min_value=0, max_value=len(FIXTURE_TEXT[rel])))]
    seen = [g["uuid"] for g in parsers.parse_nvidia_smi_xml(cut)["gpus"]]
    assert seen == full[: len(seen)]


@pytest.mark.parametrize(("fixture", "util"), [
    ("geforce-rtx-3080-595.58.03.xml", 65),     # <gpu_util>65 %</gpu_util>
    ("a100-sxm4-80gb-mig-535.54.03.xml", None),  # N/A in MIG mode
])
def test_smi_xml_utilization(fixture: str, util: int | None) -> None:
    gpu = parsers.parse_nvidia_smi_xml((DATA / "nvidia-smi-xml" / fixture).read_text())["gpus"][0]
    assert gpu["utilization_pct"] == util


# --- issue 11: what real outputs say and the parser used to drop ---------------------------------------


def test_old_drivers_pending_blacklist_counts_as_pending_retirement() -> None:
    # Drivers of the K80 era name the flag <pending_blacklist>; derived from the real 375.66 file by
    # writing the old element name with a pending page.
    text = read("nvidia-smi-xml/tesla-p100-x2-375.66.xml").replace(
        "<pending_retirement>No</pending_retirement>", "<pending_blacklist>Yes</pending_blacklist>", 1)
    gpus = parsers.parse_nvidia_smi_xml(text)["gpus"]
    assert gpus[0]["retired_pages_pending"] is True
    assert gpus[1]["retired_pages_pending"] is False


@pytest.mark.parametrize("value", ["Not Found", "N/A", "[N/A]", "Unknown Error", "[Unknown Error]", ""])
def test_smi_cuda_and_driver_values_that_say_unknown_are_never_versions(value: str) -> None:
    text = read("nvidia-smi-xml/a10g-515.105.01.xml")
    text = text.replace("<cuda_version>11.7</cuda_version>", f"<cuda_version>{value}</cuda_version>")
    text = text.replace("<driver_version>515.105.01</driver_version>", f"<driver_version>{value}</driver_version>")
    parsed = parsers.parse_nvidia_smi_xml(text)
    assert parsed["cuda_version"] is None and parsed["driver_version"] is None
    assert parsed["gpus"] and parsed["gpus"][0]["name"]


def test_smi_text_banner_cuda_na_is_unknown() -> None:
    banner = read("nvidia-smi-text/geforce-470.63.01-cuda-11.4.txt")
    assert parsers.parse_cuda_driver_version_from_smi_text(banner)["cuda_version"] == "11.4"
    na = banner.replace("CUDA Version: 11.4", "CUDA Version: N/A")
    assert parsers.parse_cuda_driver_version_from_smi_text(na)["cuda_version"] is None


@pytest.mark.parametrize("framing", ["\n", "  \n", "\r\n", "\ufeff", "$ nvidia-smi -q -x\n",
                                     "nvidia-smi -q -x > smi.xml\n\n"])
def test_nvidia_smi_xml_with_framing_before_its_declaration_still_parses(framing: str) -> None:
    text = (Path(__file__).parent / "data" / "nvidia-smi-xml" / "a10g-515.105.01.xml").read_text(encoding="utf-8")
    got = parsers.parse_nvidia_smi_xml(framing + text)
    assert got["driver_version"] == "515.105.01"
    assert [g["name"] for g in got["gpus"]] == ["NVIDIA A10G"]
