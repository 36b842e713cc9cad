"""Trials that run in another process or on another machine (distributed runners).

The driver turns each attempt into a :class:`TrialJob` (picklable: the planned trial, the
run's identity, the backend choice, the secrets to hide) and the run's spec files into one
:class:`~vally.engine.planning.spec_files.SpecArchive` (shipped once per run). The worker runs the
job with :func:`run_trial_job`, which unpacks the archive once per node, rebuilds the run's
plugins once per worker process and run, runs the trial with the ordinary
:class:`~vally.engine.trials.trial.TrialRunner` into a scratch folder, and returns a
:class:`TrialOutcome`: the record, the trial's files and the grader events. The driver's
:class:`Dispatch` writes those files into the run folder and delivers the events, so
records and reports are the same as a local run's.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vally.contracts.events import RunInfo
from vally.contracts.protocols import LLMGate
from vally.engine.planning.plan import PlannedTrial, PluginRef
from vally.engine.planning.spec_files import (
    SpecArchive,
    SpecFiles,
    relocate,
    relocated_path,
    unpack,
)
from vally.engine.records.run_folder import Scrubber, trial_relpath
from vally.engine.trials.context import ATTEMPT, NODE, RunContext
from vally.engine.trials.llm_gate import GatedLLM
from vally.engine.trials.trial import TrialRunner
from vally.errors import OutputError
from vally.models.pricing import PriceTable
from vally.models.project import ProjectConfig
from vally.models.records import ExperimentBlock, GraderResult, TrialError, TrialResultRecord
from vally.models.spec import TrialResources


@dataclass(frozen=True)
class RemoteRun:
    """What a worker needs to rebuild a run's plugins (one value per run).

    Attributes:
        run: The run's identity.
        project: The project configuration.
        project_root: The folder of ``.vally.yaml`` (None without one).
        backend: The backend specifier (None: the project's, else ``local``).
        backend_args: The backend's ``--backend-args``.
        backend_base: Where a relative backend specifier resolves.
        skip_grade: Execute without grading.
        scrubber: Hides secret values in the trial's record and files.
        experiment_blocks: The ``experiment`` block per (variant, eval) (experiments).
        plugins: ``(kind, specifier, base_dir)`` of the executor and grader plugins the
            driver loaded by flag (``--grader-plugin``); workers load the same, path
            specifiers from the shipped spec files.
        no_cache: Graders' judge requests bypass the worker's judge cache (``--no-cache``).
    """

    run: RunInfo
    project: ProjectConfig
    project_root: Path | None
    backend: str | None
    backend_args: Mapping[str, Any]
    backend_base: Path
    skip_grade: bool
    scrubber: Scrubber
    experiment_blocks: Mapping[tuple[str, str], ExperimentBlock] = field(default_factory=dict)
    plugins: tuple[tuple[str, str, Path], ...] = ()
    no_cache: bool = False


REPLAYED_KINDS = ("executor", "grader")
"""Plugin kinds whose flag-loaded plugins workers load too (the others stay on the driver)."""


@dataclass(frozen=True)
class TrialJob:
    """One attempt of one trial, picklable, for a worker.

    Attributes:
        remote: The run (shared by every job of the run).
        trial: The planned trial.
        attempt: The 0-based attempt (``--max-retries``).
    """

    remote: RemoteRun
    trial: PlannedTrial
    attempt: int = 0


@dataclass(frozen=True)
class TrialOutcome:
    """What a worker returns for a :class:`TrialJob`.

    Attributes:
        record: The trial's (scrubbed) record.
        files: The trial folder's files by path relative to it.
        grader_results: The grader results in the order they were delivered.
        node: Where the trial ran (the runner's node id).
    """

    record: TrialResultRecord
    files: Mapping[str, bytes]
    grader_results: tuple[GraderResult, ...]
    node: str


class _Collector:
    """A stand-in event emitter on workers: keeps grader results for the driver."""

    def __init__(self) -> None:
        self.grader_results: list[GraderResult] = []

    def emit(self, hook_name: str, **kwargs: Any) -> None:
        """Keep ``vally_grader_result`` payloads; the driver emits every other event."""
        if hook_name == "vally_grader_result":
            self.grader_results.append(kwargs["result"])


@dataclass
class _WorkerRun:
    """One run's plugins in one worker process."""

    session: Any
    backend: Any
    executors: dict[PluginRef, Any]
    graders: Any
    llm: Any
    started: asyncio.Future[None] | None = None
    judge: Any = None


_RUNS: dict[str, _WorkerRun] = {}


def _on_node(path: str | Path, root: Path | None) -> str:
    """``path`` in the shipped spec files under ``root`` when it is there, else as given
    (names, modules, paths the node has itself)."""
    if root is None:
        return str(path)
    moved = relocated_path(path, root)
    return moved if Path(moved).exists() else str(path)


def _worker_run(
    remote: RemoteRun,
    trial: PlannedTrial,
    llm_gate: LLMGate | None = None,
    root: Path | None = None,
) -> _WorkerRun:
    from vally.engine.trials import components
    from vally.plugins.session import Session

    state = _RUNS.get(remote.run.run_id)
    if state is None:
        session = Session(remote.project, remote.project_root)
        for kind, specifier, base in remote.plugins:
            session.load_plugins(
                kind,  # type: ignore[arg-type]
                [_on_node(specifier, root)],
                base_dir=Path(_on_node(base, root)),
            )
        backend = components.build_backend(
            session,
            remote.project,
            flag_spec=remote.backend,
            flag_args=remote.backend_args,
            flag_base=remote.backend_base,
            project_root=remote.project_root,
        )
        state = _WorkerRun(session, backend, {}, None, None)
        _RUNS.clear()  # one run at a time per worker process: drop an earlier run's plugins
        _RUNS[remote.run.run_id] = state
    if trial.executor_ref not in state.executors:
        state.executors.update(components.build_executors(state.session, [trial]))
    if state.graders is None:
        state.graders = components.build_grader_factory(state.session, [trial], validate=False)
    if state.llm is None:
        llm = components.llm_provider_for(state.session, remote.project, [trial])
        if llm is not None and llm_gate is not None:
            llm = GatedLLM(llm, llm_gate, remote.project.llm.max_concurrency)
        state.llm = llm
        if llm is not None:
            from vally.engine.trials.judge_cache import CachedJudge, JudgeCache, cache_root

            root = cache_root(remote.project, remote.project_root)
            cache = None if remote.no_cache else JudgeCache(root)
            state.judge = CachedJudge(llm, cache, remote.project.llm.provider)
    return state


async def run_trial_job(
    job: TrialJob,
    *,
    node: str,
    files: SpecArchive | None = None,
    llm_gate: LLMGate | None = None,
) -> TrialOutcome:
    """Run ``job`` in this (worker) process and return its outcome.

    The run's plugins are built on the first job of a run in this process (and event
    loop) and reused; the trial's files are written to a scratch folder and returned with
    the record. Cancelling the call stops the trial like an interrupt: its sandbox is
    closed and the outcome says ``cancelled``.

    Args:
        job: The attempt.
        node: This node's id, written into the trial's ``metadata.json`` (``node``).
        files: The run's spec files (:meth:`Dispatch.spec_archive`): unpacked once on this
            node and read by the trial instead of the driver's paths. None reads the
            driver's paths (a node that shares the driver's file system).
        llm_gate: The run's cluster-wide LLM permits: every LLM call of the trial holds
            one of the project's ``llm.max_concurrency`` (None: capped per process only).
    """
    remote = job.remote
    trial = job.trial
    root = None
    if files is not None:
        root = await asyncio.to_thread(unpack, files)
        trial = relocate(trial, root)
    state = _worker_run(remote, trial, llm_gate, root)
    if state.started is None:  # once per process, however many of its trials start at once
        state.started = asyncio.ensure_future(state.backend.start(remote.run.run_id))
    await asyncio.shield(state.started)
    collector = _Collector()
    scratch = Path(tempfile.mkdtemp(prefix="vally-trial-"))
    try:
        context = RunContext(
            run=remote.run,
            backend=state.backend,
            executors=state.executors,
            create_grader=state.graders,
            emitter=collector,  # type: ignore[arg-type]
            scrubber=remote.scrubber,
            run_dir=scratch,
            skip_grade=remote.skip_grade,
            llm=state.llm,
            experiment_blocks=remote.experiment_blocks,
            prices=PriceTable(remote.project.prices),
            judge_llm=state.judge,
        )
        ATTEMPT.set(job.attempt)
        NODE.set(node)
        record = await TrialRunner(context).run(trial)
        folder = scratch / trial_relpath(trial.key)
        trial_files = {
            str(path.relative_to(folder)): path.read_bytes()
            for path in sorted(folder.rglob("*"))
            if path.is_file() and not path.is_symlink()
        }
        return TrialOutcome(record, trial_files, tuple(collector.grader_results), node)
    finally:  # off the loop: a worker process's other trials share it
        await asyncio.to_thread(shutil.rmtree, scratch, True)


class Dispatch:
    """The driver's side of one attempt (see :class:`~vally.contracts.protocols.TrialDispatch`).

    Args:
        runner: The driver's trial runner (its context is the run's).
        remote: The run as workers rebuild it.
        trial: The planned trial.
        attempt: The 0-based attempt.
        spec_files: The run's spec files (None: the run ships none).
    """

    def __init__(
        self,
        runner: TrialRunner,
        remote: RemoteRun,
        trial: PlannedTrial,
        attempt: int,
        spec_files: SpecFiles | None = None,
    ) -> None:
        self.runner = runner
        self.remote = remote
        self.trial = trial
        self.attempt = attempt
        self.spec_files = spec_files
        self._announced = False

    def _announce(self) -> None:
        ctx = self.runner.context
        if self.attempt == 0 and not self._announced:
            self._announced = True
            ctx.emitter.emit("vally_trial_start", run=ctx.run, key=self.trial.key)

    async def run_here(self) -> TrialResultRecord:
        """Run the attempt in this process."""
        return await self.runner.run(self.trial)

    def job(self) -> TrialJob:
        """The attempt for a worker (announces the trial's start to reporters)."""
        self._announce()
        return TrialJob(self.remote, self.trial, self.attempt)

    @property
    def resources(self) -> TrialResources | None:
        """What the trial reserves on its node (the spec's ``defaults.resources``)."""
        return self.trial.resources

    def spec_archive(self) -> SpecArchive | None:
        """The run's spec files packed (once per run; blocking, so call it off the event
        loop), for :func:`run_trial_job` on nodes that do not see this file system.

        Raises:
            ConfigError: The files are too large to ship or unreadable.
        """
        return self.spec_files.archive() if self.spec_files is not None else None

    async def accept(self, outcome: TrialOutcome) -> TrialResultRecord:
        """Write the outcome's files into the run folder, deliver its grader events and
        return its record."""
        ctx = self.runner.context
        for result in outcome.grader_results:
            ctx.emitter.emit("vally_grader_result", run=ctx.run, key=self.trial.key, result=result)
        folder = self.runner.trial_dir(self.trial)
        if folder is not None:
            await asyncio.to_thread(_write_files, folder, outcome.files)
        return outcome.record

    def cancelled(self) -> TrialResultRecord:
        """The record of the attempt stopped by an interrupt (its files written)."""
        return self.runner.stub_record(self.trial, None)

    def failed(self, message: str) -> TrialResultRecord:
        """The record of an attempt the runner could not complete (``status: error``,
        code ``VALLY_RUNNER``), e.g. every node that took it died; its files are written."""
        error = TrialError(phase="execute", code="VALLY_RUNNER", message=message)
        return self.runner.stub_record(self.trial, error)


def _write_files(folder: Path, files: Mapping[str, bytes]) -> None:
    try:
        for rel, data in files.items():
            path = folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    except OSError as exc:
        raise OutputError(
            f"cannot write the trial files in {folder}: {exc.strerror or exc}",
            hint="check free disk space and permissions of the output directory",
        ) from exc


DispatchRunner = Callable[[Dispatch], Awaitable[TrialResultRecord]]
"""A runner's ``run_trial``."""
