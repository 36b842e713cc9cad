"""A whole plan through the worker pool (:class:`RunEngine`): trials scheduled, retried,
gated and dispatched to a runner, their records written, the run's result."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from vally.contracts.events import RunInfo, RunOutcome
from vally.contracts.protocols import (
    Runner,
)
from vally.engine.planning.plan import PlannedTrial
from vally.engine.records.record_log import RecordLog
from vally.engine.trials.scheduler import DEFAULT_WORKERS, Scheduler
from vally.engine.trials.summaries import RunSummaries, SummaryCounter
from vally.errors import CleanupError, OutputError, SetupError, VallyError
from vally.models.records import (
    RunSummaryRecord,
    TrialResultRecord,
)

if TYPE_CHECKING:
    from vally.engine.planning.spec_files import SpecFiles
    from vally.engine.trials.remote import RemoteRun

from vally.engine.trials.context import ATTEMPT, RETRIED_PHASES, RunContext, TrialGate
from vally.engine.trials.trial import TrialRunner

log = logging.getLogger(__name__)


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


class _Skipped(Exception):
    """Internal: the trial gate refused a trial; it is not run."""


class RunEngine:
    """Runs a plan: start the backend, emit run events, schedule the trials, write the run
    summaries and shut everything down.

    Args:
        context: Shared trial context (its ``run`` is emitted to observers).
        summaries: Summarises the records and writes the summary files (see
            :mod:`vally.engine.trials.summaries`); written before ``vally_run_end``.
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
        counter = summaries.counter()
        for record in reused:
            self.log.add(record)
            counter.add(record)
        self.counter: SummaryCounter | None = counter
        """The summaries' tallies, fed as trials finish; None once they are summarised (they
        are let go before the reporters' end of run, whose work then reuses their memory)."""
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
        counter, self.counter = self.counter, None
        summaries = counter.summaries(started_at) if counter is not None else []
        del counter
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
        from vally.engine.trials.remote import Dispatch

        dispatch = Dispatch(self.runner, self.remote, trial, attempt, self.spec_files)
        record: TrialResultRecord = await self.trial_runner.run_trial(dispatch)
        return record

    def _finished(self, trial: PlannedTrial, record: TrialResultRecord) -> None:
        self.log.add(record)
        if self.counter is not None:
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
