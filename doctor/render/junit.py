"""JUnit XML: each check a test case, so CI systems (GitLab, Jenkins, GitHub test reporters) show it.

A failing finding is a <failure>; with --strict a warning is one too; a check that could not run (its facts
were missing) is <skipped> with its reason; ok and info findings go to <system-out>. A check that does not
apply here (no framework to judge, no Dockerfile …) is no test case: dozens of them would bury the few that
ran, so they are counted in the suite's ``not_applicable`` property and listed, with why, in its
<system-out>. A case about a file line (check --dockerfile) carries ``file`` and ``line`` — the line the
Dockerfile reader recorded for the finding — so a test reporter links to it. ``time`` is how long the
command took, when the caller measured it; ``timestamp`` when the facts were collected.

Every value passes :func:`~doctor.safeio.xml_text`: characters XML 1.0 forbids (NUL, ESC, lone surrogates …)
would make the whole file unreadable to the CI system, so they are written as visible escapes.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from doctor.render.locations import location
from doctor.safeio import xml_text


def render(report: Any, strict: bool = False, elapsed: float | None = None) -> str:
    by_check: dict[str, list[Any]] = {}
    for f in report.findings:
        by_check.setdefault(f.check or f.code, []).append(f)
    ran = [c for c in report.checks if c.status != "not_applicable"]
    absent = [c for c in report.checks if c.status == "not_applicable"]
    suite = ET.Element("testsuite", name="gpu-doctor", tests=str(len(ran)), time=f"{max(elapsed or 0.0, 0.0):.3f}")
    collected = getattr(report.facts, "collected_at", None)
    if isinstance(collected, str) and collected:
        suite.set("timestamp", xml_text(collected[:19]))  # JUnit's timestamp: ISO 8601 without a zone
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="status", value=xml_text(report.status))
    ET.SubElement(props, "property", name="not_applicable", value=str(len(absent)))
    failures = skipped = errors = 0
    for c in ran:
        found = by_check.get(c.id, [])
        bad = [f for f in found if f.severity == "fail" or (strict and f.severity == "warn")]
        # no per-case `time`: the checks are not timed one by one, and a made-up 0 would say they were
        case = ET.SubElement(suite, "testcase", classname=xml_text(f"gpu-doctor.{c.area}"), name=xml_text(c.id))
        where = next((w for w in map(location, bad or found) if w), None)
        if where:
            case.set("file", xml_text(where[0]))
            case.set("line", str(where[1]))
        if bad:
            failures += 1
            failure = ET.SubElement(case, "failure", message=xml_text(bad[0].title), type=xml_text(bad[0].code))
            failure.text = xml_text("\n\n".join(_text(f) for f in bad))
        elif c.status == "crashed":  # the check itself raised: an error of the tool, not a failing machine
            errors += 1
            ET.SubElement(case, "error", message=xml_text(f"the check crashed: {c.reason or ''}"))
        elif c.status == "skipped":
            skipped += 1
            ET.SubElement(case, "skipped", message=xml_text(f"skipped: {c.reason or ''}"))
        if found and not bad:
            ET.SubElement(case, "system-out").text = xml_text("\n".join(f"[{f.severity}] {f.title}" for f in found))
    if absent:
        ET.SubElement(suite, "system-out").text = xml_text(
            f"{len(absent)} check(s) do not apply here:\n"
            + "\n".join(f"  {c.id}: {c.reason or 'not applicable'}" for c in absent))
    suite.set("failures", str(failures))
    suite.set("skipped", str(skipped))
    suite.set("errors", str(errors))
    ET.indent(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"


def _text(f: Any) -> str:
    lines = [f.title]
    if f.detail:
        lines.append(f.detail)
    if f.fix:
        lines.append("fix: " + f.fix.summary)
        lines += [f"  $ {s.shell()}" for s in f.fix.steps]
    lines += [f"evidence: {e.line()}" for e in f.evidence]
    return "\n".join(lines)
