"""One run's trials folded into per-case sums: the input of a graded comparison.

:class:`RunTally` reads a run's trial records one at a time and keeps, per case (one
stimulus of one eval), only counts and sums: its trials and errored trials, its graded and
passed repeats, each grader's scores and each metric's values, and per repeat the sums
behind Welch's interval over repeats. Memory grows with the cases, never with the records.
See :mod:`vally_compare.graded` for the comparison built from two tallies.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from vally import (
    RunSummaryRecord,
    TrialResultRecord,
    case_fingerprint,
    is_errored,
    is_graded,
    suite_fingerprint,
)
from vally_compare.statistics.decisions import Direction

CaseKey = tuple[str, str]
"""(eval name, stimulus name)."""
IntervalMethod = Literal["cases", "repeats"]
"""Which interval decides: over cases (paired, the default) or over repeats (Welch)."""
Outcome = Literal["improved", "regressed", "unchanged"]
"""What happened to one case."""
PassState = Literal["pass", "fail", "tie", "ungraded"]
"""A case's outcome in one run, from its pass rate over graded repeats."""
EPSILON = 1e-12
"""Changes smaller than this are no change (float noise of a mean of equal scores)."""
DIFFERENCE_BOUNDS = (-1.0, 1.0)
"""The range of a change in a grader score or a pass rate."""


@dataclass(frozen=True)
class MetricSpec:
    """A figure the comparison reads from each trial."""

    name: str
    unit: str
    better: Direction
    bounded: bool = False


PASS_RATE = MetricSpec("pass_rate", "share of repeats", "higher", bounded=True)
SCORE = MetricSpec("score", "score (0-1)", "higher", bounded=True)
METRICS: tuple[MetricSpec, ...] = (
    PASS_RATE,
    SCORE,
    MetricSpec("tokens", "tokens", "lower"),
    MetricSpec("turns", "turns", "lower"),
    MetricSpec("tool_calls", "calls", "lower"),
    MetricSpec("wall_time_ms", "ms", "lower"),
    MetricSpec("errors", "errors", "lower"),
    MetricSpec("cost_usd", "USD", "lower"),
)
"""Every metric, in report order."""
METRIC_BY_NAME = {m.name: m for m in METRICS}


def case_id(key: CaseKey) -> str:
    """``eval/stimulus``: how records and rules name a case."""
    return f"{key[0]}/{key[1]}"


def _metric_values(record: TrialResultRecord) -> dict[str, float]:
    """The trial's metrics; those it has no value for are absent: pass rate and score
    without a graded result, the agent's figures (tokens, turns, tool calls, wall time,
    cost) for an errored trial or one without a price, every figure without a trajectory
    (``errors`` counts the trajectory's error events, errored trials included)."""
    values: dict[str, float] = {}
    if is_graded(record) and record.grade_result is not None:
        values["pass_rate"] = 1.0 if record.grade_result.passed else 0.0
        values["score"] = float(record.grade_result.score)
    metrics = record.trajectory.metrics if record.trajectory is not None else None
    if metrics is not None:
        values["errors"] = float(metrics.error_count)
    if metrics is not None and not is_errored(record):
        values["tokens"] = float(metrics.token_usage.total_tokens)
        values["turns"] = float(metrics.turn_count)
        values["tool_calls"] = float(metrics.tool_call_count)
        values["wall_time_ms"] = float(metrics.wall_time_ms)
        if record.cost.total_usd is not None:
            values["cost_usd"] = float(record.cost.total_usd)
    return {k: v for k, v in values.items() if math.isfinite(v)}


class _Sum:
    """A sum and a count."""

    __slots__ = ("count", "total")

    def __init__(self) -> None:
        self.total = 0.0
        self.count = 0

    def add(self, value: float) -> None:
        self.total += value
        self.count += 1

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None


@dataclass
class CaseTally:
    """What one run did on one case, as sums over its trials."""

    trials: int = 0
    errored: int = 0
    graded: int = 0
    passed: int = 0
    repeats: set[int] = field(default_factory=set)
    graders: dict[str, _Sum] = field(default_factory=dict)
    metrics: dict[str, _Sum] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    fingerprint: str | None = None
    """The case fingerprint the run recorded (``caseHash``), None in older records."""
    content: str | None = None
    """The fingerprint of the stimulus as the record holds it (without the eval-level
    graders): what tells cases apart when a run recorded no ``caseHash``."""
    has_graders: bool = False

    @property
    def pass_rate(self) -> float | None:
        """Passed over graded repeats; None when no repeat was graded."""
        return self.passed / self.graded if self.graded else None

    @property
    def state(self) -> PassState:
        """Pass above 0.5, fail below, tie at exactly 0.5 (see the module docstring)."""
        rate = self.pass_rate
        if rate is None:
            return "ungraded"
        if rate > 0.5:
            return "pass"
        return "fail" if rate < 0.5 else "tie"

    def grader_means(self) -> dict[str, float]:
        """Each grader's mean score over the repeats it scored."""
        return {name: s.total / s.count for name, s in self.graders.items() if s.count}

    def metric_means(self) -> dict[str, float]:
        """Each metric's mean over the repeats that have it."""
        return {name: s.total / s.count for name, s in self.metrics.items() if s.count}


Scope = tuple[str, str]
"""A group of cases: ``("eval", name)`` or ``(tag, value)``; ``("", "")`` is every case."""
ALL: Scope = ("", "")


class RunTally:
    """One run's trials, folded into per-case sums (see the module docstring).

    Args:
        label: The run's name in reports.
        by: Group dimensions to keep per-repeat figures for: ``eval`` or a tag name.
    """

    def __init__(self, label: str, by: Sequence[str] = ()) -> None:
        self.label = label
        self.by = tuple(by)
        self.cases: dict[CaseKey, CaseTally] = {}
        self.grader_types: dict[str, str] = {}
        self.grader_judged: dict[str, bool] = {}
        self.repeat_sums: dict[tuple[Scope, str, int], _Sum] = {}
        """Per (group, figure, repeat): the figure's sum over the cases of that repeat;
        figures are metric names and ``grader:<name>``."""
        self.run_ids: set[str] = set()
        self.variants: set[str] = set()
        self.models: set[str] = set()
        self.summaries: list[RunSummaryRecord] = []
        self.records = 0

    def scopes_of(self, key: CaseKey, tags: Mapping[str, str]) -> list[Scope]:
        """The groups a case belongs to, every case's group first."""
        scopes = [ALL]
        for dimension in self.by:
            if dimension == "eval":
                scopes.append(("eval", key[0]))
            elif dimension in tags:
                scopes.append((dimension, tags[dimension]))
        return scopes

    def add(self, record: TrialResultRecord) -> None:
        """Fold one trial record in."""
        self.records += 1
        key = (record.eval_name, record.stimulus_name)
        case = self.cases.get(key)
        if case is None:
            case = self.cases[key] = CaseTally()
            case.tags = {**record.stimulus.tags, **record.tags}
            recorded = getattr(record, "case_hash", None)
            case.fingerprint = str(recorded) if recorded else None
            case.content = case_fingerprint(record.stimulus)
        self.run_ids.add(record.run_id)
        if record.variant:
            self.variants.add(record.variant)
        if record.model:
            self.models.add(record.model)
        case.trials += 1
        case.repeats.add(record.trial_index)
        if is_errored(record):
            case.errored += 1
        if record.grade_result is not None and record.grade_result.has_graders:
            case.has_graders = True
        if is_graded(record) and record.grade_result is not None:
            case.graded += 1
            case.passed += int(record.grade_result.passed)
        scopes = self.scopes_of(key, case.tags)
        figures: dict[str, float] = _metric_values(record)
        for name, value in figures.items():
            case.metrics.setdefault(name, _Sum()).add(value)
        if record.grade_result is not None:
            for grader in record.grade_result.details:
                self.grader_types.setdefault(grader.name, grader.type)
                judged = bool(grader.metadata.get("judged")) or grader.type == "prompt"
                self.grader_judged[grader.name] = (
                    self.grader_judged.get(grader.name, False) or judged
                )
                if grader.status != "success" or not math.isfinite(grader.score):
                    continue
                case.graders.setdefault(grader.name, _Sum()).add(grader.score)
                figures[f"grader:{grader.name}"] = grader.score
        for scope in scopes:
            for name, value in figures.items():
                slot = (scope, name, record.trial_index)
                self.repeat_sums.setdefault(slot, _Sum()).add(value)

    def add_all(self, records: Iterable[TrialResultRecord]) -> RunTally:
        """Fold every record in; returns self."""
        for record in records:
            self.add(record)
        return self

    def add_summary(self, summary: RunSummaryRecord) -> None:
        """Keep a run summary: what the run recorded of its suite, graders and target; a
        grader it records as judged by a model counts as judged."""
        self.summaries.append(summary)
        for grader in getattr(summary, "graders", None) or []:
            if getattr(grader, "judged", False):
                self.grader_judged[str(grader.name)] = True

    def repeat_values(self, scope: Scope, figure: str) -> list[float]:
        """The figure's mean over cases, one value per repeat, in repeat order."""
        values = []
        for (s, name, _index), total in sorted(
            self.repeat_sums.items(), key=lambda item: item[0][2]
        ):
            if s == scope and name == figure and total.count:
                values.append(total.total / total.count)
        return values

    def recorded_suite_hash(self) -> str | None:
        """The suite fingerprint the run recorded in its summaries (one for all of them),
        else None."""
        recorded = {getattr(s, "suite_hash", None) for s in self.summaries}
        recorded.discard(None)
        return str(next(iter(recorded))) if len(recorded) == 1 else None

    def suite_hash(self) -> str | None:
        """The recorded suite fingerprint, else one computed from the cases the run has
        (which differs from the recorded one when the run skipped cases); None when
        neither is known."""
        recorded = self.recorded_suite_hash()
        if recorded is not None:
            return recorded
        if not self.cases:
            return None
        return suite_fingerprint(
            (key[0], key[1], str(case.fingerprint or case.content))
            for key, case in self.cases.items()
        )


@dataclass(frozen=True)
class RunIdentity:
    """What one side of a comparison was: its runs, suite, graders and target."""

    label: str
    run_ids: list[str]
    variants: list[str]
    models: list[str]
    suite_hash: str | None
    eval_hashes: list[str]
    graders: list[dict[str, Any]]
    targets: list[dict[str, Any]]
    cases: int
    records: int


def identity(tally: RunTally) -> RunIdentity:
    """What a tally's run was: its runs, suite, graders (recorded, else as graded) and
    targets."""
    summaries = tally.summaries
    graders: dict[tuple[str, str], dict[str, Any]] = {}
    for summary in summaries:
        for item in getattr(summary, "graders", None) or []:
            data = (
                item.model_dump(mode="json", by_alias=True)
                if hasattr(item, "model_dump")
                else dict(item)
            )
            graders.setdefault((str(data.get("name")), str(data.get("type"))), data)
    for name, kind in sorted(tally.grader_types.items()):
        graders.setdefault(
            (name, kind),
            {
                "name": name,
                "type": kind,
                "judged": tally.grader_judged.get(name, False),
                "model": None,
            },
        )
    targets = []
    for summary in summaries:
        target = getattr(summary, "target", None)
        if target is not None:
            data = target.model_dump(mode="json", by_alias=True)
            if data not in targets:
                targets.append(data)
    return RunIdentity(
        label=tally.label,
        run_ids=sorted(tally.run_ids),
        variants=sorted(tally.variants),
        models=sorted(tally.models),
        suite_hash=tally.suite_hash(),
        eval_hashes=sorted({s.eval_hash for s in summaries if s.eval_hash}),
        graders=[graders[k] for k in sorted(graders)],
        targets=targets,
        cases=len(tally.cases),
        records=tally.records,
    )
