"""JUnit XML: each check a test case, so CI systems (GitLab, Jenkins, GitHub test reporters) show it.

A failing finding is a <failure>; with --strict a warning is one too; a check that did not run is
<skipped> with its reason; ok and info findings go to <system-out>. Every value passes
:func:`~doctor.safeio.xml_text`: characters XML 1.0 forbids (NUL, ESC, lone surrogates …) would make
the whole file unreadable to the CI system, so they are written as visible escapes.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from doctor.model.findings import Finding
from doctor.model.report import Report
from doctor.safeio import xml_text


def render(report: Report, strict: bool = False) -> str:
    by_check: dict[str, list] = {}
    for f in report.findings:
        by_check.setdefault(f.check or f.code, []).append(f)
    suite = ET.Element("testsuite", name="gpu-doctor", tests=str(len(report.checks)))
    failures = skipped = 0
    for c in report.checks:
        case = ET.SubElement(suite, "testcase", classname=xml_text(f"gpu-doctor.{c.area}"), name=xml_text(c.id))
        found = by_check.get(c.id, [])
        bad = [f for f in found if f.severity == "fail" or (strict and f.severity == "warn")]
        if bad:
            failures += 1
            failure = ET.SubElement(case, "failure", message=xml_text(bad[0].title), type=xml_text(bad[0].code))
            failure.text = xml_text("\n\n".join(_text(f) for f in bad))
        elif c.status in ("skipped", "not_applicable"):
            skipped += 1
            ET.SubElement(case, "skipped", message=xml_text(f"{c.status.replace('_', ' ')}: {c.reason or ''}"))
        if found and not bad:
            ET.SubElement(case, "system-out").text = xml_text("\n".join(f"[{f.severity}] {f.title}" for f in found))
    suite.set("failures", str(failures))
    suite.set("skipped", str(skipped))
    suite.set("errors", "0")
    ET.indent(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"


def _text(f: Finding) -> str:
    lines = [f.title]
    if f.detail:
        lines.append(f.detail)
    if f.fix:
        lines.append("fix: " + f.fix.summary)
        lines += [f"  $ {s.shell()}" for s in f.fix.steps]
    lines += [f"evidence: {e.line()}" for e in f.evidence]
    return "\n".join(lines)
