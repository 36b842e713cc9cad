"""The text report of a graded comparison and of its promotion rules, as ``vally compare``
and ``vally experiment run`` print them.

Every interval printed next to a word (better, worse, pass, fail) is the interval that
decided it (:mod:`vally_compare.statistics.decisions`).
"""

from __future__ import annotations

from collections.abc import Sequence

from vally_compare.graded import FigureDelta, GradedComparison
from vally_compare.rules import PromotionResult
from vally_compare.statistics.estimates import Interval

MARKS = {"pass": "PASS", "fail": "FAIL", "inconclusive": "INCONCLUSIVE"}


def _num(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "—"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def _signed(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "—"
    if abs(value) >= 1000:
        return f"{value:+,.0f}"
    return f"{value:+.{digits}f}"


def interval_text(interval: Interval | None, digits: int = 3) -> str:
    """``[low, high]`` with signs, or ``—`` when there is none."""
    if interval is None:
        return "—"
    return f"[{_signed(interval.low, digits)}, {_signed(interval.high, digits)}]"


def _short(case_id: str, single_eval: bool) -> str:
    return case_id.split("/", 1)[1] if single_eval and "/" in case_id else case_id


def _figure_rows(figures: Sequence[FigureDelta], level: float) -> list[str]:
    header = (
        f"  {'':24} {'baseline':>10} {'candidate':>10} {'delta':>10}  "
        f"{f'{level:.0%} CI':<22} {'paired':>6}  reading"
    )
    rows = [header]
    for f in figures:
        arrow = "↑" if f.better == "higher" else "↓"
        plain = f.kind == "grader" or f.unit == f.name or f.unit.startswith(("score", "share"))
        unit = "" if plain else f" ({f.unit})"
        label = f"{f.name}{' (judged)' if f.judged else ''}{unit} {arrow}"
        rows.append(
            f"  {label:<24} {_num(f.baseline_mean):>10} {_num(f.candidate_mean):>10} "
            f"{_signed(f.delta):>10}  {interval_text(f.interval):<22} {f.paired:>6}  "
            f"{f.difference}"
        )
    return rows


def comparison_lines(
    comparison: GradedComparison, *, verbose: bool = False, title: str | None = None
) -> list[str]:
    """The report of one graded comparison, groups included."""
    b, c = comparison.baseline, comparison.candidate
    single_eval = len({case.key[0] for case in comparison.cases}) <= 1 and not any(
        m.key[0] != (comparison.cases[0].key[0] if comparison.cases else m.key[0])
        for m in comparison.missing
    )
    lines = [title or f"Graded comparison: {b.label} (baseline) → {c.label} (candidate)"]
    suite = (
        f"suite {b.suite_hash}"
        if comparison.suite_same and b.suite_hash == c.suite_hash
        else f"suites {b.suite_hash} → {c.suite_hash}"
    )
    method = "cases" if comparison.method == "cases" else "repeats (Welch)"
    lines.append(
        f"  {suite} · {len(comparison.cases)} cases in both runs · "
        f"{comparison.confidence_level:.0%} intervals over {method}"
    )
    for warning in comparison.warnings:
        lines.append(f"  ⚠ {warning}")
    lines += _body(comparison, single_eval, verbose)
    dimensions: dict[str, int] = {}
    for group in comparison.groups:
        dimensions[group.scope[0]] = dimensions.get(group.scope[0], 0) + 1
    for group in comparison.groups:
        by, value = group.scope
        if dimensions[by] == 1 and len(group.cases) == len(comparison.cases):
            continue  # one group holding every case says nothing new
        lines.append("")
        lines.append(f"By {by}: {value}")
        for warning in group.warnings:
            lines.append(f"  ⚠ {warning}")
        lines += _body(group, single_eval, verbose)
    return lines


def _body(comparison: GradedComparison, single_eval: bool, verbose: bool) -> list[str]:
    lines: list[str] = []
    level = comparison.confidence_level
    if comparison.graders:
        lines.append("Graders (mean score per case; delta over cases scored in both runs)")
        lines += _figure_rows(comparison.graders, level)
    else:
        lines.append("Graders: none scored in either run")
    if comparison.metrics:
        lines.append("Metrics (↑ higher is better, ↓ lower is better)")
        lines += _figure_rows(comparison.metrics, level)

    def names(ids: Sequence[str]) -> str:
        return ", ".join(_short(i, single_eval) for i in ids) or "none"

    improved = [c for c in comparison.cases if c.outcome == "improved"]
    regressed = [c for c in comparison.cases if c.outcome == "regressed"]
    lines.append(
        f"Cases: {len(improved)} improved, {len(regressed)} regressed, "
        f"{len(comparison.cases) - len(improved) - len(regressed)} unchanged"
    )
    for word, cases in (("improved", improved), ("regressed", regressed)):
        for case in cases:
            lines.append(f"  {word:<9} {_short(case.id, single_eval)}: {case.reason}")
    flips = comparison.flips
    to_fail = [c.id for c in flips if c.flip == "pass→fail"]
    to_pass = [c.id for c in flips if c.flip == "fail→pass"]
    ties = [c.id for c in comparison.ties]
    lines.append(
        f"Flips: pass→fail {len(to_fail)} ({names(to_fail)}) · "
        f"fail→pass {len(to_pass)} ({names(to_pass)}) · ties at 0.5 {len(ties)}"
        + (f" ({names(ties)})" if ties else "")
    )
    lines.append(
        f"Failed cases (an errored trial): baseline {comparison.failed['baseline']}, "
        f"candidate {comparison.failed['candidate']}"
    )
    if comparison.missing:
        lines.append(
            "Missing: "
            + ", ".join(
                f"{_short(m.id, single_eval)} (only in the {m.present_in})"
                for m in comparison.missing
            )
        )
    if verbose:
        lines.append("Per case (grader changes):")
        for case in comparison.cases:
            changes = ", ".join(f"{g} {d:+.3f}" for g, d in case.deltas.items()) or "—"
            lines.append(f"  {_short(case.id, single_eval)}: {changes}")
    return lines


def promotion_lines(result: PromotionResult, source: str | None = None) -> list[str]:
    """Each rule's verdict with its reason, then the overall verdict."""
    lines = [f"Promotion rules{f' ({source})' if source else ''}:"]
    for rule in result.rules:
        scope = f" [{rule.scope}]" if rule.scope and rule.scope not in rule.name else ""
        lines.append(f"  {MARKS[rule.verdict]:<12} {rule.name}{scope}: {rule.reason}")
    failing = [r for r in result.rules if r.verdict != "pass"]
    if result.verdict == "promote":
        lines.append(f"Verdict: PROMOTE (all {len(result.rules)} rules pass)")
    else:
        lines.append(
            f"Verdict: HOLD ({len(failing)} of {len(result.rules)} rules did not pass: "
            + ", ".join(r.name for r in failing)
            + ")"
        )
    return lines
