"""Running trials: one trial end to end (:class:`TrialRunner`) and a whole plan through the
worker pool (:class:`RunEngine`).

One trial::

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
import contextlib
import contextvars
import fnmatch
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import pydantic_core

from vally._version import __version__
from vally.contracts.events import EventEmitter, RunInfo, RunOutcome
from vally.contracts.protocols import (
    Executor,
    ExecutorOptions,
    LLMProvider,
    Runner,
    Sandbox,
    SkillRef,
    TrialContext,
    TrialKey,
)
from vally.engine import judge_cache
from vally.engine.offload import offload_texts
from vally.engine.planner import PlannedTrial, PluginRef
from vally.engine.records import RecordLog
from vally.engine.rundir import (
    ARTIFACTS_DIR,
    EVENTS_FILE,
    METADATA_FILE,
    REDACTED,
    Scrubber,
    trial_relpath,
)
from vally.engine.scheduler import DEFAULT_WORKERS, Scheduler
from vally.engine.summaries import RunSummaries
from vally.engine.tracebacks import format_traceback, plugin_location
from vally.engine.write_placement import WritePlacement
from vally.errors import CleanupError, OutputError, SetupError, TrialTimeoutError, VallyError
from vally.models.cost import trial_cost
from vally.models.pricing import PriceTable
from vally.models.records import (
    ExperimentBlock,
    GradeResult,
    GraderResult,
    RunSummaryRecord,
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

if TYPE_CHECKING:
    from vally.engine.remote import RemoteRun
    from vally.engine.spec_files import SpecFiles

log = logging.getLogger("vally.engine.runner")

TIMEOUT_GRACE = 5.0
"""Seconds the kernel waits past a trial's timeout before cancelling the executor itself
(executors are expected to stop their agent at the timeout on their own)."""

Phase = Literal["setup", "execute", "grade", "cleanup", "plan"]

ATTEMPT: contextvars.ContextVar[int] = contextvars.ContextVar("vally_trial_attempt", default=0)
"""The 0-based attempt of the trial running in the current task (``--max-retries``)."""

NODE: contextvars.ContextVar[str] = contextvars.ContextVar("vally_trial_node", default="")
"""Where the trial in the current task runs: the runner's node id (a Ray node id with
``--runner ray``), empty for this machine; written as ``node`` into the trial's
``metadata.json`` (this machine's host name when empty)."""

RETRIED_PHASES = frozenset({"setup", "execute"})
"""Operational failures of these phases are retried with ``--max-retries``."""

GraderFactory = Callable[[Any], Any]
"""Hands out the grader instance for a grader config entry (one per distinct reference)."""


@dataclass
class RunContext:
    """What every trial of a run shares.

    Attributes:
        run: The run's identity (given to every hook).
        backend: The started backend.
        executors: Executor instances by reference (see :class:`PluginRef`).
        create_grader: Builds the grader for a config entry (cached, validated at plan time).
        emitter: Delivers run events to reporters.
        scrubber: Hides secrets in everything written.
        run_dir: Where per-trial folders go; None writes no per-trial files.
        skip_grade: Execute without grading.
        llm: The LLM provider for judges and LLM executors, when configured.
        experiment_blocks: The ``experiment`` provenance block of each (variant, eval),
            added to its records (experiment runs).
        prices: Prices the records' ``cost`` (the built-in list prices by default).
        judge_llm: The provider graders call (the LLM provider behind the judge cache);
            None gives them ``llm``.
    """

    run: RunInfo
    backend: Any
    executors: Mapping[PluginRef, Executor]
    create_grader: GraderFactory
    emitter: EventEmitter
    scrubber: Scrubber = field(default_factory=Scrubber)
    run_dir: Path | None = None
    skip_grade: bool = False
    llm: LLMProvider | None = None
    experiment_blocks: Mapping[tuple[str, str], ExperimentBlock] = field(default_factory=dict)
    prices: PriceTable = field(default_factory=PriceTable)
    judge_llm: LLMProvider | None = None


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
            from vally.engine.no_workspace import NoWorkspace

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
            from vally.engine.workspace import prepare_workspace

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
        from vally.engine.no_workspace import stages_nothing
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
        if trial_dir is not None:
            trial_dir.mkdir(parents=True, exist_ok=True)
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
            trajectory: Trajectory = await asyncio.wait_for(
                executor.execute(trial.stimulus, sandbox, options),
                timeout=trial.timeout + TIMEOUT_GRACE,
            )
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
        from vally.engine.grading import grade_trial

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
        over-long texts into the trial folder (see :mod:`vally.engine.offload`)."""
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
        scrub = self.context.scrubber
        grade = record.grade_result
        metadata = {
            "runId": record.run_id,
            "trialId": record.trial_id,
            "variant": record.variant,
            "evalName": record.eval_name,
            "evalFile": record.eval_file,
            "stimulus": record.stimulus_name,
            "model": record.model,
            "trialIndex": record.trial_index,
            "executor": trial.executor.name,
            "status": record.status,
            "error": record.error.to_json_dict() if record.error else None,
            "passed": grade.passed if grade else None,
            "score": grade.score if grade else None,
            "startedAt": record.started_at,
            "completedAt": record.completed_at,
            "durationMs": record.duration_ms,
            "timeoutMs": int(trial.timeout * 1000),
            "workspace": record.trajectory.work_dir if record.trajectory else None,
            "keptWorkspace": str(trial.keep_workspace) if trial.keep_workspace else None,
            "endReason": record.trajectory.end_reason if record.trajectory else None,
            "attempt": ATTEMPT.get(),
            "node": NODE.get() or socket.gethostname(),
            "notes": notes,
            "vallyVersion": __version__,
        }
        try:
            events = trial_dir / EVENTS_FILE
            if not trial_dir.is_dir():  # the trial failed before its executor started
                trial_dir.mkdir(parents=True, exist_ok=True)
            if not events.exists() and record.trajectory is not None and record.trajectory.events:
                # The executor kept no session log: save the trajectory's events instead.
                events.write_text(
                    "".join(
                        scrub.text(e.model_dump_json(by_alias=True)) + "\n"
                        for e in record.trajectory.events
                    ),
                    encoding="utf-8",
                )
            if scrub:
                scrub_tree(trial_dir, scrub)  # the executor's own logs, copied artifacts
            # Per-trial files are written in place (no temp file and rename): they are
            # complete once the trial's record is emitted, and this is the hot path.
            (trial_dir / METADATA_FILE).write_bytes(
                pydantic_core.to_json(scrub.data(metadata), indent=2) + b"\n"
            )
        except OSError as exc:
            raise OutputError(
                f"cannot write the trial files in {trial_dir}: {exc.strerror or exc}",
                hint="check free disk space and permissions of the output directory",
            ) from exc


SCRUB_LIMIT = 64 * 1024 * 1024
"""Files larger than this are not scanned for secrets."""


def scrub_tree(folder: Path, scrubber: Scrubber) -> None:
    """Replace secret values in every file below ``folder`` (in place), and in the names of
    its files and folders (renamed, deepest first)."""
    needles = [(s.encode(), REDACTED.encode()) for s in scrubber.secrets]
    for path in folder.rglob("*"):
        if path.is_symlink() or not path.is_file() or path.stat().st_size > SCRUB_LIMIT:
            continue
        data = path.read_bytes()
        cleaned = data
        for needle, replacement in needles:
            if needle in cleaned:
                cleaned = cleaned.replace(needle, replacement)
        if cleaned != data:
            path.write_bytes(cleaned)
    for current, dirs, files in os.walk(folder, topdown=False):
        for name in [*files, *dirs]:
            clean = scrubber.text(name)
            if clean != name:
                _rename_free(Path(current, name), Path(current, clean))


def _rename_free(source: Path, target: Path) -> None:
    """Rename ``source`` to ``target``, or to ``target`` with a ``-2``, ``-3``, ... suffix
    when that name is taken."""
    candidate, n = target, 1
    while candidate.exists() or candidate.is_symlink():
        n += 1
        candidate = target.with_name(f"{target.name}-{n}")
    source.rename(candidate)


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
    crashed did (see :mod:`vally.engine.tracebacks`)."""
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


@dataclass
class RunResult:
    """What a finished (or interrupted) run produced."""

    run: RunInfo
    records: Sequence[TrialResultRecord]
    """Every finished trial's record. A run that wrote results files reads them back on each
    pass over this sequence (it does not hold them); otherwise a list."""
    summaries: list[RunSummaryRecord]
    cancelled: bool
    failures: list[str] = field(default_factory=list)
    """Operational failures outside trials (cleanup, summary files), as messages."""
    error: VallyError | None = None
    """What stopped the run early (a required output could not be written), if anything."""
    missing_outputs: list[str] = field(default_factory=list)
    """Required outputs written after the trials (summary files) that could not be."""
    budget_stops: list[str] = field(default_factory=list)
    """Why trials were not started because a ``--max-cost``/``--max-tokens`` budget was
    reached, one line per run or variant (empty: the budget, if any, was not reached)."""
    statuses: Mapping[str, int] | None = None
    """How many records have each status (``success``, ``error``, ``cancelled``), counted
    as the trials finished; None when not counted (then :attr:`records` is read)."""

    def count(self, status: str) -> int:
        """How many finished trials have ``status``."""
        if self.statuses is not None:
            return self.statuses.get(status, 0)
        return sum(1 for r in self.records if r.status == status)

    @property
    def errored(self) -> bool:
        """True when a trial errored or an operational failure happened."""
        return (
            self.error is not None
            or bool(self.failures)
            or bool(self.missing_outputs)
            or self.count("error") > 0
        )

    @property
    def verdict_failed(self) -> bool:
        """True when an eval's verdict is ``fail``."""
        return any(s.verdict == "fail" for s in self.summaries)


class TrialGate(Protocol):
    """Decides, while a run goes on, which planned trials still need to run (sequential
    experiments: ``vally experiment run --until-decided``)."""

    def order(self, trials: Sequence[PlannedTrial]) -> list[PlannedTrial]:
        """The order to schedule ``trials`` in (for example round by round)."""
        ...

    def admit(self, trial: PlannedTrial) -> bool:
        """True when ``trial`` should still start; a trial refused is not run and leaves no
        record."""
        ...

    def observe(self, record: TrialResultRecord) -> None:
        """Take a finished trial into account."""
        ...


class _Skipped(Exception):
    """Internal: the trial gate refused a trial; it is not run."""


class RunEngine:
    """Runs a plan: start the backend, emit run events, schedule the trials, write the run
    summaries and shut everything down.

    Args:
        context: Shared trial context (its ``run`` is emitted to observers).
        summaries: Summarises the records and writes the summary files (see
            :mod:`vally.engine.summaries`); written before ``vally_run_end``.
        workers: Concurrent trials.
        max_retries: How many times a trial that failed in setup or execution is run again
            (its earlier attempts' folders are kept as ``trial-<n>.attempt-<k>``).
        reused: Records of a resumed run's finished trials: summarised and reported with
            the new ones, not emitted again (the results files hold them already).
        results: The results files the run's records are written to (by its results
            writer), in order: the run keeps counts and summaries and reads the records
            back from them at the end; None keeps every record in memory.
        trial_runner: Where each attempt runs (a :class:`~vally.contracts.protocols.Runner`
            plugin); None runs them in this process.
        remote: The run as workers rebuild it (needed with ``trial_runner``).
        spec_files: The spec's files the runner may ship to its nodes.
    """

    def __init__(
        self,
        context: RunContext,
        summaries: RunSummaries,
        *,
        workers: int = DEFAULT_WORKERS,
        max_retries: int = 0,
        gate: TrialGate | None = None,
        reused: Sequence[TrialResultRecord] = (),
        trial_runner: Runner | None = None,
        remote: RemoteRun | None = None,
        spec_files: SpecFiles | None = None,
        results: Sequence[Path] | None = None,
    ) -> None:
        self.context = context
        self.spec_files = spec_files
        self.gate = gate
        self.skipped: list[PlannedTrial] = []
        self.trial_runner = trial_runner
        self.remote = remote
        self.summaries = summaries
        self.workers = workers
        self.max_retries = max_retries
        self.runner = TrialRunner(context)
        self.log = RecordLog(results)
        self.counter = summaries.counter()
        for record in reused:
            self.log.add(record)
            self.counter.add(record)
        self.failures: list[str] = []
        self.scheduler: Scheduler[PlannedTrial, TrialResultRecord] | None = None
        self.cancelled = False
        self.fatal: VallyError | None = None
        """The error that stopped the run early (a failed results writer), if any."""

    def stop(self) -> None:
        """Interrupt the run: start nothing new, cancel running trials."""
        self.cancelled = True
        if self.scheduler is not None:
            self.scheduler.stop()

    async def run(self, trials: Sequence[PlannedTrial]) -> RunResult:
        """Run ``trials`` and return every record and summary.

        When a critical observer (the results writer) or a trial's files cannot be written,
        the run stops early: the records already written stay, ``vally_run_end`` is still
        delivered, and the result's ``error`` says why.

        Raises:
            SetupError: The backend did not start (no trial ran).
        """
        ctx = self.context
        started_at = ctx.run.started_at
        backend_started = runner_started = False
        try:
            if trials:
                if self._runs_here():
                    try:
                        await ctx.backend.start(ctx.run.run_id)
                        backend_started = True
                    except Exception as exc:
                        raise _as_vally("backend", exc) from exc
                    self._tell_backend_what_opens(trials)
                runner_started = self.trial_runner is not None
                await self._start_runner()
            ctx.emitter.emit("vally_run_start", run=ctx.run)
            self.scheduler = Scheduler(
                self._attempts,
                workers=self.workers,
                on_result=self._finished,
                on_error=self._crashed,
            )
            if self.cancelled:
                self.scheduler.stop()
            await self.scheduler.run(self.gate.order(trials) if self.gate else trials)
        finally:
            await self._shutdown(backend_started, runner_started)
        return self._finish(started_at)

    def _finish(self, started_at: str) -> RunResult:
        """Summarise and write the summaries, then deliver ``vally_run_end``."""
        ctx = self.context
        summaries = self.counter.summaries(started_at)
        records = self.log.records()
        missing: list[str] = []
        try:
            self.summaries.write(summaries)
        except VallyError as exc:
            missing.append(exc.render())
        fatal = self.fatal
        outcome = RunOutcome(
            records=records,
            summaries=summaries,
            cancelled=self.cancelled or fatal is not None,
            error=fatal.render() if fatal is not None else None,
        )
        if fatal is None:
            ctx.emitter.emit("vally_run_end", run=ctx.run, outcome=outcome)
        else:
            with contextlib.suppress(Exception):  # let reporters close their files
                ctx.emitter.emit("vally_run_end", run=ctx.run, outcome=outcome)
        return RunResult(
            ctx.run,
            records,
            summaries,
            self.cancelled,
            self.failures,
            error=fatal,
            missing_outputs=missing,
            statuses=dict(self.log.statuses),
        )

    async def _attempts(self, trial: PlannedTrial) -> TrialResultRecord:
        """Run ``trial``, again up to ``max_retries`` times while it fails in setup or
        execution. Earlier attempts' folders are kept next to the final one as
        ``trial-<n>.attempt-<k>``."""
        if self.gate is not None and not self.gate.admit(trial):
            raise _Skipped()
        attempt = 0
        while True:
            ATTEMPT.set(attempt)
            record = await self._attempt(trial, attempt)
            error = record.error
            if (
                attempt >= self.max_retries
                or self.cancelled
                or record.status != "error"
                or error is None
                or error.phase not in RETRIED_PHASES
            ):
                return record
            folder = self.runner.trial_dir(trial)
            if folder is not None and folder.is_dir():
                folder.rename(folder.with_name(f"{folder.name}.attempt-{attempt}"))
            log.info("retrying %s after %s: %s", trial.key.as_id(), error.code, error.message)
            attempt += 1

    def _tell_backend_what_opens(self, trials: Sequence[PlannedTrial]) -> None:
        """Tell a backend that wants to know (its optional ``expect_sandboxes``) how many
        sandboxes the run will open. It is a hint: a backend failing to take it is logged,
        and the run goes on."""
        expect = getattr(self.context.backend, "expect_sandboxes", None)
        if not callable(expect):
            return
        count = sum(1 for trial in trials if self.runner.opens_backend(trial))
        try:
            expect(count)
        except Exception as exc:
            log.warning("the backend's expect_sandboxes(%d) failed: %s", count, exc)

    def _runs_here(self) -> bool:
        """False when the runner plugin runs every trial elsewhere (its class sets
        ``runs_elsewhere = True``): then this process needs no started backend."""
        return not getattr(self.trial_runner, "runs_elsewhere", False)

    async def _start_runner(self) -> None:
        if self.trial_runner is None:
            return
        try:
            await self.trial_runner.start(self.context.run.run_id)
        except Exception as exc:
            raise _as_vally("runner", exc) from exc

    async def _attempt(self, trial: PlannedTrial, attempt: int) -> TrialResultRecord:
        """One attempt, in this process or through the runner plugin."""
        if self.trial_runner is None or self.remote is None:
            return await self.runner.run(trial)
        from vally.engine.remote import Dispatch

        dispatch = Dispatch(self.runner, self.remote, trial, attempt, self.spec_files)
        record: TrialResultRecord = await self.trial_runner.run_trial(dispatch)
        return record

    def _finished(self, trial: PlannedTrial, record: TrialResultRecord) -> None:
        self.log.add(record)
        self.counter.add(record)
        if self.gate is not None:
            self.gate.observe(record)
        try:
            self.context.emitter.emit("vally_trial_end", run=self.context.run, record=record)
        except Exception as exc:
            # A critical observer (the results writer) failed: nothing more can be recorded.
            self._abort(exc)

    def _crashed(self, trial: PlannedTrial, exc: BaseException) -> None:
        if isinstance(exc, _Skipped):
            self.skipped.append(trial)
            return
        self._abort(exc)

    def _abort(self, exc: BaseException) -> None:
        if self.fatal is None:
            self.fatal = (
                exc
                if isinstance(exc, VallyError)
                else OutputError(f"the run stopped: {type(exc).__name__}: {exc}")
            )
        if self.scheduler is not None:
            self.scheduler.stop()

    async def _shutdown(self, backend_started: bool, runner_started: bool) -> None:
        if self.trial_runner is not None and runner_started:
            try:
                await self.trial_runner.shutdown()
            except Exception as exc:
                self.failures.append(f"runner shutdown failed: {_as_vally('runner', exc).render()}")
        for ref, executor in self.context.executors.items():
            try:
                await executor.shutdown()
            except Exception as exc:
                message = _as_vally("executor", exc).render()
                self.failures.append(f"executor {ref.name!r} failed to shut down: {message}")
        if backend_started:
            try:
                await self.context.backend.shutdown()
            except Exception as exc:
                self.failures.append(
                    f"backend shutdown failed: {_as_vally('backend', exc).render()}"
                )


def _as_vally(what: str, exc: BaseException) -> VallyError:
    if isinstance(exc, VallyError):
        return exc
    if what in ("backend", "runner"):
        return SetupError(f"the {what} failed: {type(exc).__name__}: {exc}")
    return CleanupError(f"{what} failed: {type(exc).__name__}: {exc}")


def trial_id(key: TrialKey) -> str:
    """The record's ``trialId``: ``[variant/]eval/stimulus/model/trial``."""
    return key.as_id() if key.variant else key.as_id()[1:]


def new_run_id() -> str:
    """A fresh run id (a UUID4)."""
    return str(uuid.uuid4())
