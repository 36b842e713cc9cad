"""What counting a trial reads of its record, as one frozen value: :class:`TrialFacts`.

A run summary, a report's rows or a console's comparison count a few fields of each trial
record (its key, status, verdict, metrics, usage, times, and for a trial that failed its
error and failing graders). ``vally experiment merge`` reads those fields from each
results line without validating the whole record
(:func:`vally.engine.records.trial_facts.facts_from_json`), and :meth:`TrialFacts.of_record`
gives the same facts of a record already built, so one counter serves both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from vally.models.cost import Cost
    from vally.models.records import GraderResult, TrialError, TrialResultRecord
    from vally.models.usage import JudgeCacheCounts

USAGE_FIELDS = ("calls", "inputTokens", "outputTokens", "cacheReadTokens", "totalTokens")
"""The counters of each side (``agent``, ``judge``) of a record's ``usage``, in the order
:attr:`TrialFacts.usage` holds them."""

_TOTALS = ("calls", "input_tokens", "output_tokens", "cache_read_tokens", "total_tokens")
_DEFAULT_MODEL = "default"
"""How a trial key names the default model (``vally.engine.records.run_folder.model_label``)."""


class TrialFacts(NamedTuple):
    """What a summary or a report counts of one trial record, frozen (a named tuple: build
    it with keywords, or take it from :meth:`of_record`; change a copy with ``_replace``).

    Attributes:
        variant: The record's variant ("" when it has none).
        eval_name: The eval.
        stimulus_name: The stimulus.
        model: The model (None for the default).
        trial_index: The trial's index.
        status: ``success``, ``error`` or ``cancelled``.
        stimulus_has_graders: The stimulus declares graders of its own.
        graded: The record has a grade result.
        passed: The grade result passed.
        score: The grade result's score.
        has_graders: The grade result came from graders.
        grade_errored: A grader errored.
        trajectory: The record has a trajectory (the metrics below are its).
        tokens: The trajectory's total tokens.
        turns: Its turns.
        tool_calls: Its tool calls.
        wall_time_ms: Its wall time.
        errors: Its errors.
        usage: The agent's then the judges' token counters, five each, in the order of
            :data:`vally.USAGE_FIELDS` (calls, input, output, cache-read and total tokens).
        started_at: When the trial started.
        completed_at: When it completed.
        offloaded: The record points to offloaded texts (their paths may need moving).
        cost: The record's cost (None when the line has none, which a record reads as
            nothing spent).
        judge_cache: How the judge cache answered its judges (None when not recorded).
        error: The trial's operational error, if any.
        failed_graders: The grade result's graders that failed or errored (not passed, or
            status ``error``), in grading order, as the record holds them.
        constraint_violations: The grade result's violated constraints.
        reported_model: The model the agent reported in its trajectory's metadata.
    """

    variant: str = ""
    eval_name: str = ""
    stimulus_name: str = ""
    model: str | None = None
    trial_index: int = 0
    status: str = ""
    stimulus_has_graders: bool = False
    graded: bool = False
    passed: bool = False
    score: float = 0.0
    has_graders: bool = False
    grade_errored: bool = False
    trajectory: bool = False
    tokens: int = 0
    turns: int = 0
    tool_calls: int = 0
    wall_time_ms: int = 0
    errors: int = 0
    usage: tuple[int, ...] = (0,) * (2 * len(USAGE_FIELDS))
    started_at: str = ""
    completed_at: str = ""
    offloaded: bool = False
    cost: Cost | None = None
    judge_cache: JudgeCacheCounts | None = None
    error: TrialError | None = None
    failed_graders: tuple[GraderResult, ...] = ()
    constraint_violations: tuple[str, ...] = ()
    reported_model: str | None = None

    @property
    def errored(self) -> bool:
        """An operational error, no grade result, or an errored grader."""
        return self.status != "success" or not self.graded or self.grade_errored

    @property
    def key_id(self) -> str:
        """The trial's key as one string: ``variant/eval/stimulus/model/trial``."""
        model = self.model or _DEFAULT_MODEL
        return f"{self.variant}/{self.eval_name}/{self.stimulus_name}/{model}/{self.trial_index}"

    @classmethod
    def of_record(cls, record: TrialResultRecord) -> TrialFacts:
        """The facts of a record already built."""
        grade, trajectory = record.grade_result, record.trajectory
        agent, judge = record.usage.agent, record.usage.judge
        usage = tuple(getattr(side, name) for side in (agent, judge) for name in _TOTALS)
        metrics = trajectory.metrics if trajectory is not None else None
        return cls(
            variant=record.variant or "",
            eval_name=record.eval_name,
            stimulus_name=record.stimulus_name,
            model=record.model,
            trial_index=record.trial_index,
            status=record.status,
            stimulus_has_graders=bool(record.stimulus.graders),
            graded=grade is not None,
            passed=grade.passed if grade is not None else False,
            score=grade.score if grade is not None else 0.0,
            has_graders=grade.has_graders if grade is not None else False,
            grade_errored=grade.errored if grade is not None else False,
            trajectory=trajectory is not None,
            tokens=metrics.token_usage.total_tokens if metrics is not None else 0,
            turns=metrics.turn_count if metrics is not None else 0,
            tool_calls=metrics.tool_call_count if metrics is not None else 0,
            wall_time_ms=metrics.wall_time_ms if metrics is not None else 0,
            errors=metrics.error_count if metrics is not None else 0,
            usage=usage,
            started_at=record.started_at,
            completed_at=record.completed_at,
            offloaded=bool(record.offloaded),
            cost=record.cost,
            judge_cache=record.usage.judge_cache,
            error=record.error,
            failed_graders=tuple(d for d in grade.details if not d.passed or d.status == "error")
            if grade is not None
            else (),
            constraint_violations=tuple(grade.constraint_violations) if grade is not None else (),
            reported_model=trajectory.metadata.model if trajectory is not None else None,
        )
