"""The one Markdown of a report (doctor.render.markdown): tables, each problem in full, the facts folded."""

from __future__ import annotations

from factories import make_facts

from doctor.model.findings import Evidence, Finding, Fix, FixStep
from doctor.model.report import Report
from doctor.render.markdown import render


def report_with(*findings: Finding) -> Report:
    return Report(facts=make_facts(), findings=list(findings), checks=[])


def test_a_problem_is_shown_in_full_with_its_evidence_and_commands() -> None:
    f = Finding("nouveau.active", "fail", "The nouveau driver is loaded", "It holds the GPU.\nReboot after.",
                [Evidence("driver.nouveau_loaded", True, "file:/proc/modules")],
                Fix("Blacklist nouveau.", [FixStep(["update-initramfs", "-u"], root=True)]), "Driver", "nouveau")
    text = render(report_with(f), title="a workstation")
    assert text.startswith("## gpu-doctor report: a workstation\n")
    part = text.split("### How to fix\n", 1)[1].split("<details>", 1)[0]
    assert part.splitlines()[:4] == ["", "#### ✗ The nouveau driver is loaded", "", "It holds the GPU."]
    assert "- `driver.nouveau_loaded` = `yes` (file:/proc/modules)" in part
    assert "Fix: Blacklist nouveau.\n\n```bash\nsudo update-initramfs -u\n```" in part
    assert "`nouveau.active` · check `nouveau`" in part


def test_a_passing_finding_is_one_table_row_and_not_in_the_problems() -> None:
    text = render(report_with(Finding("toolkit.missing", "ok", "CUDA toolkit found", "long words", area="CUDA toolkit",
                                      check="toolkit.missing")))
    assert "| ✓ | CUDA toolkit found | `toolkit.missing` |" in text
    assert "### How to fix" not in text and "long words" not in text


def test_words_from_the_facts_cannot_become_markup_or_terminal_escapes() -> None:
    f = Finding("x.y", "warn", "t", "<img src=x onerror=alert(1)>\x1b[31m red",
                [Evidence("env.X", "<b>\x1b]0;title\x07</b>", "env")], area="Environment")
    part = render(report_with(f)).split("### How to fix", 1)[1]
    assert "<img" not in part and "<b>" not in part and "\x1b" not in part and "\x07" not in part
    assert "&lt;img src=x onerror=alert(1)&gt;" in part
