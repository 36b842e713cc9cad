"""The ``junit`` reporter: writes ``junit.xml`` in the run folder when the run ends.

One ``testsuite`` per eval (and variant). With ``cases: trial`` (the default), one
``testcase`` per trial with ``classname`` the eval and ``name`` ``stimulus[model]#trial``: a
failed verdict becomes a ``failure`` element holding the failing graders' evidence; an
operational error becomes an ``error`` element; a cancelled or ungraded trial is
``skipped``. With ``cases: stimulus``, one ``testcase`` per stimulus and model (``name``
``stimulus[model]``) that passes when its pass rate reaches ``pass_rate`` (1.0 by
default, as the run's verdict: a flaky stimulus is one red case): ``failure`` says the pass
rate and the most common failure reason, ``error`` that some trial errored, ``skipped``
that no trial was graded; its ``properties`` hold ``trials``, ``passed``, ``failed``,
``errored`` and ``passRate``. CI systems read the file as test results (the schema is in
the docs' JUnit reference).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Literal

from pydantic import Field

from vally import (
    ReporterMetadata,
    RunInfo,
    RunOutcome,
    StrictConfig,
    TrialResultRecord,
)
from vally_builtin.reporters import (
    FileReporter,
    GroupKey,
    cap,
    failed_graders,
    format_rate,
    format_score,
    group_records,
    one_line,
    trial_outcome,
)
from vally_builtin.reporters.aggregate import RowAggregate

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
        cases: ``trial``: one test case per trial; ``stimulus``: one per stimulus and
            model, passing when its pass rate reaches ``pass_rate``.
        pass_rate: With ``cases: stimulus``, the share of graded trials that must pass
            for the stimulus's case to pass (1.0: every one, as the run's verdict).
    """

    path: str | None = None
    cases: Literal["trial", "stimulus"] = "trial"
    pass_rate: float = Field(default=1.0, ge=0.0, le=1.0)


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


def build_junit(
    records: Sequence[TrialResultRecord],
    *,
    cases: Literal["trial", "stimulus"] = "trial",
    pass_rate: float = 1.0,
) -> ET.Element:
    """The ``testsuites`` element for ``records`` (sorted, deterministic): a test case per
    trial, or with ``cases="stimulus"`` per stimulus and model (see the module)."""
    if cases == "stimulus":
        return build_stimulus_junit(records, pass_rate=pass_rate)
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
        total_time += _counted(suite, counts, suite_time, totals)
    _counted(root, totals, total_time)
    return _xml_safe(root)


def _counted(
    element: ET.Element,
    counts: dict[str, int],
    seconds: float,
    totals: dict[str, int] | None = None,
) -> float:
    """Write ``counts`` and ``seconds`` on a suite (or the root) and add the counts to
    ``totals``; returns ``seconds``."""
    for name, value in counts.items():
        element.set(name, str(value))
        if totals is not None:
            totals[name] += value
    element.set("time", f"{seconds:.3f}")
    return seconds


def _stimulus_case(
    suite: ET.Element, key: GroupKey, trials: Sequence[TrialResultRecord], pass_rate: float
) -> str:
    """Add the test case of one stimulus and model; its outcome: ``passed``, ``failures``,
    ``errors`` or ``skipped``."""
    row = RowAggregate()
    for record in trials:
        row.add(record, trial_outcome(record))
    stats = row.stats()
    seconds = sum(r.duration_ms for r in trials) / 1000
    case = ET.SubElement(
        suite,
        "testcase",
        classname=key.eval_name,
        name=f"{key.stimulus}[{key.model_label}]",
        time=f"{seconds:.3f}",
    )
    props = ET.SubElement(case, "properties")
    facts = {
        "trials": str(stats.trials),
        "passed": str(stats.passed),
        "failed": str(stats.failed),
        "errored": str(stats.errored),
        "passRate": "" if stats.pass_rate is None else f"{stats.pass_rate:.4f}",
        "requiredPassRate": f"{pass_rate:.4f}",
    }
    if key.variant:
        facts["variant"] = key.variant
    for name, value in facts.items():
        ET.SubElement(props, "property", name=name, value=value)
    top = row.top_reason()
    reason = f"; most common: {top[1]} with {top[0]}" if top is not None else ""
    rate = (
        f"pass rate {format_rate(stats.pass_rate)} ({stats.passed}/{stats.graded}) "
        f"< {format_rate(pass_rate)}"
    )
    if stats.errored:
        message = f"{stats.errored} of {stats.trials} trial(s) errored{reason}"
        error = ET.SubElement(case, "error", message=one_line(message, 500), type="trial")
        error.text = cap(_reasons_text(row), TEXT_LIMIT)
        return "errors"
    if stats.pass_rate is None:
        ET.SubElement(case, "skipped", message="no graded trial")
        return "skipped"
    if stats.pass_rate < pass_rate:
        flaky = " (flaky: some trials passed)" if stats.flaky else ""
        message = f"{rate}{flaky}{reason}"
        failure = ET.SubElement(case, "failure", message=one_line(message, 500), type="grade")
        failure.text = cap(_reasons_text(row), TEXT_LIMIT)
        return "failures"
    return "passed"


def _reasons_text(row: RowAggregate) -> str:
    """Every counted failure reason of a stimulus, most common first."""
    reasons = sorted((row.reasons or {}).items(), key=lambda item: -item[1])
    lines = [f"{count} trial(s): {reason}" for reason, count in reasons]
    if row.other_reasons:
        lines.append(f"{row.other_reasons} trial(s): other reasons")
    return "\n".join(lines)


def build_stimulus_junit(
    records: Sequence[TrialResultRecord], *, pass_rate: float = 1.0
) -> ET.Element:
    """The ``testsuites`` element with one test case per stimulus and model of
    ``records`` (sorted, deterministic)."""
    root = ET.Element("testsuites", name="vally")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    total_time = 0.0
    suites: dict[tuple[str, str], list[tuple[GroupKey, list[TrialResultRecord]]]] = {}
    for key, trials in group_records(records).items():
        suites.setdefault((key.eval_name, key.variant), []).append((key, trials))
    for (eval_name, variant), groups in suites.items():
        suite = ET.SubElement(
            root, "testsuite", name=eval_name + (f" ({variant})" if variant else "")
        )
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        for key, trials in groups:
            counts["tests"] += 1
            outcome = _stimulus_case(suite, key, trials, pass_rate)
            if outcome != "passed":
                counts[outcome] += 1
        suite_time = sum(r.duration_ms for _, trials in groups for r in trials) / 1000
        total_time += _counted(suite, counts, suite_time, totals)
    _counted(root, totals, total_time)
    return _xml_safe(root)


def render_junit(
    records: Sequence[TrialResultRecord],
    *,
    cases: Literal["trial", "stimulus"] = "trial",
    pass_rate: float = 1.0,
) -> str:
    """The XML text of :func:`build_junit`, indented, with an XML declaration."""
    root = build_junit(records, cases=cases, pass_rate=pass_rate)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


class JunitReporter(FileReporter[JunitConfig]):
    """Writes ``junit.xml`` (temporary file, then rename) when the run ends."""

    metadata = ReporterMetadata(
        name="junit",
        description="Writes junit.xml: one testcase per trial, or per stimulus, for CI systems.",
    )
    file_name = JUNIT_FILE

    def render(self, run: RunInfo, outcome: RunOutcome) -> str:
        """The XML of every record."""
        return render_junit(
            outcome.records, cases=self.config.cases, pass_rate=self.config.pass_rate
        )
