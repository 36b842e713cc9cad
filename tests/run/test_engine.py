"""The run engine in-process: hook order, per-phase errors, a slow trial never blocking the
others, cancellation, executor shutdown and run summaries."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, ClassVar

from vally.contracts.bases import BaseExecutor
from vally.contracts.events import RunInfo
from vally.contracts.hookspecs import hookimpl
from vally.contracts.metadata import PluginMetadata
from vally.engine.planning.plan import PlanInput, PlanOptions, PluginRef
from vally.engine.planning.planner import build_plan
from vally.engine.records.run_folder import Scrubber, create_run_dir, name_folder
from vally.engine.trials.context import RunContext
from vally.engine.trials.run_engine import RunEngine
from vally.engine.trials.summaries import PlanSummaries
from vally.models.project import ProjectConfig
from vally.models.trajectory import AssistantMessageEvent, MessageData, Trajectory, utc_now
from vally.plugins.session import Session
from vally.specs.environments import resolve_environment
from vally.specs.loading import load_eval_file
from vally.testing import RecordingReporter

from .conftest import write_spec

SPEC = """
name: engine
defaults:
  executor: gate
stimuli:
  - name: slow
    prompt: wait for the others
    graders: [{type: output-contains, config: {substring: answer}}]
  - {name: a, prompt: one, graders: [{type: output-contains, config: {substring: answer}}]}
  - {name: b, prompt: two, graders: [{type: output-contains, config: {substring: nope}}]}
  - {name: c, prompt: three}
  - {name: boom, prompt: fail please}
"""


class GateExecutor(BaseExecutor[Any]):
    """'slow' finishes only after every other trial has ended (see :class:`GateOpener`);
    'boom' raises."""

    metadata: ClassVar[PluginMetadata] = PluginMetadata(name="gate", kind="executor")

    def __init__(self, others: int) -> None:
        super().__init__(None)
        self.others = others
        self.done = 0
        self.gate = asyncio.Event()
        self.shutdowns = 0

    async def execute(self, stimulus: Any, sandbox: Any, options: Any) -> Trajectory:
        if stimulus.name == "slow":
            await self.gate.wait()
        elif stimulus.name == "boom":
            self._count()
            raise RuntimeError("the agent crashed")
        else:
            await asyncio.sleep(0)
            self._count()
        return Trajectory(
            stimulus=stimulus,
            events=[AssistantMessageEvent(data=MessageData(content=f"answer to {stimulus.name}"))],
            output=f"answer to {stimulus.name}",
            work_dir=sandbox.workdir,
        )

    def _count(self) -> None:
        self.done += 1

    async def shutdown(self) -> None:
        self.shutdowns += 1


class GateOpener:
    """Opens the executor's gate once ``others`` trials have ended."""

    def __init__(self, executor: GateExecutor) -> None:
        self.executor = executor
        self.ended = 0

    @hookimpl
    def vally_trial_end(self, run: Any, record: Any) -> None:
        self.ended += 1
        if self.ended == self.executor.others:
            self.executor.gate.set()


def _engine(tmp_path: Path, executor: GateExecutor, *, workers: int = 2):
    spec = write_spec(tmp_path / "spec", SPEC)
    loaded = load_eval_file(spec, project=ProjectConfig())
    plan = build_plan(
        [PlanInput(loaded)],
        PlanOptions(),
        resolve_environment=lambda item, s: resolve_environment(item, s, ProjectConfig()),
    )
    session = Session(ProjectConfig(), tmp_path)
    recorder = RecordingReporter()
    session.register_observer(recorder, "recording")
    session.register_observer(GateOpener(executor), "gate-opener")
    graders: dict[int, Any] = {}

    def create_grader(config: Any) -> Any:
        if id(config) not in graders:
            graders[id(config)] = session.create("grader", config.type, config.config)
        return graders[id(config)]

    run_dir = create_run_dir(tmp_path / "out")
    run = RunInfo(
        run_id="run-1",
        command="eval",
        run_dir=run_dir,
        planned_trials=len(plan.trials),
        started_at=utc_now(),
    )
    context = RunContext(
        run=run,
        backend=session.create("backend", "local", {}),
        executors={PluginRef.of("gate", {}): executor},
        create_grader=create_grader,
        emitter=session.emitter,
        scrubber=Scrubber(),
        run_dir=run_dir,
    )
    summaries = PlanSummaries(plan.evals, run_id="run-1", run_dir=run_dir, scrubber=Scrubber())
    return RunEngine(context, summaries, workers=workers), plan, recorder, run_dir


def test_hook_order_errors_and_no_head_of_line_blocking(tmp_path: Path) -> None:
    executor = GateExecutor(others=4)
    engine, plan, recorder, run_dir = _engine(tmp_path, executor)
    result = asyncio.run(asyncio.wait_for(engine.run(plan.trials), 60))

    names = recorder.names()
    assert names[0] == "vally_run_start" and names[-1] == "vally_run_end"
    ends = [
        args["record"].stimulus_name for name, args in recorder.events if name == "vally_trial_end"
    ]
    assert ends[-1] == "slow"  # held one worker while all the others went through the other
    assert sorted(ends) == ["a", "b", "boom", "c", "slow"]
    for stimulus in ends:  # every trial starts before it ends, and graders report in between
        start = next(
            i
            for i, (n, a) in enumerate(recorder.events)
            if n == "vally_trial_start" and a["key"].stimulus == stimulus
        )
        end = next(
            i
            for i, (n, a) in enumerate(recorder.events)
            if n == "vally_trial_end" and a["record"].stimulus_name == stimulus
        )
        assert start < end
    graded = [a["key"].stimulus for n, a in recorder.events if n == "vally_grader_result"]
    assert sorted(graded) == ["a", "b", "slow"]

    records = {r.stimulus_name: r for r in result.records}
    assert records["slow"].grade_result is not None and records["slow"].grade_result.passed
    assert records["b"].grade_result is not None and not records["b"].grade_result.passed
    assert records["c"].grade_result is not None and records["c"].grade_result.mode == "no-graders"
    boom = records["boom"]
    assert boom.status == "error"
    assert boom.error is not None and boom.error.phase == "execute"
    assert "the agent crashed" in boom.error.message
    assert "Traceback" not in boom.error.message
    assert boom.trajectory is not None and boom.trajectory.end_reason == "error"
    assert result.errored and not result.cancelled
    assert executor.shutdowns == 1
    (summary,) = result.summaries
    assert summary.trials == 5 and summary.errored == 1
    assert (run_dir / "run-summary.jsonl").is_file()
    for stimulus in records:
        trial = run_dir / name_folder("engine") / name_folder(stimulus) / name_folder("default")
        assert (trial / "trial-0" / "metadata.json").is_file()


def test_stop_before_start_runs_nothing_but_still_ends_the_run(tmp_path: Path) -> None:
    executor = GateExecutor(others=4)
    engine, plan, recorder, _ = _engine(tmp_path, executor)
    engine.stop()
    result = asyncio.run(asyncio.wait_for(engine.run(plan.trials), 60))
    assert result.cancelled and result.records == []
    assert recorder.names() == ["vally_run_start", "vally_run_end"]
    assert recorder.events[-1][1]["outcome"].cancelled


def test_stop_while_running_cancels_the_waiting_trial(tmp_path: Path) -> None:
    executor = GateExecutor(others=99)  # 'slow' never gets its gate opened

    async def main() -> Any:
        engine, plan, recorder, _ = _engine(tmp_path, executor, workers=2)
        task = asyncio.create_task(engine.run(plan.trials))
        while sum(n == "vally_trial_end" for n in recorder.names()) < 4:
            await asyncio.sleep(0.01)
        engine.stop()
        return await task

    result = asyncio.run(asyncio.wait_for(main(), 60))
    records = {r.stimulus_name: r for r in result.records}
    assert result.cancelled
    assert records["slow"].status == "cancelled"
    assert records["slow"].error is not None and records["slow"].error.code == "VALLY_CANCELLED"
    assert records["a"].status == "success"


def test_an_interrupt_while_a_finished_trial_writes_its_files_keeps_its_record(
    tmp_path: Path,
) -> None:
    import threading

    from vally.engine.trials.trial import TrialRunner
    from vally.engine.trials.write_placement import WritePlacement

    executor = GateExecutor(others=0)
    engine, plan, _, run_dir = _engine(tmp_path, executor)
    writing, release = threading.Event(), threading.Event()
    original = TrialRunner._write_trial_files

    def slow_write(self: TrialRunner, *args: Any) -> None:
        writing.set()
        release.wait(30)
        original(self, *args)

    trial = next(t for t in plan.trials if t.stimulus.name == "a")

    async def main() -> Any:
        runner = engine.runner
        runner._write_trial_files = slow_write.__get__(runner)  # type: ignore[method-assign]
        runner._writes = WritePlacement(slow=-1.0)  # every write counts as slow: a thread
        task = asyncio.create_task(runner.run(trial))
        while not writing.is_set():
            await asyncio.sleep(0.01)
        task.cancel()  # the interrupt arrives while the files are being written
        await asyncio.sleep(0)
        release.set()
        return await task

    record = asyncio.run(asyncio.wait_for(main(), 60))
    assert record.status == "success" and record.stimulus_name == "a"
    trial = run_dir / name_folder("engine") / name_folder("a") / name_folder("default")
    assert (trial / "trial-0" / "metadata.json").is_file()
