"""The ``junit`` reporter: writes ``junit.xml`` in the run folder when the run ends.

One ``testsuite`` per eval (and variant), one ``testcase`` per trial with ``classname`` the
eval and ``name`` ``stimulus[model]#trial``. A failed verdict becomes a ``failure`` element
holding the failing graders' evidence; an operational error becomes an ``error`` element;
a cancelled or ungraded trial is ``skipped``. CI systems read the file as test results.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence

from vally import (
    ReporterMetadata,
    RunInfo,
    RunOutcome,
    StrictConfig,
    TrialResultRecord,
)
from vally_builtin.reporters import (
    FileReporter,
    cap,
    failed_graders,
    format_score,
    group_records,
    one_line,
    trial_outcome,
)

JUNIT_FILE = "junit.xml"
TEXT_LIMIT = 20_000

_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_text(text: str) -> str:
    """Text with characters XML 1.0 cannot hold (controls, lone surrogates) removed."""
    return _INVALID_XML.sub("", text)


def _xml_safe(root: ET.Element) -> ET.Element:
    """``root`` with every attribute, text and tail made XML-safe (names come from specs
    and records, and may hold any character)."""
    for element in root.iter():
        for name, value in element.attrib.items():
            element.set(name, _xml_text(value))
        if element.text:
            element.text = _xml_text(element.text)
        if element.tail:
            element.tail = _xml_text(element.tail)
    return root


class JunitConfig(StrictConfig):
    """Options of the ``junit`` reporter.

    Attributes:
        path: Write here instead of ``<run_dir>/junit.xml`` (relative to the run folder).
    """

    path: str | None = None


def _case_name(record: TrialResultRecord) -> str:
    return f"{record.stimulus_name}[{record.model or 'default'}]#{record.trial_index}"


def _failure_text(record: TrialResultRecord) -> tuple[str, str]:
    """The failure message (one line) and body (every failing grader with evidence)."""
    grade = record.grade_result
    lines: list[str] = []
    for result in failed_graders(record):
        lines.append(f"✘ {result.name} ({result.type}) score {format_score(result.score)}")
        if result.evidence:
            lines += [f"  {line}" for line in result.evidence.splitlines()]
    if grade is not None:
        lines += [f"constraint violated: {v}" for v in grade.constraint_violations]
    names = [r.name for r in failed_graders(record)]
    if grade is not None and grade.mode == "threshold" and grade.threshold is not None:
        message = f"score {format_score(grade.score)} < threshold {format_score(grade.threshold)}"
    else:
        message = "failed graders: " + (", ".join(names) or "none")
    if grade is not None and grade.constraint_violations:
        message += f"; {len(grade.constraint_violations)} constraint violation(s)"
    return message, "\n".join(lines)


def build_junit(records: Sequence[TrialResultRecord]) -> ET.Element:
    """The ``testsuites`` element for ``records`` (sorted, deterministic)."""
    root = ET.Element("testsuites", name="vally")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    total_time = 0.0
    suites: dict[tuple[str, str], list[TrialResultRecord]] = {}
    for key, trials in group_records(records).items():
        suites.setdefault((key.eval_name, key.variant), []).extend(trials)
    for (eval_name, variant), trials in suites.items():
        suite = ET.SubElement(
            root, "testsuite", name=eval_name + (f" ({variant})" if variant else "")
        )
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        suite_time = 0.0
        for record in trials:
            seconds = record.duration_ms / 1000
            suite_time += seconds
            case = ET.SubElement(
                suite,
                "testcase",
                classname=eval_name,
                name=_case_name(record),
                time=f"{seconds:.3f}",
            )
            counts["tests"] += 1
            outcome = trial_outcome(record)
            if outcome == "failed":
                counts["failures"] += 1
                message, body = _failure_text(record)
                failure = ET.SubElement(
                    case, "failure", message=_xml_text(one_line(message, 500)), type="grade"
                )
                failure.text = _xml_text(cap(body, TEXT_LIMIT))
            elif outcome == "errored":
                counts["errors"] += 1
                if record.error is not None:
                    error = ET.SubElement(
                        case,
                        "error",
                        message=_xml_text(one_line(record.error.message, 500)),
                        type=record.error.code,
                    )
                    error.text = _xml_text(
                        cap(f"{record.error.phase}: {record.error.message}", TEXT_LIMIT)
                    )
                else:
                    message, body = _failure_text(record)
                    error = ET.SubElement(
                        case, "error", message=_xml_text(one_line(message, 500)), type="grader"
                    )
                    error.text = _xml_text(cap(body, TEXT_LIMIT))
            elif outcome in ("cancelled", "ungraded"):
                counts["skipped"] += 1
                if outcome == "cancelled":
                    reason = "cancelled"
                elif record.grade_result is None:
                    reason = "not graded"
                else:
                    reason = "no graders"
                ET.SubElement(case, "skipped", message=reason)
            if record.variant:
                props = ET.SubElement(case, "properties")
                ET.SubElement(props, "property", name="variant", value=record.variant)
        for name, value in counts.items():
            suite.set(name, str(value))
            totals[name] += value
        suite.set("time", f"{suite_time:.3f}")
        total_time += suite_time
    for name, value in totals.items():
        root.set(name, str(value))
    root.set("time", f"{total_time:.3f}")
    return _xml_safe(root)


def render_junit(records: Sequence[TrialResultRecord]) -> str:
    """The XML text of :func:`build_junit`, indented, with an XML declaration."""
    root = build_junit(records)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


class JunitReporter(FileReporter[JunitConfig]):
    """Writes ``junit.xml`` (temporary file, then rename) when the run ends."""

    metadata = ReporterMetadata(
        name="junit",
        description="Writes junit.xml: one testcase per trial for CI systems.",
    )
    file_name = JUNIT_FILE

    def render(self, run: RunInfo, outcome: RunOutcome) -> str:
        """The XML of every record."""
        return render_junit(outcome.records)
