"""check --format nfd: a Node Feature Discovery local feature file.

The format is NFD's (kubernetes-sigs/node-feature-discovery docs/usage/customization-guide.md, "Local
feature source"): `<namespace>/<name>[=<value>]` lines, `#` comments, `# +expiry-time=<RFC3339>`, dot-files
ignored, 64 kB at most. Names and values follow Kubernetes' label syntax (1-63 / 0-63 characters of
[-_.A-Za-z0-9], alphanumeric at both ends).
"""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from factories import make_facts
from sysroot import LIBDIR, Link, build, data, driver_libs, pci_gpu, pci_other

from doctor.pipeline import diagnose
from doctor.render.nfd import PREFIX, labels, parse, render, valid_name, valid_value

REPO = Path(__file__).resolve().parent.parent
LABEL = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-_.A-Za-z0-9]{0,61}[A-Za-z0-9])?"
                   r"=([A-Za-z0-9]([-_.A-Za-z0-9]{0,61}[A-Za-z0-9])?)?$")


def nfd_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln and not ln.startswith("#")]


def test_every_line_is_a_valid_namespaced_label_or_a_comment() -> None:
    for facts in (make_facts(), make_facts(driver__kernel_module="470.82.01", driver__userspace="470.82.01",
                                           driver__cuda_driver_api="11.4")):
        text = render(diagnose(facts))
        assert len(text.encode()) < 64 * 1024
        for line in nfd_lines(text):
            assert LABEL.match(line), line
            assert line.startswith(PREFIX)


def test_a_healthy_node_is_ready_with_its_driver_and_cuda() -> None:
    got = parse(render(diagnose(make_facts())))
    assert got[f"{PREFIX}gpu-doctor.ready"] == "true"
    assert got[f"{PREFIX}gpu-doctor.status"] == "ok"
    assert got[f"{PREFIX}gpu-doctor.driver"] == make_facts().driver.kernel_module
    assert got[f"{PREFIX}gpu-doctor.cuda"] == make_facts().driver.cuda_driver_api
    assert not any("failing" in k for k in got)


def test_a_broken_node_names_its_failing_areas() -> None:
    report = diagnose(make_facts(driver__kernel_module="470.82.01", driver__userspace="470.82.01",
                                 driver__cuda_driver_api="11.4"))
    got = parse(render(report))
    assert got[f"{PREFIX}gpu-doctor.ready"] == "false"
    assert got[f"{PREFIX}gpu-doctor.failing"] in ("driver", "frameworks", "cuda-toolkit")
    assert got[f"{PREFIX}gpu-doctor.failing.{got[PREFIX + 'gpu-doctor.failing']}"] == "true"


def test_the_expiry_directive_is_rfc3339_and_in_the_future() -> None:
    text = render(diagnose(make_facts()), now=1_700_000_000)
    (line,) = [ln for ln in text.splitlines() if ln.startswith("# +expiry-time=")]
    when = datetime.strptime(line.split("=", 1)[1], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    assert when.timestamp() == 1_700_000_000 + 3600


def test_values_that_are_not_label_syntax_are_left_out() -> None:
    report = diagnose(make_facts(driver__kernel_module="550.54.15 (open)", driver__userspace=None))
    assert "gpu-doctor.driver" not in labels(report)
    assert valid_value("") and valid_value("12.4") and not valid_value("-x") and not valid_value("a" * 64)
    assert valid_name("gpu-doctor.failing.cuda-toolkit") and not valid_name("gpu doctor")


def test_output_is_written_atomically_as_nfd_needs(tmp_path: Path) -> None:
    target = tmp_path / "gpu-doctor"
    target.write_text("old\n")
    done = subprocess.run([sys.executable, "-m", "doctor", "check", "--facts",
                           str(REPO / "doctor" / "examples" / "healthy-8x-h100.json"), "--format", "nfd",
                           "--output", str(target)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert parse(target.read_text())[f"{PREFIX}gpu-doctor.ready"] == "true"
    assert [p.name for p in tmp_path.iterdir()] == ["gpu-doctor"]
    assert oct(target.stat().st_mode & 0o777) == "0o644"


PROC = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.54.03  Tue Jun  6 22:20:39 UTC 2023\n"


@pytest.fixture()
def host_without_gpu_access(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A healthy A100 host's files as the DaemonSet's pod sees them under /host: no nvidia-smi answer
    (the pod requests no GPU), the module, the driver libraries and the toolkit on disk."""
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES",
                "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES", "KUBERNETES_SERVICE_HOST", "NO_COLOR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", "/usr/local/cuda/bin:/usr/bin:/bin")
    return build(tmp_path / "host", {
        "/etc/os-release": 'PRETTY_NAME="Ubuntu 22.04.4 LTS"\nID=ubuntu\nVERSION_ID="22.04"\n',
        "/proc/sys/kernel/osrelease": "5.15.0-105-generic\n",
        "/proc/modules": "nvidia_uvm 1540096 0 - Live 0x0\nnvidia 56717312 1 nvidia_uvm, Live 0x0\n",
        "/proc/driver/nvidia/version": PROC,
        **pci_other(), **pci_gpu(), **driver_libs("535.54.03"),
        "/usr/local/cuda-12.2/version.json": '{"cuda": {"name": "CUDA SDK", "version": "12.2.2"}}',
        "/usr/local/cuda-12.2/include/cudnn_version.h": data("cudnn/cudnn_version-9.24.0-excerpt.h"),
        "/usr/local/cuda": Link("cuda-12.2"),
        f"{LIBDIR}/libcudart.so.12.2.140": b"", f"{LIBDIR}/libcudart.so.12": Link("libcudart.so.12.2.140")})


def test_the_daemonset_command_labels_a_healthy_host_ready(host_without_gpu_access: Path, tmp_path: Path) -> None:
    from doctor.cli import main

    features = tmp_path / "features.d"
    features.mkdir()
    code = main(["check", "--root", str(host_without_gpu_access), "--format", "nfd", "--output",
                 str(features / "gpu-doctor"), "--timeout", "10"])
    got = parse((features / "gpu-doctor").read_text())
    assert (code, got[f"{PREFIX}gpu-doctor.ready"]) == (0, "true"), got
    assert got[f"{PREFIX}gpu-doctor.driver"] == "535.54.03"
    assert got[f"{PREFIX}gpu-doctor.cuda"] == "12.2"  # no libcuda call in the pod: 535.54.03 runs CUDA 12.2 natively


def test_a_node_with_too_little_evidence_is_not_labelled_ready() -> None:
    from doctor.model.facts import Facts

    got = parse(render(diagnose(Facts())))
    assert (got[f"{PREFIX}gpu-doctor.ready"], got[f"{PREFIX}gpu-doctor.status"]) == ("false", "unknown")


def test_versions_are_also_integer_labels_that_node_affinity_gt_and_lt_can_compare() -> None:
    facts = make_facts(driver__kernel_module="535.104.05", driver__userspace="535.104.05",
                       driver__cuda_driver_api="12.2", gpu__compute_capability="8.0")
    got = labels(diagnose(facts))
    assert (got["gpu-doctor.driver.major"], got["gpu-doctor.driver.minor"]) == ("535", "104")
    assert (got["gpu-doctor.cuda.major"], got["gpu-doctor.cuda.minor"]) == ("12", "2")
    assert (got["gpu-doctor.compute.major"], got["gpu-doctor.compute.minor"]) == ("8", "0")
    assert got["gpu-doctor.ready"] == "true" and got["gpu-doctor.cuda"] == "12.2"  # beside the readiness labels
    assert all(got[k].isdigit() for k in got if k.endswith((".major", ".minor")))


def test_the_compute_labels_are_the_lowest_gpu_of_the_node() -> None:
    from dataclasses import replace

    base = make_facts()
    facts = replace(base, gpus=[replace(base.gpus[0], compute_capability="9.0"),
                                replace(base.gpus[0], index=1, uuid="GPU-2", compute_capability="7.5")])
    got = labels(diagnose(facts))
    assert (got["gpu-doctor.compute.major"], got["gpu-doctor.compute.minor"]) == ("7", "5")


def test_the_renderer_reads_the_report_not_the_matrix(monkeypatch: pytest.MonkeyPatch) -> None:
    report = diagnose(make_facts(driver__cuda_driver_api=None))
    from doctor import matrix

    def no_matrix(*_a: object, **_k: object) -> None:
        raise AssertionError("the NFD renderer read the matrix")

    monkeypatch.setattr(matrix, "current", no_matrix)
    got = labels(report)
    assert got["gpu-doctor.cuda"]  # from the driver check's evidence: the newest CUDA this driver runs
