"""examples/slurm and examples/kubernetes: shellcheck, a run against fake schedulers, the manifests' fields.

The fakes stand in for Slurm and kubectl only; gpu-doctor itself runs for real (`python -m doctor`),
each "node" diagnosing a facts snapshot built with make_facts.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from factories import make_facts

from doctor.cli import main
from doctor.model.facts import Facts
from doctor.pipeline import diagnose

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SBATCH = EXAMPLES / "slurm" / "preflight.sbatch"
K8S = EXAMPLES / "kubernetes"
COLLECT = K8S / "collect.sh"

HEALTHY = make_facts()
NOT_LOADED = replace(HEALTHY, driver=replace(HEALTHY.driver, module_loaded=False, kernel_module=None,
                                             nvml_error="Driver Not Loaded"), gpus=[])


def shellcheck(*args: str, stdin: str | None = None) -> None:
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (.ci/run installs Debian's)")
    done = subprocess.run(["shellcheck", *args], input=stdin, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def script(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


def fake_bin(tmp_path: Path) -> Path:
    """gpu-doctor (real, reading each node's snapshot), and fakes of srun, scontrol and kubectl."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script(bin_dir / "gpu-doctor", f"""#!/bin/bash
# The real gpu-doctor; `check` diagnoses this node's snapshot instead of probing the test machine.
if [ "$1" = check ]; then exec {sys.executable} -m doctor "$@" --facts "$FAKE_FACTS/$SLURMD_NODENAME.json"; fi
exec {sys.executable} -m doctor "$@"
""")
    script(bin_dir / "srun", """#!/bin/bash
# One task per node in FAKE_UP, sequentially, honouring --output/--error with %N.
echo "$@" >> "$FAKE_LOG"
out=/dev/stdout err=/dev/stderr
while [ $# -gt 0 ]; do
  case $1 in
    --output=*) out=${1#--output=} ;;
    --error=*) err=${1#--error=} ;;
    --*) ;;
    *) break ;;
  esac
  shift
done
rc=0
for node in $FAKE_UP; do
  SLURMD_NODENAME=$node "$@" > "${out//%N/$node}" 2> "${err//%N/$node}" || rc=$?
done
exit $rc
""")
    script(bin_dir / "scontrol", """#!/bin/bash
[ "$1 $2" = "show hostnames" ] || exit 9
printf '%s\\n' $FAKE_ALL
""")
    script(bin_dir / "kubectl", """#!/bin/bash
# get pods → "POD NODE" lines from FAKE_PODS; logs → each FAKE_LOGS/POD.log with kubectl's --prefix.
echo "$@" >> "$FAKE_LOG"
case $1 in
  get) cat "$FAKE_PODS" ;;
  logs)
    for f in "$FAKE_LOGS"/*.log; do
      pod=$(basename "$f" .log)
      sed "s|^|[pod/$pod/gpu-doctor] |" "$f"
    done ;;
  *) exit 9 ;;
esac
""")
    return bin_dir


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "GPU_DOCTOR"))}
    env.update(PATH=f"{fake_bin(tmp_path)}:{env['PATH']}", HOME=str(tmp_path), FAKE_LOG=str(tmp_path / "calls.log"),
               NO_COLOR="1", **extra)
    return env


def snapshots(directory: Path, nodes: dict[str, Facts]) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    for name, facts in nodes.items():
        (directory / f"{name}.json").write_text(facts.to_json())
    return str(directory)


# --- Slurm ----------------------------------------------------------------------------------------


def test_sbatch_passes_shellcheck() -> None:
    shellcheck(str(SBATCH))


def test_sbatch_asks_for_one_task_per_node_and_a_time_limit() -> None:
    directives = [line.split(None, 1)[1] for line in SBATCH.read_text().splitlines() if line.startswith("#SBATCH")]
    assert "--ntasks-per-node=1" in directives
    assert any(d.startswith("--time=") for d in directives)
    assert any(d.startswith(("--gpus-per-node=", "--gres=gpu")) for d in directives)


def run_sbatch(tmp_path: Path, up: list[str], all_nodes: list[str],
               facts: dict[str, Facts]) -> subprocess.CompletedProcess[str]:
    env = env_for(tmp_path, SLURM_JOB_ID="4242", SLURM_JOB_NUM_NODES=str(len(all_nodes)),
                  SLURM_JOB_NODELIST="gpu[001-003]", REPORTS_ROOT=str(tmp_path / "reports"),
                  FAKE_UP=" ".join(up), FAKE_ALL=" ".join(all_nodes),
                  FAKE_FACTS=snapshots(tmp_path / "facts", facts))
    return subprocess.run(["bash", str(SBATCH)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          check=False)


def test_sbatch_preflight_fails_on_a_bad_node_and_a_missing_report(tmp_path: Path) -> None:
    done = run_sbatch(tmp_path, up=["gpu001", "gpu002"], all_nodes=["gpu001", "gpu002", "gpu003"],
                      facts={"gpu001": HEALTHY, "gpu002": NOT_LOADED})
    assert done.returncode == 1, done.stderr
    reports = tmp_path / "reports" / "4242"
    assert sorted(p.name for p in reports.glob("*.json")) == ["gpu001.json", "gpu002.json"]
    assert json.loads((reports / "gpu002.json").read_text())["status"] == "fail"
    rows = [line.split()[:3] for line in done.stdout.splitlines() if line.startswith("gpu00")]
    assert rows == [["gpu001", "✓", "ok"], ["gpu002", "✗", "fail"]]
    assert "NOT READY: 1 of 2 node(s) failing" in done.stdout
    assert "gpu-doctor: no report from gpu003" in done.stderr
    assert (tmp_path / "reports" / "4242.md").read_text().startswith("## gpu-doctor fleet: NOT READY")
    srun = (tmp_path / "calls.log").read_text()
    assert "--ntasks-per-node=1" in srun and "--time=" in srun and "gpu-doctor check --json" in srun


def test_sbatch_preflight_passes_when_every_node_does(tmp_path: Path) -> None:
    done = run_sbatch(tmp_path, up=["gpu001", "gpu002"], all_nodes=["gpu001", "gpu002"],
                      facts={"gpu001": HEALTHY, "gpu002": HEALTHY})
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "READY: 0 of 2 node(s) failing, 0 with warnings, 2 ok"


# --- Kubernetes -----------------------------------------------------------------------------------


def manifest(name: str) -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all((K8S / name).read_text()) if d is not None]
    assert len(docs) == 1
    return docs[0]


def containers_of(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return doc["spec"]["template"]["spec"]["containers"]


@pytest.mark.parametrize(("name", "api", "kind"), [("job.yaml", "batch/v1", "Job"),
                                                   ("daemonset.yaml", "apps/v1", "DaemonSet")])
def test_manifest_has_the_fields_kubernetes_requires(name: str, api: str, kind: str) -> None:
    doc = manifest(name)
    assert (doc["apiVersion"], doc["kind"]) == (api, kind)
    assert isinstance(doc["metadata"]["name"], str) and doc["metadata"]["name"]
    containers = containers_of(doc)
    assert containers
    for c in containers:
        assert isinstance(c["name"], str) and c["name"]
        assert isinstance(c["image"], str) and c["image"]
        if kind == "Job":
            gpus = c["resources"]["limits"]["nvidia.com/gpu"]
            assert isinstance(gpus, int) and gpus > 0
        assert "gpu-doctor check --json" in " ".join(c["command"])
    labels = doc["spec"]["template"]["metadata"]["labels"]
    assert labels["app"] == "gpu-doctor"  # what `kubectl logs -l app=gpu-doctor` collects


def test_job_never_restarts_and_has_a_deadline() -> None:
    job = manifest("job.yaml")
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] in ("Never", "OnFailure")
    assert job["spec"]["activeDeadlineSeconds"] > 0
    # one pod per node: the anti-affinity selects the label the Job controller puts on its pods
    term = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["labelSelector"]["matchLabels"] == {"job-name": job["metadata"]["name"]}
    assert term["topologyKey"] == "kubernetes.io/hostname"


def test_daemonset_fits_a_node_of_any_gpu_count_and_sees_all_its_gpus() -> None:
    (c,) = containers_of(manifest("daemonset.yaml"))
    resources = c.get("resources", {})
    assert not any("nvidia.com/" in k for part in resources.values() for k in part)  # never Pending for a count
    env = {e["name"]: e["value"] for e in c["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert set(env["NVIDIA_DRIVER_CAPABILITIES"].split(",")) >= {"compute", "utility"}


def test_daemonset_selector_matches_its_pod_labels() -> None:
    ds = manifest("daemonset.yaml")
    selector = ds["spec"]["selector"]["matchLabels"]
    labels = ds["spec"]["template"]["metadata"]["labels"]
    assert selector and selector.items() <= labels.items()
    assert ds["spec"]["template"]["spec"].get("restartPolicy", "Always") == "Always"
    job_labels = manifest("job.yaml")["spec"]["template"]["metadata"]["labels"]
    assert not selector.items() <= job_labels.items()  # the DaemonSet must not claim the Job's pods


def test_daemonset_turns_ready_only_once_its_report_is_written() -> None:
    container = containers_of(manifest("daemonset.yaml"))[0]
    script_lines = container["command"][2].splitlines()
    probe = container["readinessProbe"]["exec"]["command"]
    assert probe[:2] == ["test", "-e"]
    assert script_lines.index(f"touch {probe[2]}") == script_lines.index("gpu-doctor check --json --timeout 10") + 1


@pytest.mark.parametrize("name", ["job.yaml", "daemonset.yaml"])
def test_container_shell_scripts_pass_shellcheck(name: str) -> None:
    command = containers_of(manifest(name))[0]["command"]
    assert command[:2] == ["sh", "-c"]
    shellcheck("--shell=sh", "-", stdin=command[2])


def test_collect_script_passes_shellcheck() -> None:
    shellcheck(str(COLLECT))


def pod_logs(tmp_path: Path, pods: dict[str, tuple[str, str]]) -> dict[str, str]:
    """FAKE_PODS and FAKE_LOGS for pods: name → (node, log text)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    for pod, (_, text) in pods.items():
        (logs / f"{pod}.log").write_text(text)
    (tmp_path / "pods.txt").write_text("".join(f"{pod} {node}\n" for pod, (node, _) in pods.items()))
    return {"FAKE_LOGS": str(logs), "FAKE_PODS": str(tmp_path / "pods.txt")}


def report(facts: Facts) -> str:
    return json.dumps(diagnose(facts).to_dict(), indent=2) + "\n"


def test_collect_names_reports_by_node_and_fleet_reads_them(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    env = env_for(tmp_path, **pod_logs(tmp_path, {
        "gpu-doctor-7xk2p": ("node-a", report(HEALTHY)),
        "gpu-doctor-9q4zt": ("node-b", report(NOT_LOADED)),
        "gpu-doctor-c8v1m": ("node-c", "gpu-doctor: internal error: OSError: boom\n"),
        "gpu-doctor-dd001": ("node-d", report(HEALTHY)),
        "gpu-doctor-dd002": ("node-d", report(HEALTHY)),
    }))
    done = subprocess.run(["sh", str(COLLECT), "out"], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "gpu-doctor: 5 report(s) in out" in done.stderr
    calls = (tmp_path / "calls.log").read_text()
    assert "logs -l app=gpu-doctor --prefix --tail=-1" in calls
    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert files == ["gpu-doctor-dd001.json", "gpu-doctor-dd002.json", "node-a.json", "node-b.json", "node-c.json"]
    assert (tmp_path / "out" / "node-a.json").read_text() == report(HEALTHY)  # byte for byte: prefix gone

    assert main(["fleet", "--json", str(tmp_path / "out")]) == 1
    data = json.loads(capsys.readouterr().out)
    assert [(n["name"], n["status"]) for n in data["nodes"]] == [
        ("gpu-doctor-dd001", "ok"), ("gpu-doctor-dd002", "ok"), ("node-a", "ok"), ("node-b", "fail")]
    assert [(Path(e["file"]).name, e["reason"][:8]) for e in data["errors"]] == [("node-c.json", "not JSON")]


def test_collect_names_the_pods_without_a_report(tmp_path: Path) -> None:
    env = env_for(tmp_path, **pod_logs(tmp_path, {"gpu-doctor-7xk2p": ("node-a", report(HEALTHY))}))
    with (tmp_path / "pods.txt").open("a") as fh:
        fh.write("gpu-doctor-pend1 \n")  # Pending: no node, no log
    done = subprocess.run(["sh", str(COLLECT), "out"], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 1
    assert "gpu-doctor: no report from pod gpu-doctor-pend1 on node (none: not scheduled)" in done.stderr
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["node-a.json"]


def test_the_documented_one_liner_works(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prefix = "#   mkdir -p reports && kubectl logs"
    line = next(x for x in COLLECT.read_text().splitlines() if x.startswith(prefix))[len("#   "):]
    env = env_for(tmp_path, **pod_logs(tmp_path, {"gpu-doctor-7xk2p": ("node-a", report(HEALTHY)),
                                                  "gpu-doctor-9q4zt": ("node-b", report(NOT_LOADED))}))
    shellcheck("--shell=sh", "-", stdin=line)
    done = subprocess.run(["sh", "-c", line], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert main(["fleet", "--json", str(tmp_path / "reports")]) == 1
    data = json.loads(capsys.readouterr().out)
    assert [(n["name"], n["status"]) for n in data["nodes"]] == [("gpu-doctor-7xk2p", "ok"),
                                                                  ("gpu-doctor-9q4zt", "fail")]
