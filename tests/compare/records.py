"""Builders of trial records for comparison tests."""

from __future__ import annotations

from vally.models import (
    AssistantMessageEvent,
    GradeResult,
    Stimulus,
    Trajectory,
    TrialResultRecord,
    compute_metrics,
)
from vally.models.trajectory import MessageData


def record(
    stimulus: str,
    trial: int = 0,
    *,
    output: str = "answer",
    passed: bool | None = True,
    tokens: int = 100,
    eval_name: str = "ev",
    model: str | None = "m",
    rubric: list[str] | None = None,
) -> TrialResultRecord:
    stim = Stimulus(name=stimulus, prompt=f"do {stimulus}", rubric=rubric or [])
    events = [AssistantMessageEvent(data=MessageData(content=output))]
    metrics = compute_metrics(events, wall_time_ms=1000)
    metrics.token_usage.total_tokens = tokens
    trajectory = Trajectory(stimulus=stim, events=events, metrics=metrics, output=output)
    grade = None
    if passed is not None:
        grade = GradeResult(
            passed=passed,
            score=1.0 if passed else 0.0,
            threshold=None,
            mode="binary",
            has_graders=True,
            errored=False,
        )
    return TrialResultRecord(
        run_id="r",
        eval_name=eval_name,
        eval_file=None,
        stimulus_name=stimulus,
        stimulus=stim,
        variant=None,
        model=model,
        trial_index=trial,
        trial_id=f"{stimulus}-{trial}",
        status="success",
        error=None,
        started_at="2026-01-01T00:00:00.000Z",
        completed_at="2026-01-01T00:00:01.000Z",
        duration_ms=1000,
        grade_result=grade,
        trajectory=trajectory,
    )
