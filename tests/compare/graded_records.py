"""Trial records of graded runs, built by hand for the graded comparison's tests."""

from __future__ import annotations

from typing import Any

from vally.models import (
    AssistantMessageEvent,
    GradeResult,
    GraderResult,
    Stimulus,
    Trajectory,
    TrialError,
    TrialResultRecord,
    compute_metrics,
)
from vally.models.trajectory import MessageData

NAMES, BRIEF = "names-the-page", "brief"


def trial(
    stimulus: str,
    index: int,
    scores: dict[str, float] | None,
    *,
    run_id: str,
    eval_name: str = "ev",
    tokens: int = 100,
    wall_ms: int = 1000,
    tags: dict[str, str] | None = None,
    prompt: str | None = None,
) -> TrialResultRecord:
    """One trial record; ``scores`` per grader, or None for an errored trial. The trial
    passes when every grader scores at least 0.5 (``names-the-page`` is 0 or 1)."""
    stim = Stimulus(name=stimulus, prompt=prompt or f"do {stimulus}", tags=tags or {})
    common: dict[str, Any] = {
        "run_id": run_id,
        "eval_name": eval_name,
        "eval_file": None,
        "stimulus_name": stimulus,
        "stimulus": stim,
        "variant": None,
        "model": "m",
        "trial_index": index,
        "trial_id": f"{run_id}-{eval_name}-{stimulus}-{index}",
        "started_at": "2026-01-01T00:00:00.000Z",
        "completed_at": "2026-01-01T00:00:01.000Z",
        "duration_ms": wall_ms,
    }
    if scores is None:
        return TrialResultRecord(
            **common,
            status="error",
            error=TrialError(phase="execute", code="AGENT_CRASHED", message="crashed"),
            grade_result=None,
            trajectory=None,
        )
    details = [
        GraderResult(name=name, type="output-contains", passed=score >= 0.5, score=score)
        for name, score in scores.items()
    ]
    passed = all(d.passed for d in details)
    grade = GradeResult(
        passed=passed,
        score=sum(scores.values()) / len(scores),
        threshold=None,
        mode="binary",
        has_graders=True,
        errored=False,
        details=details,
    )
    events = [AssistantMessageEvent(data=MessageData(content="answer"))]
    metrics = compute_metrics(events, wall_time_ms=wall_ms)
    metrics.token_usage.total_tokens = tokens
    trajectory = Trajectory(stimulus=stim, events=events, metrics=metrics, output="answer")
    return TrialResultRecord(
        **common, status="success", error=None, grade_result=grade, trajectory=trajectory
    )


def g(names: float, brief: float) -> dict[str, float]:
    """The scores of one repeat: names-the-page and brief."""
    return {NAMES: names, BRIEF: brief}
