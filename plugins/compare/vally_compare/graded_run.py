"""Loading graded runs and promotion rules from disk: the I/O around
:mod:`vally_compare.graded` and :mod:`vally_compare.rules`.

A run is a run folder (``results.jsonl`` and ``run-summary.jsonl``), a variant folder of an
experiment, or a results JSONL file (its summaries are read from the same folder when
there). Records are read one at a time and folded into a :class:`RunTally`, so memory grows
with the cases, not the records.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vally import ConfigError, PromotionRules, VallyError
from vally_compare.graded import GradedComparison, IntervalMethod, RunTally, compare_tallies
from vally_compare.rules import PromotionResult, WinRateEvidence, evaluate
from vally_compare.statistics.decisions import DEFAULT_CONFIDENCE

Warn = Callable[[str], None]


class SuiteMismatchError(VallyError):
    """Two runs to be compared are not of the same suite."""

    code = "VALLY_SUITE_MISMATCH"


def _summary_file(path: Path) -> Path:
    from vally import SUMMARY_FILE

    return (path if path.is_dir() else path.parent) / SUMMARY_FILE


def load_tally(
    path: Path, label: str, by: Sequence[str] = (), warn: Warn | None = None
) -> RunTally:
    """One run's records and summaries, folded into a tally.

    Raises:
        ConfigError: No results at ``path``, or no trial records in them.
    """
    from vally import RunSummaryRecord, iter_raw_json_lines, iter_records, results_file

    tally = RunTally(label, by)
    file = results_file(path)
    tally.add_all(iter_records(file, warn))
    if not tally.records:
        raise ConfigError(
            f"no trial records in {file}",
            hint="pass a results.jsonl (or its run directory) that holds finished trials",
        )
    summaries = _summary_file(path)
    if summaries.is_file() and (path.is_dir() or summaries.parent == file.parent):
        with summaries.open(encoding="utf-8") as handle:
            for _number, _line, data in iter_raw_json_lines(handle, str(summaries), warn):
                if isinstance(data, dict) and data.get("type") == "run-summary":
                    try:
                        tally.add_summary(RunSummaryRecord.model_validate(data))
                    except ValueError:
                        continue
    return tally


def check_same_suite(comparison: GradedComparison) -> None:
    """Refuse a comparison of different suites.

    Raises:
        SuiteMismatchError: Cases differ in content, or the recorded suite fingerprints
            differ.
    """
    if comparison.suite_same:
        return
    b, c = comparison.baseline, comparison.candidate
    if comparison.changed_cases:
        shown = ", ".join(comparison.changed_cases[:5])
        more = len(comparison.changed_cases) - 5
        what = (
            f"{len(comparison.changed_cases)} cases of {b.label} and {c.label} differ in "
            f"their prompt, graders or files: {shown}" + (f" and {more} more" if more > 0 else "")
        )
    else:
        what = (
            f"{b.label} is of suite {b.suite_hash} and {c.label} of suite {c.suite_hash}: "
            "the cases or their graders differ"
        )
    raise SuiteMismatchError(
        f"the runs are not of the same suite: {what}",
        hint="compare runs of the same eval files, or pass --allow-different-suites to "
        "compare them anyway (every figure then mixes a change of suite with a change of "
        "target)",
    )


def load_rules(path: Path) -> PromotionRules:
    """A promotion rule set from its YAML file (the file itself, or an experiment file's
    ``promotion:`` section).

    Raises:
        ConfigError: Unreadable, not YAML, or not a valid rule set, with
            ``file:line:column``.
    """
    from vally import SchemaError, SourceLocation, load_yaml, validate_model

    doc = load_yaml(path)
    if doc.data is None:
        raise SchemaError(
            "the promotion rules file is empty; it needs 'rules:' with at least one rule",
            location=SourceLocation(str(path), 1, 1),
            hint="see docs/reference/promotion-rules.md",
        )
    if not isinstance(doc.data, dict):
        raise SchemaError(
            "a promotion rules file is a mapping with 'rules:'",
            location=SourceLocation(str(path), 1, 1),
            hint="see docs/reference/promotion-rules.md",
        )
    data: Any = doc.data
    prefix: tuple[str, ...] = ()
    if "promotion" in data and "rules" not in data:
        data, prefix = data["promotion"], ("promotion",)
    return validate_model(
        PromotionRules,
        data,
        doc.positions,
        prefix=prefix,
        hint="see docs/reference/promotion-rules.md",
    )


def rule_dimensions(rules: PromotionRules) -> list[str]:
    """The group dimensions the rules' scopes need: ``eval`` and each tag a rule names."""
    dims: list[str] = []
    for rule in rules.rules:
        dimension = rule.scope[0]
        if dimension and dimension not in dims:
            dims.append(dimension)
    return dims


@dataclass(frozen=True)
class GradedOutcome:
    """One candidate's graded comparison and, with rules, their verdicts."""

    comparison: GradedComparison
    promotion: PromotionResult | None


def compare_paths(
    baseline: Path,
    candidate: Path,
    *,
    labels: tuple[str, str] | None = None,
    by: Sequence[str] = (),
    confidence_level: float = DEFAULT_CONFIDENCE,
    method: IntervalMethod = "cases",
    allow_different_suites: bool = False,
    warn: Warn | None = None,
) -> GradedComparison:
    """Compare two runs on disk.

    Raises:
        ConfigError: A run cannot be read.
        SuiteMismatchError: They are of different suites (unless allowed).
    """
    names = labels or (str(baseline), str(candidate))
    comparison = compare_tallies(
        load_tally(baseline, names[0], by, warn),
        load_tally(candidate, names[1], by, warn),
        confidence_level=confidence_level,
        method=method,
    )
    if not allow_different_suites:
        check_same_suite(comparison)
    return comparison


def apply_rules(
    comparison: GradedComparison,
    rules: PromotionRules | None,
    win_rate: WinRateEvidence | None = None,
) -> GradedOutcome:
    """The comparison with its rules' verdicts (none without rules)."""
    return GradedOutcome(
        comparison, None if rules is None else evaluate(rules, comparison, win_rate)
    )
