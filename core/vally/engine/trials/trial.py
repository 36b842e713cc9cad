"""One trial end to end (:class:`TrialRunner`)::

    backend.open(TrialContext) -> prepare_workspace -> executor.execute (timeout enforced
    from outside too) -> grade_trial (unless skipped) -> artifacts copied out
    -> sandbox.close() (always) -> TrialResultRecord

Every failure of a trial becomes its record (``status: error`` with a
:class:`~vally.models.records.TrialError` naming the phase), never an exception and never a
traceback; a cancelled trial gets ``status: cancelled``. Records are scrubbed of secret
values before anyone sees them.
"""

from __future__ import annotations

import asyncio
import fnmatch
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from vally.contracts.protocols import ExecutorOptions, Sandbox, SkillRef, TrialContext
from vally.engine.planning.plan import PlannedTrial
from vally.engine.records.offload import offload_texts
from vally.engine.records.run_folder import ARTIFACTS_DIR, trial_relpath
from vally.engine.trials import judge_cache
from vally.engine.trials.context import (
    ATTEMPT,
    TIMEOUT_GRACE,
    Phase,
    RunContext,
    trial_id,
)
from vally.engine.trials.tracebacks import format_traceback, plugin_location
from vally.engine.trials.trial_dirs import FolderMaker
from vally.engine.trials.trial_files import write_trial_files
from vally.engine.trials.write_placement import WritePlacement
from vally.errors import OutputError, TrialTimeoutError, VallyError
from vally.models.cost import trial_cost
from vally.models.records import (
    GradeResult,
    GraderResult,
    TrialError,
    TrialResultRecord,
)
from vally.models.trajectory import (
    ErrorData,
    ErrorEvent,
    Trajectory,
    TrajectoryMetadata,
    TrajectoryMetrics,
    utc_now,
)
from vally.models.usage import JudgeCacheCounts, trial_usage

log = logging.getLogger(__name__)


class _TrialFailed(Exception):
    """Internal: a phase failed; carries the TrialError."""

    def __init__(self, error: TrialError) -> None:
        super().__init__(error.message)
        self.error = error


@dataclass
class _TrialState:
    """What one trial has acquired so far (for cleanup and the record)."""

    phase: Phase = "setup"
    sandbox: Sandbox | None = None
    trajectory: Trajectory | None = None
    grade: GradeResult | None = None
    notes: list[str] = field(default_factory=list)
    status: Literal["success", "error", "cancelled"] = "success"
    error: TrialError | None = None
    judge_cache: JudgeCacheCounts = field(default_factory=JudgeCacheCounts)

    def fail(self, error: TrialError) -> None:
        """The trial errored."""
        self.status, self.error = "error", error

    def cancel(self, *, keep_error: bool = False) -> None:
        """The run was interrupted during this trial (an earlier error stays when asked)."""
        self.status = "cancelled"
        if not (keep_error and self.error is not None):
            self.error = TrialError(
                phase=self.phase, code="VALLY_CANCELLED", message="the run was interrupted"
            )


def _error(phase: Phase, exc: BaseException) -> TrialError:
    if isinstance(exc, VallyError):
        return TrialError(phase=phase, code=exc.code, message=exc.render())
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return TrialError(phase=phase, code="VALLY_TIMEOUT", message=str(exc) or "timed out")
    text = str(exc).strip()
    message = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    location = plugin_location(exc)
    if location is not None:
        message += f" (at {location})"
    return TrialError(
        phase=phase,
        code="VALLY_INTERNAL",
        message=message,
        location=location,
        traceback=format_traceback(exc),
    )


class TrialRunner:
    """Runs one planned trial end to end and returns its record.

    Args:
        context: What the trials of the run share.
    """

    def __init__(self, context: RunContext) -> None:
        self.context = context
        self._writes = WritePlacement()
        self._folders = FolderMaker(context.run_dir) if context.run_dir is not None else None

    def trial_dir(self, trial: PlannedTrial) -> Path | None:
        """The trial's folder in the run folder (None when the run writes no files)."""
        if self.context.run_dir is None:
            return None
        return self.context.run_dir / trial_relpath(trial.key)

    async def run(self, trial: PlannedTrial) -> TrialResultRecord:
        """Run ``trial`` and return its (scrubbed) record; never raises except for
        :class:`OutputError` from the trial's own files."""
        ctx = self.context
        if ATTEMPT.get() == 0:
            ctx.emitter.emit("vally_trial_start", run=ctx.run, key=trial.key)
        started_at = utc_now()
        t0 = time.monotonic()
        trial_dir = self.trial_dir(trial)
        state = _TrialState()
        try:
            await self._phases(trial, trial_dir, state)
            grade = state.grade
            if grade is not None and grade.errored:
                state.fail(_grading_error(grade.details))
        except _TrialFailed as failed:
            state.fail(failed.error)
        except asyncio.CancelledError:
            # The run is being stopped: this trial ends as a record, so the cancellation is
            # consumed here (and the task's cancel count reset for the cleanup awaits below).
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            state.cancel()
        except Exception as exc:  # a bug somewhere: still a record, never a traceback
            log.debug("trial %s failed unexpectedly", trial.key.as_id(), exc_info=True)
            state.fail(_error(state.phase, exc))
        finally:
            await self._close(state)
        record = self._final_record(trial, state, started_at, t0)
        if trial_dir is not None:
            record = await self._save(trial, trial_dir, record, state.notes)
        return record

    def stub_record(self, trial: PlannedTrial, error: TrialError | None) -> TrialResultRecord:
        """The record of a trial that ran elsewhere and could not report: ``cancelled``
        (interrupted) when ``error`` is None, else ``error``; its files are written like any
        other trial's."""
        state = _TrialState()
        if error is None:
            state.cancel()
        else:
            state.fail(error)
        record = self.context.scrubber.record(
            self._record(trial, state, utc_now(), time.monotonic())
        )
        trial_dir = self.trial_dir(trial)
        if trial_dir is not None:
            self._write_trial_files(trial, trial_dir, record, state.notes)
        return record

    @staticmethod
    async def _close(state: _TrialState) -> None:
        """Close the trial's sandbox (always), also when interrupted again meanwhile."""
        if state.sandbox is None:
            return
        state.phase = "cleanup"
        closing = asyncio.ensure_future(state.sandbox.close())
        try:
            await asyncio.shield(closing)
        except asyncio.CancelledError:
            # Interrupted again while closing: still let the close finish.
            await asyncio.wait([closing])
            state.cancel(keep_error=True)
        except Exception as exc:
            if state.status == "success":
                state.fail(_error("cleanup", exc))
            else:
                state.notes.append(f"cleanup failed: {_error('cleanup', exc).message}")

    def _final_record(
        self, trial: PlannedTrial, state: _TrialState, started_at: str, t0: float
    ) -> TrialResultRecord:
        """The trial's record, writable and scrubbed. A record that cannot be built from
        what the trial produced (its events, its grades) errors this trial only: it is
        rebuilt without them, with the reason."""
        scrub = self.context.scrubber
        try:
            return scrub.record(self._record(trial, state, started_at, t0).writable())
        except Exception as exc:
            log.debug("record of %s failed", trial.key.as_id(), exc_info=True)
            reason = _error(state.phase, exc)
            state.trajectory, state.grade = None, None
            state.fail(
                reason.model_copy(
                    update={"message": f"the trial's record could not be built: {reason.message}"}
                )
            )
            return scrub.record(self._record(trial, state, started_at, t0).writable())

    def _record(
        self, trial: PlannedTrial, state: _TrialState, started_at: str, t0: float
    ) -> TrialResultRecord:
        ctx = self.context
        trajectory = state.trajectory
        if trajectory is None and state.error is not None:
            trajectory = self._stub_trajectory(trial, state.error, started_at)
        return TrialResultRecord(
            run_id=ctx.run.run_id,
            eval_name=trial.key.eval_name,
            eval_file=str(trial.loaded.source),
            stimulus_name=trial.stimulus.name,
            stimulus=trial.stimulus,
            case_hash=trial.fingerprint(),
            variant=trial.key.variant or None,
            model=trial.model,
            trial_index=trial.key.trial,
            trial_id=trial_id(trial.key),
            status=state.status,
            error=state.error,
            started_at=started_at,
            completed_at=utc_now(),
            duration_ms=int((time.monotonic() - t0) * 1000),
            tags=dict(trial.tags),
            grade_result=state.grade,
            trajectory=trajectory,
            experiment=ctx.experiment_blocks.get((trial.key.variant, trial.key.eval_name)),
            usage=trial_usage(trajectory, state.grade).model_copy(
                update={"judge_cache": state.judge_cache}
            ),
            cost=trial_cost(trajectory, state.grade, model=trial.model, prices=ctx.prices),
        )

    async def _save(
        self, trial: PlannedTrial, trial_dir: Path, record: TrialResultRecord, notes: list[str]
    ) -> TrialResultRecord:
        """Write the trial's files and return the record to emit (its over-long texts
        moved to files); an interrupt meanwhile must not lose the record."""
        task = asyncio.current_task()
        if task is None or task.cancelling():
            # Being cancelled: write synchronously so the record is never lost.
            return self._write_and_offload(trial, trial_dir, record, notes)
        if self._writes.in_place():
            return self._writes.timed(
                lambda: self._write_and_offload(trial, trial_dir, record, notes)
            )
        # Slow file system: overlap its latency with other trials.
        writing = asyncio.ensure_future(
            asyncio.to_thread(self._write_and_offload, trial, trial_dir, record, notes)
        )
        try:
            await asyncio.shield(writing)
        except asyncio.CancelledError:
            await asyncio.wait([writing])
            task.uncancel()
        return writing.result()

    async def _phases(
        self, trial: PlannedTrial, trial_dir: Path | None, state: _TrialState
    ) -> None:
        ctx = self.context
        # --- setup
        if not self.opens_backend(trial):
            from vally.engine.trials.no_workspace import NoWorkspace

            state.sandbox = NoWorkspace(trial.executor.name)
            await self._run_phases(trial, trial_dir, state, state.sandbox, [])
            return
        try:
            sandbox: Sandbox = await ctx.backend.open(
                TrialContext(
                    key=trial.key,
                    run_id=ctx.run.run_id,
                    environment=trial.environment,
                    spec_dir=trial.spec_dir,
                    keep_workspace=trial.keep_workspace,
                    labels={"vally.run": ctx.run.run_id, "vally.trial": trial.key.as_id()},
                )
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise _TrialFailed(_error("setup", exc)) from exc
        state.sandbox = sandbox
        try:
            from vally.engine.trials.workspace import prepare_workspace

            skills = await prepare_workspace(
                sandbox, trial.environment, setup_timeout=trial.timeout
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise _TrialFailed(_error("setup", exc)) from exc
        await self._run_phases(trial, trial_dir, state, sandbox, skills)

    def opens_backend(self, trial: PlannedTrial) -> bool:
        """Whether ``trial`` opens a sandbox of the backend. It does not when it can run
        without a workspace: its executor declares ``needs_workspace=False``, no grader
        needs the workspace, the environment stages nothing, no artifacts are copied and
        the workspace is not kept."""
        from vally.engine.trials.no_workspace import stages_nothing
        from vally.plugins import capabilities

        ctx = self.context
        workspace_free = (
            capabilities.declares_no_workspace(ctx.executors[trial.executor_ref])
            and trial.keep_workspace is None
            and not trial.stimulus.artifacts
            and stages_nothing(trial.environment)
            and not any(capabilities.needs_workspace(ctx.create_grader(g)) for g in trial.graders)
        )
        return not workspace_free

    async def _run_phases(
        self,
        trial: PlannedTrial,
        trial_dir: Path | None,
        state: _TrialState,
        sandbox: Sandbox,
        skills: Sequence[SkillRef],
    ) -> None:
        ctx = self.context
        # --- execute
        state.phase = "execute"
        trajectory = await self._execute(trial, sandbox, skills, trial_dir, state)
        _record_sandbox_facts(trajectory, sandbox)
        state.trajectory = trajectory
        await _stop_agent(sandbox)
        try:
            # --- grade
            state.phase = "grade"
            if not ctx.skip_grade:
                with judge_cache.counting(state.judge_cache):
                    state.grade = await self._grade(trial, trajectory, sandbox)
        finally:
            # --- artifacts (best effort, also when grading failed)
            if trial_dir is not None and trial.stimulus.artifacts:
                await self._copy_artifacts(trial, sandbox, trial_dir / ARTIFACTS_DIR, state.notes)

    async def _execute(
        self,
        trial: PlannedTrial,
        sandbox: Sandbox,
        skills: Sequence[SkillRef],
        trial_dir: Path | None,
        state: _TrialState,
    ) -> Trajectory:
        ctx = self.context
        executor = ctx.executors[trial.executor_ref]
        mcp = {k: v for k, v in trial.environment.mcpServers.items() if v is not None}
        if trial_dir is not None and self._folders is not None:  # both come from run_dir
            self._folders.make(trial_dir)
        options = ExecutorOptions(
            model=trial.model,
            timeout=trial.timeout,
            skills=tuple(skills),
            mcp_servers=mcp,
            env=dict(trial.environment.env),
            reasoning_effort=trial.reasoning_effort,
            constraints=trial.constraints,
            session_log_dir=trial_dir,
            llm=ctx.llm,
            spec_dir=trial.spec_dir,
            run_id=ctx.run.run_id,
            key=trial.key,
        )
        try:
            async with asyncio.timeout(trial.timeout + TIMEOUT_GRACE):  # no task of its own
                trajectory: Trajectory = await executor.execute(trial.stimulus, sandbox, options)
        except asyncio.CancelledError:
            raise
        except TimeoutError as exc:
            raise _TrialFailed(_error("execute", _timed_out(trial))) from exc
        except Exception as exc:
            raise _TrialFailed(_error("execute", exc)) from exc
        if not isinstance(trajectory, Trajectory):
            raise _TrialFailed(
                TrialError(
                    phase="execute",
                    code="VALLY_EXECUTION",
                    message=f"executor {trial.executor.name!r} returned "
                    f"{type(trajectory).__name__}, not a Trajectory",
                )
            )
        if trajectory.end_reason == "timeout":
            state.trajectory = trajectory
            raise _TrialFailed(_error("execute", _timed_out(trial, trajectory.end_detail)))
        return trajectory

    async def _grade(
        self, trial: PlannedTrial, trajectory: Trajectory, sandbox: Sandbox
    ) -> GradeResult:
        ctx = self.context
        from vally.engine.trials.grading import grade_trial

        def on_result(result: GraderResult) -> None:
            clean = ctx.scrubber.record(result)  # observers write it (spans) or print it
            ctx.emitter.emit("vally_grader_result", run=ctx.run, key=trial.key, result=clean)

        try:
            return await grade_trial(
                trajectory,
                trial.stimulus,
                list(trial.graders),
                create_grader=ctx.create_grader,
                sandbox=sandbox,
                spec_dir=trial.spec_dir,
                llm=ctx.judge_llm or ctx.llm,
                judge=trial.judge,
                weights=trial.weights,
                threshold=trial.threshold,
                constraints=trial.constraints,
                on_result=on_result,
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise _TrialFailed(_error("grade", exc)) from exc

    async def _copy_artifacts(
        self, trial: PlannedTrial, sandbox: Sandbox, dest: Path, notes: list[str]
    ) -> None:
        try:
            files = await sandbox.list_files(".")
        except Exception as exc:
            notes.append(f"artifacts: cannot list the workspace: {exc}")
            return
        wanted = [
            f
            for f in files
            if any(
                fnmatch.fnmatchcase(f, pattern)
                or fnmatch.fnmatchcase(f, pattern.rstrip("/") + "/*")
                for pattern in trial.stimulus.artifacts
            )
        ]
        for rel in wanted:
            try:
                await sandbox.copy_out(rel, dest / rel)
            except Exception as exc:
                notes.append(f"artifact {rel}: {exc}")
        unmatched = [
            p
            for p in trial.stimulus.artifacts
            if not any(
                fnmatch.fnmatchcase(f, p) or f.startswith(p.rstrip("/") + "/") for f in files
            )
        ]
        for pattern in unmatched:
            notes.append(f"artifact pattern {pattern!r} matched no file")

    def _stub_trajectory(
        self, trial: PlannedTrial, error: TrialError, started_at: str
    ) -> Trajectory:
        return Trajectory(
            stimulus=trial.stimulus,
            events=[ErrorEvent(data=ErrorData(message=error.message, code=error.code, fatal=True))],
            metrics=TrajectoryMetrics(error_count=1),
            end_reason="cancelled" if error.code == "VALLY_CANCELLED" else "error",
            end_detail=error.message,
            metadata=TrajectoryMetadata(
                model=trial.model,
                executor=trial.executor.name,
                started_at=started_at,
                completed_at=utc_now(),
            ),
        )

    def _write_and_offload(
        self, trial: PlannedTrial, trial_dir: Path, record: TrialResultRecord, notes: list[str]
    ) -> TrialResultRecord:
        """Write the trial's files (from the whole record), then move the record's
        over-long texts into the trial folder (see :mod:`vally.engine.records.offload`)."""
        self._write_trial_files(trial, trial_dir, record, notes)
        run_dir = self.context.run_dir
        if run_dir is None:
            return record
        try:
            return offload_texts(record, trial_dir, run_dir)
        except OSError as exc:
            raise OutputError(
                f"cannot write the texts of the trial in {trial_dir}: {exc.strerror or exc}",
                hint="check free disk space and permissions of the output directory",
            ) from exc

    def _write_trial_files(
        self, trial: PlannedTrial, trial_dir: Path, record: TrialResultRecord, notes: list[str]
    ) -> None:
        write_trial_files(self.context.scrubber, trial, trial_dir, record, notes)


def _record_sandbox_facts(trajectory: Trajectory, sandbox: Sandbox) -> None:
    """Keep the sandbox's own facts (its ``metadata`` mapping, when it has one: the docker
    backend's container, image, user, warnings and disk limit) in
    ``trajectory.metadata.extra["sandbox"]``."""
    facts = getattr(sandbox, "metadata", None)
    if isinstance(facts, dict):
        trajectory.metadata.extra["sandbox"] = dict(facts)


async def _stop_agent(sandbox: Sandbox) -> None:
    """Stop whatever the agent left running before grading (sandboxes that can)."""
    stop = getattr(sandbox, "stop_processes", None)
    if stop is None:
        return
    try:
        await stop()
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        error = _error("execute", exc)
        message = f"cannot stop the agent's processes before grading: {error.message}"
        raise _TrialFailed(error.model_copy(update={"message": message})) from exc


def _grading_error(details: Sequence[GraderResult]) -> TrialError:
    """The trial's error when graders failed: their messages, and where the first one that
    crashed did (see :mod:`vally.engine.trials.tracebacks`)."""
    broken = [d for d in details if d.status == "error"]
    message = "; ".join(f"{d.name}: {d.evidence}" for d in broken)
    crashed = next((d for d in broken if d.metadata.get("traceback")), None)
    return TrialError(
        phase="grade",
        code="VALLY_GRADING",
        message=message or "a grader failed to produce a result",
        location=crashed.metadata.get("location") if crashed else None,
        traceback=crashed.metadata.get("traceback") if crashed else None,
    )


def _timed_out(trial: PlannedTrial, detail: str | None = None) -> TrialTimeoutError:
    from vally.models.durations import format_duration

    return TrialTimeoutError(
        detail
        or f"the agent did not finish within the timeout of {format_duration(trial.timeout)}; "
        "it was stopped",
        timeout=trial.timeout,
    )


# --------------------------------------------------------------------------- the run
