"""Record factories and a run driver shared by the reporter tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vally.contracts.events import EventEmitter, RunInfo, RunOutcome, new_plugin_manager
from vally.contracts.protocols import TrialKey
from vally.models.records import GradeResult, GraderResult, TrialError, TrialResultRecord
from vally.models.spec import Stimulus
from vally.models.trajectory import (
    AssistantMessageEvent,
    MessageData,
    TokenUsageData,
    TokenUsageEvent,
    ToolCallData,
    ToolCallEvent,
    Trajectory,
    TrajectoryMetadata,
    compute_metrics,
)
from vally.plugins.capabilities import is_critical


def make_trajectory(
    stimulus: Stimulus, *, model: str = "gpt-test", output: str = "done"
) -> Trajectory:
    events: list[Any] = [
        ToolCallEvent(
            timestamp="2026-01-01T00:00:00.000Z",
            data=ToolCallData(tool_name="write_file", tool_call_id="c1", arguments={"path": "a"}),
        ),
        TokenUsageEvent(
            timestamp="2026-01-01T00:00:01.000Z",
            data=TokenUsageData(input_tokens=100, output_tokens=20, model=model),
        ),
        AssistantMessageEvent(
            timestamp="2026-01-01T00:00:02.000Z", data=MessageData(content=output)
        ),
    ]
    return Trajectory(
        id="traj-" + stimulus.name,
        stimulus=stimulus,
        events=events,
        metrics=compute_metrics(events, wall_time_ms=2000),
        output=output,
        metadata=TrajectoryMetadata(model=model, executor="mock", skills_loaded=["math"]),
    )


def make_record(
    stimulus: str = "add-test",
    *,
    eval_name: str = "quickstart",
    trial: int = 0,
    passed: bool = True,
    model: str | None = "gpt-test",
    error: TrialError | None = None,
    evidence: str = "Files matching 'add.test.js' found: add.test.js",
    prompt: str = "Write a unit test for add.js. Put it in add.test.js and make it pass.",
    variant: str | None = None,
    threshold: float | None = None,
) -> TrialResultRecord:
    stim = Stimulus(name=stimulus, prompt=prompt)
    details = [
        GraderResult(
            name="file-exists", type="file-exists", passed=True, score=1.0, evidence=evidence
        ),
        GraderResult(
            name="output-contains",
            type="output-contains",
            passed=passed,
            score=1.0 if passed else 0.0,
            evidence="found 'done'" if passed else "expected 'PASS' in output | not found",
        ),
    ]
    grade = (
        None
        if error is not None
        else GradeResult(
            passed=passed,
            score=1.0 if passed else 0.5,
            threshold=threshold,
            mode="threshold" if threshold is not None else "binary",
            has_graders=True,
            errored=False,
            details=details,
        )
    )
    return TrialResultRecord(
        run_id="run-1",
        eval_name=eval_name,
        eval_file="eval.yaml",
        stimulus_name=stimulus,
        stimulus=stim,
        variant=variant,
        model=model,
        trial_index=trial,
        trial_id=f"{eval_name}/{stimulus}/{model}/{trial}",
        status="error" if error is not None else "success",
        error=error,
        started_at="2026-01-01T00:00:00.000Z",
        completed_at=f"2026-01-01T00:00:0{trial + 2}.000Z",
        duration_ms=2000,
        grade_result=grade,
        trajectory=None if error is not None else make_trajectory(stim, model=model or "default"),
    )


def make_run(run_dir: Path | None, planned: int = 0, **options: Any) -> RunInfo:
    return RunInfo(
        run_id="run-1",
        command="eval",
        run_dir=run_dir,
        planned_trials=planned,
        started_at="2026-01-01T00:00:00.000Z",
        options=options,
    )


class Driver:
    """Registers reporters on a real pluggy manager and emits run events to them."""

    def __init__(self, *reporters: Any) -> None:
        self.manager = new_plugin_manager()
        self.emitter = EventEmitter(self.manager)
        for i, reporter in enumerate(reporters):
            self.manager.register(reporter, name=f"reporter-{i}")
            if is_critical(reporter):
                self.emitter.mark_critical(f"reporter-{i}")

    def run(self, run: RunInfo, records: list[TrialResultRecord], cancelled: bool = False) -> None:
        self.emitter.emit("vally_run_start", run=run)
        for record in records:
            key = TrialKey(
                record.variant or "",
                record.eval_name,
                record.stimulus_name,
                record.model or "",
                record.trial_index,
            )
            self.emitter.emit("vally_trial_start", run=run, key=key)
            self.emitter.emit("vally_trial_end", run=run, record=record)
        self.emitter.emit(
            "vally_run_end",
            run=run,
            outcome=RunOutcome(records=records, summaries=[], cancelled=cancelled),
        )
