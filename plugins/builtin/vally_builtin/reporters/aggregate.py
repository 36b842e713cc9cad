"""Report rows aggregated as records go by: a few counters per eval, variant, stimulus and
model, never a list of every trial.

The ``markdown`` and ``console`` reporters feed each finished trial's record to a
:class:`ReportAggregate` (a merge feeds it each trial's facts,
:class:`vally.TrialFacts`; a record is counted as its facts, so both count alike) and
render their end-of-run tables from it, so their memory grows with the rows of the
report, not with the trials. Each row also keeps the first :data:`FAILURES_KEPT` failed
or errored trials (by trial index, without their trajectories) for the failure listings,
and counts the rest, and counts the failed or errored trials by their reason
(:func:`failure_reason`: the failing grader and its evidence, or the error), so a
listing can say which reason was the most common.
"""

from __future__ import annotations

import heapq
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from vally import USAGE_FIELDS, RunInfo, TrialFacts, TrialResultRecord
from vally_builtin.reporters import (
    GroupKey,
    StimulusStats,
    TrialOutcome,
    facts_outcome,
    one_line,
)
from vally_builtin.reporters.cost import CostTotals
from vally_builtin.reporters.experiment import VariantCounter, VariantStats, observed_stats

FAILURES_KEPT = 20
"""Failed or errored trials a report row lists; the others are counted."""

REASONS_KEPT = 100
"""Distinct failure reasons a report row counts; trials of further reasons are counted
as :attr:`RowAggregate.other_reasons`."""

REASON_LIMIT = 200
"""The length a failure reason is cut to (on one line) before it is counted."""

_SIDE = len(USAGE_FIELDS)
_CALLS, _INPUT, _OUTPUT = (USAGE_FIELDS.index(n) for n in ("calls", "inputTokens", "outputTokens"))
"""Where :attr:`vally.TrialFacts.usage` holds the counters a report's totals read (the
agent's; the judges' follow them)."""


def failure_reason(record: TrialResultRecord, outcome: TrialOutcome | None = None) -> str | None:
    """Why a failed or errored trial did not pass, on one line: the first failing grader
    and its evidence (and how many more failed), the error, or the violated constraints;
    None for a trial that did not fail or error."""
    return facts_failure_reason(TrialFacts.of_record(record), outcome)


def facts_failure_reason(facts: TrialFacts, outcome: TrialOutcome | None = None) -> str | None:
    """:func:`failure_reason` of the record ``facts`` were read from."""
    outcome = outcome or facts_outcome(facts)
    if outcome == "errored":
        error = facts.error
        if error is not None:
            text = f"errored ({error.phase}): [{error.code}] {error.message}"
        else:
            broken = [d.name for d in facts.failed_graders if d.status == "error"]
            text = "grader error in " + (", ".join(broken) or "grading")
        return one_line(text, REASON_LIMIT)
    if outcome != "failed":
        return None
    failing = facts.failed_graders
    if failing:
        first = failing[0]
        text = first.name + (f": {first.evidence}" if first.evidence else "")
        if len(failing) > 1:
            text += f" (+{len(failing) - 1} more failed)"
    else:
        violations = facts.constraint_violations
        text = "constraints violated: " + "; ".join(violations) if violations else "below threshold"
    return one_line(text, REASON_LIMIT)


def admits(heap: Sequence[tuple[Any, ...]], order: tuple[Any, ...]) -> bool:
    """Whether an entry of ``order`` (its first two elements) is among the
    :data:`FAILURES_KEPT` largest, given the kept ``heap`` (a min-heap)."""
    return len(heap) < FAILURES_KEPT or order > heap[0][:2]


def keep(heap: list[Any], entry: tuple[Any, ...]) -> None:
    """Keep ``entry`` in ``heap`` (admitted by :func:`admits`), dropping the smallest
    entry when the heap is full."""
    if len(heap) < FAILURES_KEPT:
        heapq.heappush(heap, entry)
    else:
        heapq.heapreplace(heap, entry)


def _mean(total: float, count: int) -> float | None:
    return total / count if count else None


Failure = tuple[int, str, TrialResultRecord | dict[str, Any]]
"""A kept failed or errored trial: its negated trial index, its trial id, and the record
(or, added from another aggregate's state, its JSON data until it is listed)."""


_OUTCOME_SLOTS: dict[str, str] = {
    "passed": "passed_trials",
    "failed": "failed_trials",
    "errored": "errored_trials",
    "cancelled": "cancelled_trials",
    "ungraded": "ungraded_trials",
}
"""The slot of :class:`RowAggregate` counting the trials of each :data:`TrialOutcome`."""


@dataclass(slots=True)
class RowAggregate:
    """The counters of one report row (one :class:`GroupKey`), in slots: a report keeps one
    a stimulus and model, so what most rows never need (reported models, kept failures,
    failure reasons) takes no container until a trial needs it, and the trials of each
    outcome are counted in a slot of their own (:attr:`outcomes` gives them as a
    dictionary)."""

    trials: int = 0
    passed_trials: int = 0
    failed_trials: int = 0
    errored_trials: int = 0
    cancelled_trials: int = 0
    ungraded_trials: int = 0
    other_outcomes: dict[str, int] | None = None
    """Trials of outcomes this version does not know (from another version's state); None
    until there is one."""
    score_sum: float = 0.0
    scores: int = 0
    metrics: int = 0
    tokens: float = 0.0
    turns: float = 0.0
    tool_calls: float = 0.0
    wall_time_ms: float = 0.0
    metric_errors: int = 0
    reported_models: tuple[str, ...] = ()
    """The models the agent reported in the row's trials, in the order first met."""
    failures: list[Failure] | None = None
    """The kept failed or errored trials, as a heap on the negated trial index (a record
    added from another aggregate's state stays JSON data until it is listed); None until
    one is kept."""
    failures_seen: int = 0
    reasons: dict[str, int] | None = None
    """Failed or errored trials by :func:`failure_reason` (at most :data:`REASONS_KEPT`
    reasons, in the order first met); None until one failed or errored."""
    other_reasons: int = 0
    """Failed or errored trials whose reason was met after :data:`REASONS_KEPT` others."""
    keep_failures: bool = True
    """Keep the first failed or errored trials for listings (off for a report that lists
    none: only :attr:`failures_seen` is counted)."""

    _SUMS = (
        ("trials", "trials"),
        ("score_sum", "scoreSum"),
        ("scores", "scores"),
        ("metrics", "metrics"),
        ("tokens", "tokens"),
        ("turns", "turns"),
        ("tool_calls", "toolCalls"),
        ("wall_time_ms", "wallTimeMs"),
        ("metric_errors", "metricErrors"),
        ("failures_seen", "failuresSeen"),
    )
    _OPTIONAL_SUMS = (("other_reasons", "otherReasons"),)
    """Counters a state written before they existed lacks (taken as 0)."""

    def add(self, record: TrialResultRecord, outcome: TrialOutcome) -> None:
        """Count one trial of the row."""
        self.add_facts(TrialFacts.of_record(record), outcome, record)

    def add_facts(
        self, facts: TrialFacts, outcome: TrialOutcome, record: TrialResultRecord | None = None
    ) -> None:
        """Count one trial of the row from its facts (see :meth:`add`); a failed or errored
        trial is kept for listings only when its ``record`` is given."""
        self.trials += 1
        self.add_outcome(outcome, 1)
        if facts.graded and (outcome == "passed" or outcome == "failed"):
            self.score_sum += facts.score
            self.scores += 1
        if facts.trajectory:
            self.metrics += 1
            self.tokens += facts.tokens
            self.turns += facts.turns
            self.tool_calls += facts.tool_calls
            self.wall_time_ms += facts.wall_time_ms
            self.metric_errors += facts.errors
            model = facts.reported_model
            if model and model not in self.reported_models:
                self.reported_models = (*self.reported_models, model)
        if outcome == "failed" or outcome == "errored":
            self._keep_failure(facts, record)
            self._count_reason(facts_failure_reason(facts, outcome) or outcome, 1)

    @property
    def outcomes(self) -> dict[str, int]:
        """The row's trials by outcome (only the outcomes it has), a fresh dictionary."""
        counts = {
            outcome: count
            for outcome, slot in _OUTCOME_SLOTS.items()
            if (count := getattr(self, slot))
        }
        counts.update(self.other_outcomes or {})
        return counts

    def add_outcome(self, outcome: str, count: int) -> None:
        """Count ``count`` more trials of ``outcome``."""
        slot = _OUTCOME_SLOTS.get(outcome)
        if slot is not None:
            setattr(self, slot, getattr(self, slot) + count)
            return
        others = self.other_outcomes
        if others is None:
            others = self.other_outcomes = {}
        others[outcome] = others.get(outcome, 0) + count

    def _count_reason(self, reason: str, count: int) -> None:
        reasons = self.reasons
        if reasons is None:
            reasons = self.reasons = {}
        if reason in reasons or len(reasons) < REASONS_KEPT:
            reasons[reason] = reasons.get(reason, 0) + count
        else:
            self.other_reasons += count

    def top_reason(self) -> tuple[str, int] | None:
        """The most common failure reason and how many trials had it (the first met of
        those tied); None when no trial failed or errored."""
        reasons = self.reasons
        if not reasons:
            return None
        reason = max(reasons, key=reasons.__getitem__)  # first of the ties
        return reason, reasons[reason]

    def _keep_failure(self, facts: TrialFacts, record: TrialResultRecord | None) -> None:
        self.failures_seen += 1
        if not self.keep_failures or record is None:
            return
        order = (-facts.trial_index, record.trial_id)
        # The copy is made only for a kept trial.
        if admits(self.failures or (), order):
            self._keep((*order, _slim(record)))

    def _keep(self, entry: Failure) -> None:
        """Keep ``entry`` in the heap of kept failures (made on the first)."""
        if self.failures is None:
            self.failures = []
        keep(self.failures, entry)

    def failed_records(self) -> list[TrialResultRecord]:
        """The kept failed or errored trials, by trial index (without trajectories)."""
        return [
            r if isinstance(r, TrialResultRecord) else TrialResultRecord.model_validate(r)
            for _, _, r in sorted(self.failures or (), key=lambda e: (-e[0], e[1]))
        ]

    def state(self) -> dict[str, Any]:
        """The row's counters as JSON data, which :meth:`absorb` adds to another row's."""
        out: dict[str, Any] = {name: getattr(self, attribute) for attribute, name in self._SUMS}
        out.update({name: getattr(self, attribute) for attribute, name in self._OPTIONAL_SUMS})
        out["outcomes"] = self.outcomes
        out["reasons"] = [[reason, count] for reason, count in (self.reasons or {}).items()]
        out["reportedModels"] = sorted(self.reported_models)
        out["failures"] = [
            [-negated, trial_id, r.to_json_dict() if isinstance(r, TrialResultRecord) else r]
            for negated, trial_id, r in self.failures or ()
        ]
        return out

    def absorb(self, state: Mapping[str, Any]) -> None:
        """Add another row's counters (its :meth:`state`), as if its trials were added
        here; its kept trials stay JSON data until listed."""
        for attribute, name in self._SUMS:
            setattr(self, attribute, getattr(self, attribute) + state[name])
        for attribute, name in self._OPTIONAL_SUMS:
            setattr(self, attribute, getattr(self, attribute) + int(state.get(name, 0)))
        for reason, count in state.get("reasons", []):
            self._count_reason(str(reason), int(count))
        for outcome, count in dict(state["outcomes"]).items():
            self.add_outcome(str(outcome), int(count))
        for model in state["reportedModels"]:
            if str(model) not in self.reported_models:
                self.reported_models = (*self.reported_models, str(model))
        for trial_index, trial_id, data in state["failures"] if self.keep_failures else ():
            order = (-int(trial_index), str(trial_id))
            if admits(self.failures or (), order):
                self._keep((*order, dict(data)))

    @property
    def failures_left_out(self) -> int:
        """Failed or errored trials of the row not kept."""
        return self.failures_seen - len(self.failures or ())

    def model_label(self, key: GroupKey) -> str:
        """The row's model: the one asked for, else those the agent reported, else
        ``default`` (as :func:`vally_builtin.reporters.reported_model_label`)."""
        if key.model:
            return key.model
        return ", ".join(sorted(self.reported_models)) or key.model_label

    def stats(self) -> StimulusStats:
        """The row's statistics, as :func:`vally_builtin.reporters.stimulus_stats` gives."""
        return StimulusStats.of_counts(
            self.outcomes,
            trials=self.trials,
            mean_score=_mean(self.score_sum, self.scores),
            mean_tokens=_mean(self.tokens, self.metrics),
            mean_turns=_mean(self.turns, self.metrics),
            mean_tool_calls=_mean(self.tool_calls, self.metrics),
            mean_wall_time_ms=_mean(self.wall_time_ms, self.metrics),
            metric_errors=self.metric_errors,
        )


def _slim(record: TrialResultRecord) -> TrialResultRecord:
    """``record`` without its trajectory (the bulk of a record), for listings."""
    if record.trajectory is None:
        return record
    return record.model_copy(update={"trajectory": None})


@dataclass
class UsageTotals:
    """Token totals of one party (the agent or the judge) over a run."""

    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0


class ReportAggregate:
    """A run's report rows and totals, fed one record at a time (memory grows with the
    rows, not the trials).

    Args:
        keep_failures: Each row keeps its first failed or errored trials for listings
            (:meth:`RowAggregate.failed_records`); a report that lists none (the console)
            turns it off, and its :meth:`state` then holds no record.
        compare_variants: Count what the comparison of variants with a baseline needs
            (:meth:`variant_stats`: per variant, each stimulus's passed and graded trials);
            a run without a baseline compares nothing and turns it off (about 250 bytes a
            stimulus).
    """

    def __init__(self, keep_failures: bool = True, compare_variants: bool = True) -> None:
        self.keep_failures = keep_failures
        self.compare_variants = compare_variants
        self.rows: dict[GroupKey, RowAggregate] = {}
        self._row_of: dict[tuple[str, str, str, str], RowAggregate] = cast(Any, self.rows)
        """:attr:`rows` itself, typed by the plain tuple of a key's fields, which looks a row
        up as its :class:`GroupKey` does (a named tuple equals that tuple)."""
        self.outcomes: dict[str, int] = dict.fromkeys(
            ("passed", "failed", "errored", "cancelled", "ungraded"), 0
        )
        self.trials = 0
        self.completed_at: str | None = None
        self.usage = {"agent": UsageTotals(), "judge": UsageTotals()}
        self.cost = CostTotals()
        self.variants: dict[str, VariantCounter] = {}
        """Per variant (``""`` for none) what the comparison with the baseline counts, in
        the order the records came; nothing without ``compare_variants``."""
        self._last_added: TrialResultRecord | None = None

    @classmethod
    def of(
        cls, records: Iterable[TrialResultRecord], keep_failures: bool = True
    ) -> ReportAggregate:
        """The aggregate of ``records`` (read once, in any order)."""
        aggregate = cls(keep_failures)
        for record in records:
            aggregate.add(record)
        return aggregate

    def add_once(self, record: TrialResultRecord) -> None:
        """Count ``record`` unless it is the record counted last: each reporter sharing the
        aggregate (:func:`run_aggregate`) feeds it every record, and the first counts it."""
        if record is not self._last_added:
            self._last_added = record
            self.add(record)

    def add(self, record: TrialResultRecord) -> None:
        """Count one finished trial."""
        facts = TrialFacts.of_record(record)
        self._count(facts, facts_outcome(facts), record)

    def add_facts(self, facts: TrialFacts) -> bool:
        """Count one finished trial from its facts (see :meth:`add`), unless its row keeps
        it for listings (a failed or errored trial, with ``keep_failures``): then count
        nothing and return False (:class:`vally.FactCounter`)."""
        outcome = facts_outcome(facts)
        if self.keep_failures and outcome in ("failed", "errored"):
            return False
        self._count(facts, outcome, None)
        return True

    def _count(
        self, facts: TrialFacts, outcome: TrialOutcome, record: TrialResultRecord | None
    ) -> None:
        """Count one trial, whose ``outcome`` (:func:`facts_outcome`) the caller worked
        out (its ``record`` too, when a failure is kept for listings)."""
        named = (facts.eval_name, facts.variant, facts.stimulus_name, facts.model or "")
        row = self._row_of.get(named)
        if row is None:
            row = self.rows[GroupKey(*named)] = RowAggregate(keep_failures=self.keep_failures)
        row.add_facts(facts, outcome, record)
        self.trials += 1
        self.outcomes[outcome] += 1
        if self.completed_at is None or facts.completed_at > self.completed_at:
            self.completed_at = facts.completed_at
        usage = facts.usage
        if any(usage):  # a trial without model calls adds nothing
            agent, judge = self.usage["agent"], self.usage["judge"]
            agent.input_tokens += usage[_INPUT]
            agent.output_tokens += usage[_OUTPUT]
            agent.calls += usage[_CALLS]
            judge.input_tokens += usage[_SIDE + _INPUT]
            judge.output_tokens += usage[_SIDE + _OUTPUT]
            judge.calls += usage[_SIDE + _CALLS]
        self.cost.add_facts(facts)
        if not self.compare_variants:
            return
        counter = self.variants.get(facts.variant)
        if counter is None:
            counter = self.variants[facts.variant] = VariantCounter()
        counter.add_facts(facts)

    def state(self) -> dict[str, Any]:
        """The aggregate as JSON data, which :meth:`absorb` adds to another aggregate (a
        sealed shard holds it, so a merge adds it up instead of reading every record)."""
        return {
            "rows": [
                [key.eval_name, key.variant, key.stimulus, key.model, row.state()]
                for key, row in self.rows.items()
            ],
            "outcomes": dict(self.outcomes),
            "trials": self.trials,
            "completedAt": self.completed_at,
            "usage": {
                who: [totals.input_tokens, totals.output_tokens, totals.calls]
                for who, totals in self.usage.items()
            },
            "cost": self.cost.state(),
            "variants": [[name, counter.state()] for name, counter in self.variants.items()],
        }

    def absorb(self, state: Mapping[str, Any]) -> None:
        """Add another aggregate (its :meth:`state`), as if the records it counted came
        here next: rows and variants first met there come after those met here."""
        for eval_name, variant, stimulus, model, row_state in state["rows"]:
            key = GroupKey(str(eval_name), str(variant), str(stimulus), str(model))
            row = self.rows.get(key)
            if row is None:
                row = self.rows[key] = RowAggregate(keep_failures=self.keep_failures)
            row.absorb(row_state)
        for outcome, count in dict(state["outcomes"]).items():
            self.outcomes[str(outcome)] = self.outcomes.get(str(outcome), 0) + int(count)
        self.trials += int(state["trials"])
        completed = state["completedAt"]
        if completed is not None and (self.completed_at is None or completed > self.completed_at):
            self.completed_at = str(completed)
        for who, (inputs, outputs, calls) in dict(state["usage"]).items():
            totals = self.usage[str(who)]
            totals.input_tokens += int(inputs)
            totals.output_tokens += int(outputs)
            totals.calls += int(calls)
        self.cost.absorb(state["cost"])
        for name, counter_state in state["variants"]:
            counter = self.variants.get(str(name))
            if counter is None:
                counter = self.variants[str(name)] = VariantCounter()
            counter.absorb(counter_state, shift=counter.trials)

    @classmethod
    def of_states(
        cls, states: Iterable[Mapping[str, Any]], keep_failures: bool = True
    ) -> ReportAggregate:
        """The aggregate of several aggregates' states, in order (see :meth:`absorb`)."""
        aggregate = cls(keep_failures)
        for state in states:
            aggregate.absorb(state)
        return aggregate

    def variant_stats(self, variants: Sequence[str]) -> list[VariantStats]:
        """Counts per variant of ``variants`` (in that order) with at least one record, as
        :func:`vally_builtin.reporters.experiment.variant_stats` gives for the same records
        in the same order."""
        return observed_stats(self.variants, variants)

    def sorted_rows(self) -> dict[GroupKey, RowAggregate]:
        """The rows sorted by eval, variant, stimulus and model."""
        return {key: self.rows[key] for key in sorted(self.rows)}

    @property
    def failures(self) -> int:
        """Failed or errored trials."""
        return self.outcomes["failed"] + self.outcomes["errored"]


_RUN_AGGREGATES: dict[int, tuple[weakref.ref[RunInfo], ReportAggregate]] = {}
"""The aggregate of each run still alive that a reporter asked for, by the run's identity."""


def run_aggregate(run: RunInfo, *, keep_failures: bool) -> ReportAggregate:
    """The one :class:`ReportAggregate` of ``run`` that the reporters rendering its report
    rows share (the console's and the Markdown report's), so the run's records are counted
    once and its rows kept once, however many reporters render them.

    The first reporter to ask (as the run starts, before any record) makes it; it keeps
    failed trials for listings when any asks for them. Each reporter feeds it every record
    with :meth:`ReportAggregate.add_once`. It counts what the comparison of variants needs
    only when the run has a baseline. It is forgotten with the run.

    Args:
        run: The run (the object the hooks are given, not an equal copy).
        keep_failures: Whether this reporter lists failed trials.
    """
    key = id(run)
    found = _RUN_AGGREGATES.get(key)
    if found is not None and found[0]() is run:
        aggregate = found[1]
        if keep_failures and not aggregate.keep_failures and not aggregate.trials:
            aggregate.keep_failures = True
        return aggregate

    def forget(dead: weakref.ref[RunInfo]) -> None:
        if _RUN_AGGREGATES.get(key, (None,))[0] is dead:
            del _RUN_AGGREGATES[key]

    aggregate = ReportAggregate(keep_failures, compare_variants=run.baseline is not None)
    _RUN_AGGREGATES[key] = (weakref.ref(run, forget), aggregate)
    return aggregate
