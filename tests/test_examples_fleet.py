"""examples/systemd (Prometheus textfile) and examples/kubernetes/nfd-labels.yaml (NFD labels): the commands
they run parse with gpu-doctor's real argument parser, write where their reader looks, pass shellcheck, and the
manifests carry the fields Kubernetes requires."""

from __future__ import annotations

import configparser
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from doctor.cli import build_parser
from doctor.render.nfd import FEATURE_FILE, PREFIX

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SYSTEMD = EXAMPLES / "systemd"
K8S = EXAMPLES / "kubernetes"
TEXTFILE_DIR = "/var/lib/node_exporter/textfile_collector"


def shellcheck(*args: str, stdin: str | None = None) -> None:
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (.ci/run installs Debian's)")
    done = subprocess.run(["shellcheck", *args], input=stdin, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def check_args(command: str) -> Any:
    argv = shlex.split(command)
    assert Path(argv[0]).name == "gpu-doctor" and argv[1] == "check"
    return build_parser(only="check").parse_args(argv[1:])


def unit(name: str) -> configparser.RawConfigParser:
    cp = configparser.RawConfigParser(strict=False, interpolation=None)
    cp.optionxform = str  # type: ignore[assignment,method-assign]
    cp.read_string((SYSTEMD / name).read_text())
    return cp


def test_service_writes_prometheus_into_the_textfile_directory_it_may_write() -> None:
    svc = unit("gpu-doctor-metrics.service")["Service"]
    args = check_args(svc["ExecStart"])
    assert args.format == "prometheus"
    assert str(Path(args.output).parent) == TEXTFILE_DIR and args.output.endswith(".prom")
    assert svc["ReadWritePaths"] == TEXTFILE_DIR
    assert svc["Type"] == "oneshot"
    assert svc["SuccessExitStatus"].split() == ["1", "4"]  # a failing or unknown verdict is a metric, not a failure


def test_service_and_cron_check_the_workloads_python_not_whatever_python3_is_on_path() -> None:
    svc = unit("gpu-doctor-metrics.service")["Service"]
    assert check_args(svc["ExecStart"]).python == ["${GPU_DOCTOR_PYTHON}"]  # systemd expands it to one word
    name, _, value = svc["Environment"].partition("=")
    assert name == "GPU_DOCTOR_PYTHON" and value.startswith("/")
    cron = (SYSTEMD / "gpu-doctor.cron").read_text().splitlines()
    assert f"GPU_DOCTOR_PYTHON={value}" in cron
    (line,) = [ln for ln in cron if ln.startswith("*/5")]
    assert check_args(line.split(None, 6)[6].split(" >", 1)[0]).python == ["$GPU_DOCTOR_PYTHON"]


def test_readme_alerts_when_the_metrics_go_stale() -> None:
    readme = (EXAMPLES.parent / "README.md").read_text()
    rule = readme.split("```yaml\ngroups:", 1)[1].split("```", 1)[0]
    alerts = yaml.safe_load("groups:" + rule)["groups"][0]["rules"]
    stale = [a["expr"] for a in alerts if "gpu_doctor_last_run_timestamp_seconds" in a["expr"]]
    assert any("time() - gpu_doctor_last_run_timestamp_seconds >" in e for e in stale)  # old
    assert any("unless gpu_doctor_last_run_timestamp_seconds" in e for e in stale)  # gone altogether
    assert any(a["expr"].strip().startswith("gpu_doctor_ready == 0") for a in alerts)


def test_timer_triggers_the_service_repeatedly() -> None:
    timer = unit("gpu-doctor-metrics.timer")
    assert timer["Timer"]["OnUnitActiveSec"] and timer["Install"]["WantedBy"] == "timers.target"


def test_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")
    fake = tmp_path / "gpu-doctor"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    for name in ("gpu-doctor-metrics.service", "gpu-doctor-metrics.timer"):
        (tmp_path / name).write_text((SYSTEMD / name).read_text().replace("/usr/local/bin/gpu-doctor", str(fake)))
    done = subprocess.run(["systemd-analyze", "verify", "--man=no", str(tmp_path / "gpu-doctor-metrics.timer")],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60, check=False)
    problems = [ln for ln in done.stderr.splitlines() if "gpu-doctor-metrics" in ln]
    assert not problems, done.stderr


def test_cron_line_runs_the_same_command() -> None:
    (line,) = [ln for ln in (SYSTEMD / "gpu-doctor.cron").read_text().splitlines() if ln.startswith("*/5")]
    fields = line.split(None, 6)
    assert fields[5] == "root" and fields[0] == "*/5"
    command = fields[6].split(" >", 1)[0]
    assert fields[6].endswith(">/dev/null 2>&1")
    args = check_args(command)
    assert args.format == "prometheus" and str(Path(args.output).parent) == TEXTFILE_DIR
    assert "%" not in fields[6]  # cron turns % into a newline
    shellcheck("--shell=sh", "-", stdin=fields[6] + "\n")


def manifest(name: str) -> dict[str, Any]:
    (doc,) = [d for d in yaml.safe_load_all((K8S / name).read_text()) if d is not None]
    return doc


def test_nfd_daemonset_requests_no_gpu_and_writes_nfd_features() -> None:
    ds = manifest("nfd-labels.yaml")
    assert (ds["apiVersion"], ds["kind"]) == ("apps/v1", "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    assert ds["spec"]["selector"]["matchLabels"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()
    (c,) = pod["containers"]
    assert "nvidia.com/gpu" not in str(c.get("resources", {}))
    assert c["command"][:2] == ["sh", "-c"]
    script = c["command"][2]
    (gd,) = [ln.strip() for ln in script.splitlines() if ln.strip().startswith("gpu-doctor")]
    features_dir = script.split("features=", 1)[1].split()[0]
    args = check_args(gd.split(" ||", 1)[0].replace("$features", features_dir))
    assert args.format == "nfd" and args.output == FEATURE_FILE
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounts[args.root]["readOnly"] is True and volumes[mounts[args.root]["name"]]["hostPath"]["path"] == "/"
    features = mounts[str(Path(FEATURE_FILE).parent)]
    assert volumes[features["name"]]["hostPath"]["path"] == str(Path(FEATURE_FILE).parent)
    shellcheck("--shell=sh", "-", stdin=script)


def test_nfd_daemonset_does_not_claim_the_report_daemonsets_pods() -> None:
    mine = manifest("nfd-labels.yaml")["spec"]["selector"]["matchLabels"]
    other = manifest("daemonset.yaml")["spec"]["template"]["metadata"]["labels"]
    assert not mine.items() <= other.items()
    # collect.sh gathers `-l app=gpu-doctor` pod logs as reports: the label pods print no report to their log
    assert manifest("nfd-labels.yaml")["spec"]["template"]["metadata"]["labels"].get("app") != "gpu-doctor"


def test_workload_selects_the_label_gpu_doctor_writes() -> None:
    job = manifest("train-on-ready-nodes.yaml")
    terms = job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    (expr,) = terms[0]["matchExpressions"]
    assert (expr["key"], expr["operator"], expr["values"]) == (f"{PREFIX}gpu-doctor.ready", "In", ["true"])


def test_github_workflow_runs_a_dockerfile_check_with_annotations() -> None:
    flow = yaml.safe_load((EXAMPLES / "github" / "dockerfile-preflight.yml").read_text())
    assert True in flow or "on" in flow  # YAML 1.1 reads the key `on` as true
    steps = flow["jobs"]["preflight"]["steps"]
    (gate,) = [s["run"] for s in steps if "gpu-doctor check" in s.get("run", "")]
    args = check_args(gate)
    assert args.dockerfile == "docker/Dockerfile" and args.format == "github"
    assert args.host_driver and args.target_gpu
