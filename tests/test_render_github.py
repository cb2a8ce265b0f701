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
