"""--format github: GitHub Actions workflow commands, one per problem, escaped so that text from facts
can never start another command or change a property."""

from __future__ import annotations

from dataclasses import replace

from factories import make_facts

from doctor.model.findings import Evidence
from doctor.pipeline import diagnose
from doctor.render.github import render


def test_each_problem_is_one_command_with_its_level() -> None:
    report = diagnose(make_facts(driver__kernel_module="470.82.01", driver__userspace="470.82.01",
                                 driver__cuda_driver_api="11.4", env__CUDA_VISIBLE_DEVICES=""))
    lines = render(report).splitlines()
    assert lines[-1].startswith("gpu-doctor: NOT READY")
    errors = [ln for ln in lines if ln.startswith("::error ")]
    assert len(errors) == sum(f.severity == "fail" for f in report.findings)
    assert all(ln.startswith("::error title=") for ln in errors)  # not about a file: no file or line property


def test_text_from_facts_cannot_inject_a_workflow_command() -> None:
    report = diagnose(make_facts(env__CUDA_VISIBLE_DEVICES=""))
    evil = "x\n::warning file=/etc/passwd,line=1::pwned\r%0A"
    report = replace(report, findings=[replace(f, title=f.title + evil, code=f.code + ",x:y") if f.severity == "fail"
                                       else f for f in report.findings])
    out = render(report)
    assert "\n::warning file=/etc/passwd" not in out
    bad = [ln for ln in out.splitlines() if "pwned" in ln]
    assert len(bad) == 1 and bad[0].startswith("::error ")
    assert "%0A::warning" in bad[0] and "%250A" in bad[0] and "title=env.cuda_visible_devices%2Cx%3Ay::" in bad[0]


def test_strict_makes_warnings_errors_and_a_location_becomes_file_and_line() -> None:
    report = diagnose(make_facts(gpu__throttle_reasons=["hw_slowdown"]))
    warn = next(f for f in report.findings if f.severity == "warn")
    located = replace(warn, title="docker/Dockerfile:7: " + warn.title,
                      evidence=[Evidence("dockerfile", "docker/Dockerfile:7", "dockerfile"), *warn.evidence])
    report = replace(report, findings=[located])
    (line,) = [ln for ln in render(report, strict=True).splitlines() if ln.startswith("::")]
    assert line.startswith("::error file=docker/Dockerfile,line=7,title=")
    assert "::" + warn.title in line  # the message is the title without the location prefix


def _located(path: str, line: int) -> object:
    report = diagnose(make_facts(gpu__throttle_reasons=["hw_slowdown"]))
    warn = next(f for f in report.findings if f.severity == "warn")
    where = f"{path}:{line}"
    return replace(report, findings=[replace(warn, title=f"{where}: {warn.title}",
                                             evidence=[Evidence("dockerfile", where, "dockerfile"), *warn.evidence])])


def test_a_file_is_annotated_by_its_path_in_the_workspace() -> None:
    absolute = render(_located("/home/runner/work/app/app/docker/Dockerfile", 4),
                      workspace="/home/runner/work/app/app")
    assert "::warning file=docker/Dockerfile,line=4," in absolute
    relative = render(_located("docker/Dockerfile", 4), workspace="/home/runner/work/app/app",
                      cwd="/home/runner/work/app/app/services")  # the step ran in a subdirectory
    assert "::warning file=services/docker/Dockerfile,line=4," in relative
    outside = render(_located("/tmp/Dockerfile", 4), workspace="/home/runner/work/app/app")
    assert "::warning file=/tmp/Dockerfile,line=4," in outside  # not in the checkout: left as it is


def test_information_becomes_a_notice_only_where_it_points_at_a_line() -> None:
    report = diagnose(make_facts())
    info = [replace(f, severity="info") for f in report.findings[:3]]
    report = replace(report, findings=info)
    assert not any(ln.startswith("::notice") for ln in render(report).splitlines())
    at_line = [Evidence("dockerfile", "Dockerfile:9", "dockerfile")]
    located = replace(report, findings=[replace(info[0], evidence=at_line)])
    (notice,) = [ln for ln in render(located).splitlines() if ln.startswith("::")]
    assert notice.startswith("::notice file=Dockerfile,line=9,")


def test_the_cli_annotates_a_dockerfile_by_its_path_in_the_checkout(tmp_path) -> None:
    import os
    import subprocess
    import sys

    checkout = tmp_path / "repo"
    (checkout / "docker").mkdir(parents=True)
    (checkout / "docker" / "Dockerfile").write_text(
        "FROM python:3.11-slim\nRUN pip install torch==2.5.1 --index-url https://download.pytorch.org/whl/cpu\n")
    env = {**os.environ, "GITHUB_WORKSPACE": str(checkout)}
    done = subprocess.run([sys.executable, "-m", "doctor", "check", "--dockerfile", "docker/Dockerfile", "--format",
                           "github"], capture_output=True, text=True, cwd=checkout, env=env, timeout=120, check=False)
    located = [ln for ln in done.stdout.splitlines() if ln.startswith("::") and " file=" in ln]
    assert located, done.stdout + done.stderr
    assert all(" file=docker/Dockerfile,line=" in ln for ln in located)
    outside = subprocess.run([sys.executable, "-m", "doctor", "check", "--dockerfile",
                              str(checkout / "docker" / "Dockerfile"), "--format", "github"], capture_output=True,
                             text=True, cwd=tmp_path, env=env, timeout=120, check=False)
    assert " file=docker/Dockerfile,line=" in outside.stdout  # an absolute path inside the checkout too
