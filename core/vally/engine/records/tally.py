"""Incremental run summaries: counters that take trial records one at a time.

An :class:`EvalTally` gives the same ``run-summary.jsonl`` line as summarising the whole
list of records at once, but keeps only a few counters per (stimulus, model), so its
memory does not grow with the number of trials. Each record comes with a *rank* (its place
in the order the summary lists records, e.g. its position in the plan); the stimuli and the
models of the summary are listed by their first rank, whatever order the records arrive in.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from vally._version import __version__
from vally.engine.records.scoring import metrics_from_counts
from vally.engine.records.trial_facts import usage_of
from vally.models.cost import Cost, CostSum
from vally.models.facts import USAGE_FIELDS, TrialFacts
from vally.models.records import (
    ExperimentBlock,
    GraderIdentity,
    MultiTrialMetrics,
    RunSummaryRecord,
    StimulusSummary,
    TargetIdentity,
    TrialResultRecord,
)
from vally.models.trajectory import utc_now
from vally.models.usage import JudgeCacheCounts


def _mean(total: float, count: int) -> float | None:
    return total / count if count else None


class SharedParts:
    """What the stimulus summaries of one eval share, so a summary of many stimuli holds
    each only once: the set of the fields given (every field: the one a validated summary
    gets, since every field is given), and the pass metrics, which depend only on the
    graded and passed counts. A summary's own part is then about 600 bytes instead of
    about 2.4 KB."""

    def __init__(self) -> None:
        self.fields: set[str] = set(StimulusSummary.model_fields)
        self._metrics: dict[tuple[int, int], MultiTrialMetrics] = {}

    def metrics(self, graded: int, passed: int) -> MultiTrialMetrics:
        """The metrics of ``passed`` of ``graded`` trials (one object for equal counts)."""
        key = (graded, passed)
        found = self._metrics.get(key)
        if found is None:
            found = self._metrics[key] = metrics_from_counts(graded, passed)
        return found


class StimulusTally:
    """The counters of one (stimulus, model) of an eval.

    Args:
        record: The first record seen of that stimulus and model (its facts).
        rank: That record's rank.
    """

    __slots__ = (
        "any_has_graders",
        "errored",
        "errors",
        "first_has_graders",
        "first_index",
        "graded",
        "model",
        "passed",
        "rank",
        "score_sum",
        "stimulus_name",
        "tokens",
        "tool_calls",
        "trajectories",
        "trials",
        "turns",
        "wall_time_ms",
    )

    def __init__(self, record: TrialFacts, rank: Any) -> None:
        self.rank = rank
        self.stimulus_name = record.stimulus_name
        self.model = record.model
        self.first_index = record.trial_index
        self.first_has_graders = record.stimulus_has_graders
        self.any_has_graders = False
        self.trials = self.graded = self.passed = self.errored = 0
        self.score_sum = 0.0
        self.trajectories = self.tokens = self.turns = self.tool_calls = self.errors = 0
        self.wall_time_ms = 0.0

    def add(self, record: TrialFacts, rank: Any) -> None:
        """Count one more trial of this stimulus and model."""
        if rank < self.rank:
            self.rank = rank
        if record.trial_index < self.first_index:
            self.first_index = record.trial_index
            self.first_has_graders = record.stimulus_has_graders
        self.trials += 1
        graded = record.graded and record.has_graders
        if graded:
            self.any_has_graders = True
        if record.status != "success" or not record.graded or record.grade_errored:
            self.errored += 1  # as TrialFacts.errored, without the call
        elif graded:
            self.graded += 1
            self.passed += int(record.passed)
            self.score_sum += record.score
        if record.trajectory:
            self.trajectories += 1
            self.tokens += record.tokens
            self.turns += record.turns
            self.tool_calls += record.tool_calls
            self.wall_time_ms += record.wall_time_ms
            self.errors += record.errors

    def summary(self, shared: SharedParts | None = None) -> StimulusSummary:
        """The stimulus's summary, as
        :func:`vally.engine.records.scoring.summarize_stimulus` gives.

        Args:
            shared: What the summaries of one eval share (see :class:`SharedParts`).
        """
        if shared is None:
            shared = SharedParts()
        count = self.trajectories
        return StimulusSummary.model_construct(
            shared.fields,
            stimulus_name=self.stimulus_name,
            model=self.model,
            trials=self.trials,
            graded=self.graded,
            passed=self.passed,
            errored=self.errored,
            mean_score=_mean(self.score_sum, self.graded),
            metrics=shared.metrics(self.graded, self.passed),
            flaky=0 < self.passed < self.graded,
            has_graders=bool(self.first_has_graders or self.any_has_graders),
            mean_tokens=_mean(self.tokens, count),
            mean_turns=_mean(self.turns, count),
            mean_tool_calls=_mean(self.tool_calls, count),
            mean_wall_time_ms=_mean(self.wall_time_ms, count),
            total_errors=self.errors,
        )


class EvalTally:
    """The counters of one eval (and variant) of a run; memory grows with its stimuli and
    models, not with its trials."""

    def __init__(self) -> None:
        self.groups: dict[tuple[str, str | None], StimulusTally] = {}
        self.model_ranks: dict[str | None, Any] = {}
        self.trials = self.graded = self.passed = self.errored = 0
        self.started_at: str | None = None
        self.completed_at: str | None = None
        self.usage = [0] * (2 * len(USAGE_FIELDS))
        self._cost = CostSum()
        self._cache_hits = self._cache_misses = 0

    @property
    def cost(self) -> Cost:
        """The cost of the trials counted (their costs summed with :meth:`Cost.plus`)."""
        return self._cost.cost

    @cost.setter
    def cost(self, value: Cost) -> None:
        self._cost = CostSum(value)

    @property
    def judge_cache(self) -> JudgeCacheCounts:
        """How the judge cache answered the judges of the trials counted."""
        return JudgeCacheCounts(hits=self._cache_hits, misses=self._cache_misses)

    @judge_cache.setter
    def judge_cache(self, value: JudgeCacheCounts) -> None:
        self._cache_hits, self._cache_misses = value.hits, value.misses

    def add(self, record: TrialResultRecord, rank: Any = None) -> None:
        """Count one trial record; ``rank`` (default: the arrival order) places its
        stimulus and model in the summary."""
        self.add_facts(TrialFacts.of_record(record), rank)

    def add_facts(self, record: TrialFacts, rank: Any = None) -> None:
        """Count one trial from its facts (see :meth:`add`), e.g. read from a results line
        without building the record (:func:`vally.engine.records.trial_facts.facts_from_json`)."""
        if rank is None:
            rank = self.trials
        key = (record.stimulus_name, record.model)
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = StimulusTally(record, rank)
        group.add(record, rank)
        model = record.model
        known = self.model_ranks.get(model)
        if known is None or rank < known:
            self.model_ranks[model] = rank
        self.trials += 1
        if any(record.usage):
            self.usage = list(map(operator.add, self.usage, record.usage))
        if record.cost is not None:
            self._cost.add(record.cost)
        cache = record.judge_cache
        if cache is not None:
            self._cache_hits += cache.hits
            self._cache_misses += cache.misses
        if record.status != "success" or not record.graded or record.grade_errored:
            self.errored += 1  # as TrialFacts.errored, without the call
        elif record.has_graders:
            self.graded += 1
            self.passed += int(record.passed)
        started, completed = record.started_at, record.completed_at
        if self.started_at is None or started < self.started_at:
            self.started_at = started
        if self.completed_at is None or completed > self.completed_at:
            self.completed_at = completed

    def summary(
        self,
        *,
        run_id: str,
        eval_name: str,
        eval_file: str | None = None,
        variant: str | None = None,
        eval_hash: str | None = None,
        config_hash: str | None = None,
        suite_hash: str | None = None,
        graders: Sequence[GraderIdentity] = (),
        target: TargetIdentity | None = None,
        threshold: float | None = None,
        started_at: str | None = None,
        completed_at: str | None = None,
        vally_version: str = __version__,
        plugins: Sequence[Mapping[str, Any]] = (),
        experiment: ExperimentBlock | None = None,
    ) -> RunSummaryRecord:
        """The eval's ``run-summary.jsonl`` line: the counts so far with the eval's identity
        (``started_at``/``completed_at`` default to the earliest start and latest completion
        counted, or now)."""
        now = utc_now()
        shared = SharedParts()
        groups = sorted(self.groups.values(), key=lambda g: g.rank)
        models = sorted(self.model_ranks, key=lambda m: self.model_ranks[m])
        verdict: Literal["pass", "fail", "none"] = "none"
        if self.graded:
            verdict = "pass" if self.passed == self.graded else "fail"
        return RunSummaryRecord(
            run_id=run_id,
            eval_name=eval_name,
            eval_file=eval_file,
            variant=variant,
            eval_hash=eval_hash,
            config_hash=config_hash,
            suite_hash=suite_hash,
            target=target if target is not None else TargetIdentity(),
            graders=list(graders),
            threshold=threshold,
            models=models,
            trials=self.trials,
            passed=self.passed,
            failed=self.graded - self.passed,
            errored=self.errored,
            pass_rate=self.passed / self.graded if self.graded else None,
            verdict=verdict,
            stimuli=[group.summary(shared) for group in groups],
            started_at=started_at or self.started_at or now,
            completed_at=completed_at or self.completed_at or now,
            vally_version=vally_version,
            plugins=[dict(p) for p in plugins],
            experiment=experiment,
            usage=usage_of(self.usage).model_copy(update={"judge_cache": self.judge_cache}),
            cost=self.cost,
        )


def summarize_eval(records: Iterable[TrialResultRecord], **identity: Any) -> RunSummaryRecord:
    """Build the ``run-summary.jsonl`` line of one eval (and variant) of a run: ``records``
    counted into an :class:`EvalTally`, then its :meth:`EvalTally.summary` with the keyword
    arguments ``identity`` (``run_id`` and ``eval_name``, and the optional identity fields).

    ``started_at``/``completed_at`` default to the earliest start and latest completion of
    the records (now, when there are none). See the module docstring for the verdict. The
    stimuli and models are listed in the order they first appear in ``records``.
    """
    tally = EvalTally()
    for record in records:
        tally.add(record)
    return tally.summary(**identity)
