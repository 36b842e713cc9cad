"""Comparing two graded runs case by case, with no model in the loop.

A *case* is one stimulus of one eval, ``(eval name, stimulus name)``; its trials (repeats)
are averaged first. :class:`RunTally` reads one run's trial records one at a time and keeps
per case only sums and counts, so memory grows with the cases, never with the records.
:func:`compare_tallies` lines two tallies up and gives a :class:`GradedComparison`:

* per grader: each run's mean over the cases the grader scored in that run, ``delta`` as
  the mean of per-case changes over the cases it scored in both (``paired`` of them), and
  the interval of that delta (see :mod:`vally_compare.statistics.decisions`);
* per case scored in both runs: each grader's change, and whether the case ``improved`` or
  ``regressed``. A change in errors decides first: a case with no errored trial in the
  baseline and one in the candidate is regressed, one whose errors went away is improved,
  whatever its scores did; otherwise the mean of its graders' changes decides (above zero
  improved, below zero regressed, zero or no grader scored in both: neither);
* ``failed``: how many cases had an errored trial in each run; ``missing``: cases only one
  run has, left out of every delta;
* flips: a case passes when its pass rate over its graded repeats is above 0.5, fails below,
  and exactly 0.5 is a tie; a flip is a case that passes in one run and fails in the other;
* metrics in their own units, each with the direction that is better: pass rate and trial
  score (higher), tokens, turns, tool calls, wall time, errors and cost (lower);
* warnings on unequal coverage: missing cases, unequal repeats, cases without graders;
* the same figures per group of cases (by eval, or by a stimulus tag) when asked.

The figures are those of June's ``compareEvaluations`` (means over scored cases, ``delta``
over paired cases, errors-first improved/regressed, ``failed``, ``missing``) and NeMo Gym's
``gym eval compare`` (Welch intervals over repeats, flips with the 0.5 tie).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from vally import TrialResultRecord
from vally_compare.graded_tally import (
    ALL,
    DIFFERENCE_BOUNDS,
    EPSILON,
    METRIC_BY_NAME,
    METRICS,
    PASS_RATE,
    SCORE,
    CaseKey,
    CaseTally,
    IntervalMethod,
    MetricSpec,
    Outcome,
    PassState,
    RunIdentity,
    RunTally,
    Scope,
    case_id,
    identity,
)
from vally_compare.statistics.decisions import (
    DEFAULT_CONFIDENCE,
    Difference,
    Direction,
    difference,
    paired_interval,
    welch_interval,
)
from vally_compare.statistics.estimates import Interval

__all__ = [
    "ALL",
    "EPSILON",
    "METRICS",
    "METRIC_BY_NAME",
    "PASS_RATE",
    "SCORE",
    "CaseDelta",
    "CaseKey",
    "CaseSide",
    "CaseTally",
    "FigureDelta",
    "GradedComparison",
    "IntervalMethod",
    "MetricSpec",
    "MissingCase",
    "Outcome",
    "PassState",
    "RunIdentity",
    "RunTally",
    "Scope",
    "case_id",
    "compare_records",
    "compare_tallies",
]


# --------------------------------------------------------------------------- figures


@dataclass(frozen=True)
class FigureDelta:
    """One figure (a grader or a metric) compared between the runs.

    Attributes:
        name: The grader's or metric's name.
        unit: Its unit.
        better: Which way is better.
        baseline_mean: The mean over the cases it has a value for in the baseline.
        candidate_mean: The same in the candidate.
        baseline_cases: Cases behind ``baseline_mean``.
        candidate_cases: Cases behind ``candidate_mean``.
        delta: The mean of the per-case changes over the cases it has in both runs;
            None when there is none.
        paired: How many cases ``delta`` covers.
        case_interval: The interval over those cases (None below two).
        repeat_interval: Welch's interval over repeats (None unless each run has two
            repeats with values).
        method: Which of the two decides (and is printed).
        improved: Paired cases whose value got better.
        regressed: Paired cases whose value got worse.
        kind: ``grader`` or ``metric``.
        judged: For a grader, whether a model judged it.
    """

    name: str
    unit: str
    better: Direction
    baseline_mean: float | None
    candidate_mean: float | None
    baseline_cases: int
    candidate_cases: int
    delta: float | None
    paired: int
    case_interval: Interval | None
    repeat_interval: Interval | None
    method: IntervalMethod
    improved: int
    regressed: int
    kind: Literal["grader", "metric"]
    judged: bool = False

    @property
    def interval(self) -> Interval | None:
        """The interval that decides: over cases or over repeats, as chosen."""
        return self.case_interval if self.method == "cases" else self.repeat_interval

    @property
    def difference(self) -> Difference:
        """better, worse, no clear difference, or insufficient (read off :attr:`interval`)."""
        return difference(self.interval, self.better)

    @property
    def relative(self) -> float | None:
        """delta over the baseline mean, when that is not zero."""
        if self.delta is None or not self.baseline_mean:
            return None
        return self.delta / abs(self.baseline_mean)


@dataclass(frozen=True)
class CaseSide:
    """One case in one run."""

    trials: int
    errored: int
    pass_rate: float | None
    state: PassState
    scores: dict[str, float]
    metrics: dict[str, float]


@dataclass(frozen=True)
class CaseDelta:
    """One case that both runs have.

    Attributes:
        key: (eval, stimulus).
        deltas: Each grader's change, for graders that scored the case in both runs.
        baseline: The case in the baseline.
        candidate: The case in the candidate.
        outcome: improved, regressed or unchanged (see the module docstring).
        reason: Why, in words.
        tags: The stimulus's tags.
    """

    key: CaseKey
    deltas: dict[str, float]
    baseline: CaseSide
    candidate: CaseSide
    outcome: Outcome
    reason: str
    tags: dict[str, str]

    @property
    def id(self) -> str:
        """``eval/stimulus``."""
        return case_id(self.key)

    @property
    def flip(self) -> str | None:
        """``pass→fail`` or ``fail→pass`` when the case flipped, else None."""
        b, c = self.baseline.state, self.candidate.state
        if b == "pass" and c == "fail":
            return "pass→fail"
        if b == "fail" and c == "pass":
            return "fail→pass"
        return None


@dataclass(frozen=True)
class MissingCase:
    """A case only one run has."""

    key: CaseKey
    present_in: Literal["baseline", "candidate"]

    @property
    def id(self) -> str:
        """``eval/stimulus``."""
        return case_id(self.key)


@dataclass(frozen=True)
class GradedComparison:
    """Two graded runs lined up case by case (see the module docstring).

    Attributes:
        baseline: What the baseline was.
        candidate: What the candidate was.
        confidence_level: The level of every interval.
        method: The interval that decides: over ``cases`` or over ``repeats``.
        scope: The group these figures cover: ``("", "")`` for every case.
        graders: Per grader, in name order.
        metrics: Per metric, in :data:`METRICS` order (those with a value in a run).
        cases: Per case both runs have, in key order.
        missing: Cases only one run has.
        failed: Cases with an errored trial, per run.
        warnings: Unequal coverage and other things to read before the figures.
        groups: The same figures per group, when asked.
        suite_same: Whether both runs are of the same suite.
        changed_cases: Cases both runs have whose content (prompt, graders) differs.
    """

    baseline: RunIdentity
    candidate: RunIdentity
    confidence_level: float
    method: IntervalMethod
    scope: Scope
    graders: list[FigureDelta]
    metrics: list[FigureDelta]
    cases: list[CaseDelta]
    missing: list[MissingCase]
    failed: dict[str, int]
    warnings: list[str]
    groups: list[GradedComparison] = field(default_factory=list)
    suite_same: bool = True
    changed_cases: list[str] = field(default_factory=list)

    @property
    def improved(self) -> list[str]:
        """Ids of the improved cases."""
        return [c.id for c in self.cases if c.outcome == "improved"]

    @property
    def regressed(self) -> list[str]:
        """Ids of the regressed cases."""
        return [c.id for c in self.cases if c.outcome == "regressed"]

    @property
    def flips(self) -> list[CaseDelta]:
        """Cases that flipped between pass and fail."""
        return [c for c in self.cases if c.flip is not None]

    @property
    def ties(self) -> list[CaseDelta]:
        """Cases at exactly a 0.5 pass rate in either run (neither pass nor fail)."""
        return [c for c in self.cases if "tie" in (c.baseline.state, c.candidate.state)]

    def grader(self, name: str) -> FigureDelta | None:
        """The figures of one grader, or None."""
        return next((g for g in self.graders if g.name == name), None)

    def metric(self, name: str) -> FigureDelta | None:
        """The figures of one metric, or None."""
        return next((m for m in self.metrics if m.name == name), None)

    def figure(self, name: str) -> FigureDelta | None:
        """A grader by name, else a metric by name."""
        return self.grader(name) or self.metric(name)

    def group(self, dimension: str, value: str) -> GradedComparison | None:
        """The figures of one group (``("eval", name)`` or a tag and its value)."""
        return next((g for g in self.groups if g.scope == (dimension, value)), None)

    def restricted(self, scope: Scope) -> GradedComparison | None:
        """The comparison for a scope: self for every case, else the group."""
        return self if scope == ALL else self.group(*scope)


def _side(case: CaseTally) -> CaseSide:
    return CaseSide(
        trials=case.trials,
        errored=case.errored,
        pass_rate=case.pass_rate,
        state=case.state,
        scores=case.grader_means(),
        metrics=case.metric_means(),
    )


def _case_delta(key: CaseKey, base: CaseTally, cand: CaseTally) -> CaseDelta:
    b_scores, c_scores = base.grader_means(), cand.grader_means()
    deltas = {g: c_scores[g] - b_scores[g] for g in sorted(b_scores) if g in c_scores}
    outcome: Outcome
    if not base.errored and cand.errored:
        outcome, reason = "regressed", f"started erroring ({cand.errored} of {cand.trials})"
    elif base.errored and not cand.errored:
        outcome, reason = "improved", f"errors went away ({base.errored} of {base.trials})"
    else:
        mean = math.fsum(deltas.values()) / len(deltas) if deltas else 0.0
        if mean > EPSILON:
            outcome, reason = "improved", f"mean grader change {mean:+.3g}"
        elif mean < -EPSILON:
            outcome, reason = "regressed", f"mean grader change {mean:+.3g}"
        elif deltas and any(abs(d) > EPSILON for d in deltas.values()):
            outcome, reason = "unchanged", "grader changes cancel out"
        else:
            outcome, reason = "unchanged", "no change" if deltas else "no grader scored in both"
    return CaseDelta(
        key, deltas, _side(base), _side(cand), outcome, reason, {**base.tags, **cand.tags}
    )


def _figure(
    name: str,
    spec: MetricSpec,
    kind: Literal["grader", "metric"],
    base_values: Mapping[CaseKey, float],
    cand_values: Mapping[CaseKey, float],
    base_repeats: Sequence[float],
    cand_repeats: Sequence[float],
    level: float,
    method: IntervalMethod,
    judged: bool = False,
) -> FigureDelta:
    paired_keys = [k for k in sorted(base_values) if k in cand_values]
    changes = [cand_values[k] - base_values[k] for k in paired_keys]
    sign = 1.0 if spec.better == "higher" else -1.0
    improved = sum(1 for d in changes if sign * d > EPSILON)
    regressed = sum(1 for d in changes if sign * d < -EPSILON)
    return FigureDelta(
        name=name,
        unit=spec.unit,
        better=spec.better,
        baseline_mean=_mean(base_values.values()),
        candidate_mean=_mean(cand_values.values()),
        baseline_cases=len(base_values),
        candidate_cases=len(cand_values),
        delta=_mean(changes),
        paired=len(changes),
        case_interval=paired_interval(changes, level, DIFFERENCE_BOUNDS if spec.bounded else None),
        repeat_interval=welch_interval(base_repeats, cand_repeats, level),
        method=method,
        improved=improved,
        regressed=regressed,
        kind=kind,
        judged=judged,
    )


def _mean(values: Iterable[float]) -> float | None:
    items = list(values)
    return math.fsum(items) / len(items) if items else None


def compare_tallies(
    baseline: RunTally,
    candidate: RunTally,
    *,
    confidence_level: float = DEFAULT_CONFIDENCE,
    method: IntervalMethod = "cases",
) -> GradedComparison:
    """Line two runs up case by case (see the module docstring), with a group breakdown
    for every dimension both tallies were built with."""
    base_id = identity(baseline)
    cand_id = identity(candidate)
    whole = _compare_scope(baseline, candidate, ALL, confidence_level, method, base_id, cand_id)
    scopes: set[Scope] = set()
    for tally in (baseline, candidate):
        for key, case in tally.cases.items():
            scopes.update(s for s in tally.scopes_of(key, case.tags) if s != ALL)
    groups = [
        _compare_scope(baseline, candidate, scope, confidence_level, method, base_id, cand_id)
        for scope in sorted(scopes)
    ]
    changed = [
        case_id(key)
        for key, case in sorted(baseline.cases.items())
        if key in candidate.cases and _changed(case, candidate.cases[key])
    ]
    # a case one run lacks is listed as missing, not taken for another suite: the suites
    # differ when a shared case changed, or when both runs recorded different suites
    recorded = (baseline.recorded_suite_hash(), candidate.recorded_suite_hash())
    suite_same = not changed and (None in recorded or recorded[0] == recorded[1])
    warnings = list(whole.warnings)
    if changed:
        shown = ", ".join(changed[:5]) + (
            f" and {len(changed) - 5} more" if len(changed) > 5 else ""
        )
        warnings.insert(0, f"{len(changed)} cases differ in content between the runs: {shown}")
    elif not suite_same:
        warnings.insert(
            0, f"the runs are of different suites (suite {recorded[0]} against {recorded[1]})"
        )
    return GradedComparison(
        **{
            **whole.__dict__,
            "groups": groups,
            "suite_same": suite_same,
            "changed_cases": changed,
            "warnings": warnings,
        }
    )


def _grader_figures(
    baseline: RunTally,
    candidate: RunTally,
    base_cases: Mapping[CaseKey, CaseTally],
    cand_cases: Mapping[CaseKey, CaseTally],
    scope: Scope,
    level: float,
    method: IntervalMethod,
) -> list[FigureDelta]:
    """Every grader's figures over the cases of a scope, in name order."""
    names = sorted({g for c in (*base_cases.values(), *cand_cases.values()) for g in c.graders})
    return [
        _figure(
            name,
            MetricSpec(name, "score (0-1)", "higher", bounded=True),
            "grader",
            {
                k: c.graders[name].total / c.graders[name].count
                for k, c in base_cases.items()
                if name in c.graders and c.graders[name].count
            },
            {
                k: c.graders[name].total / c.graders[name].count
                for k, c in cand_cases.items()
                if name in c.graders and c.graders[name].count
            },
            baseline.repeat_values(scope, f"grader:{name}"),
            candidate.repeat_values(scope, f"grader:{name}"),
            level,
            method,
            judged=baseline.grader_judged.get(name, False)
            or candidate.grader_judged.get(name, False),
        )
        for name in names
    ]


def _changed(base: CaseTally, cand: CaseTally) -> bool:
    """Whether a case both runs have differs in content: by the recorded case
    fingerprints when both runs recorded them, else by the stimuli the records hold."""
    if base.fingerprint is not None and cand.fingerprint is not None:
        return base.fingerprint != cand.fingerprint
    return base.content != cand.content


def _compare_scope(
    baseline: RunTally,
    candidate: RunTally,
    scope: Scope,
    level: float,
    method: IntervalMethod,
    base_id: RunIdentity,
    cand_id: RunIdentity,
) -> GradedComparison:
    base_cases = {k: c for k, c in baseline.cases.items() if scope in baseline.scopes_of(k, c.tags)}
    cand_cases = {
        k: c for k, c in candidate.cases.items() if scope in candidate.scopes_of(k, c.tags)
    }
    cases = [
        _case_delta(key, base_cases[key], cand_cases[key])
        for key in sorted(base_cases)
        if key in cand_cases
    ]
    missing = [MissingCase(k, "baseline") for k in sorted(base_cases) if k not in cand_cases]
    missing += [MissingCase(k, "candidate") for k in sorted(cand_cases) if k not in base_cases]
    missing.sort(key=lambda m: m.key)
    graders = _grader_figures(baseline, candidate, base_cases, cand_cases, scope, level, method)
    metrics = []
    for spec in METRICS:
        base_values = {
            k: c.metrics[spec.name].total / c.metrics[spec.name].count
            for k, c in base_cases.items()
            if spec.name in c.metrics and c.metrics[spec.name].count
        }
        cand_values = {
            k: c.metrics[spec.name].total / c.metrics[spec.name].count
            for k, c in cand_cases.items()
            if spec.name in c.metrics and c.metrics[spec.name].count
        }
        if not base_values and not cand_values:
            continue
        metrics.append(
            _figure(
                spec.name,
                spec,
                "metric",
                base_values,
                cand_values,
                baseline.repeat_values(scope, spec.name),
                candidate.repeat_values(scope, spec.name),
                level,
                method,
            )
        )
    failed = {
        "baseline": sum(1 for c in base_cases.values() if c.errored),
        "candidate": sum(1 for c in cand_cases.values() if c.errored),
    }
    return GradedComparison(
        baseline=base_id,
        candidate=cand_id,
        confidence_level=level,
        method=method,
        scope=scope,
        graders=graders,
        metrics=metrics,
        cases=cases,
        missing=missing,
        failed=failed,
        warnings=_coverage_warnings(base_cases, cand_cases, missing, method, graders),
    )


def _coverage_warnings(
    base_cases: Mapping[CaseKey, CaseTally],
    cand_cases: Mapping[CaseKey, CaseTally],
    missing: Sequence[MissingCase],
    method: IntervalMethod,
    graders: Sequence[FigureDelta],
) -> list[str]:
    warnings = []
    for side in ("baseline", "candidate"):
        ids = [m.id for m in missing if m.present_in != side]
        if ids:
            shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
            warnings.append(f"{len(ids)} cases missing from the {side}: {shown}")
    base_repeats = {len(c.repeats) for c in base_cases.values()}
    cand_repeats = {len(c.repeats) for c in cand_cases.values()}
    if len(base_repeats | cand_repeats) > 1:
        warnings.append(
            "unequal repeats: the baseline has "
            + _counts(base_repeats)
            + " per case, the candidate "
            + _counts(cand_repeats)
        )
    ungraded = [
        case_id(k)
        for k, c in sorted(base_cases.items())
        if k in cand_cases and not c.has_graders and not cand_cases[k].has_graders
    ]
    if ungraded:
        warnings.append(f"{len(ungraded)} cases have no graders in either run")
    if method == "repeats" and graders and all(g.repeat_interval is None for g in graders):
        warnings.append(
            "no interval over repeats: each run needs at least two repeats with values "
            "(set runs: 2 or more), or use --interval cases"
        )
    return warnings


def _counts(values: set[int]) -> str:
    if not values:
        return "none"
    return str(next(iter(values))) if len(values) == 1 else f"{min(values)} to {max(values)}"


def compare_records(
    baseline: Iterable[TrialResultRecord],
    candidate: Iterable[TrialResultRecord],
    *,
    by: Sequence[str] = (),
    confidence_level: float = DEFAULT_CONFIDENCE,
    method: IntervalMethod = "cases",
    labels: tuple[str, str] = ("baseline", "candidate"),
) -> GradedComparison:
    """Compare two runs' trial records (any iterables, read once each)."""
    base = RunTally(labels[0], by).add_all(baseline)
    cand = RunTally(labels[1], by).add_all(candidate)
    return compare_tallies(base, cand, confidence_level=confidence_level, method=method)
