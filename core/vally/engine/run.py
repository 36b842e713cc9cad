"""The run API: one way to build and execute a run, for ``vally eval``, ``vally experiment
run`` and Python code.

A run goes through two steps::

    request = RunRequest(session=..., inputs=[PlanInput(loaded)], reporters=[...])
    prepared = prepare_run(request)      # plan, plugins, backend: validated, nothing written
    result = prepared.execute(run_dir)   # trials through the worker pool -> RunResult

:func:`prepare_run` builds the plan and every plugin the plan needs (executors, graders,
backend, reporters, the LLM provider) and reports any problem before a file is written or a
trial starts. :meth:`PreparedRun.execute` runs the selected trials, delivers run events to the
reporters (which write ``results.jsonl``, the report, spans) and writes the run summaries.
An experiment is the same run with a variant per trial (:class:`ExperimentMode`): its records
carry the experiment block, and its summaries are written per variant.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vally.contracts.events import RunInfo
from vally.contracts.llm import LLMProvider
from vally.contracts.protocols import Backend, Executor, LoadedEval, Runner, TrialKey
from vally.engine.planning.plan import Plan, PlanInput, PlannedTrial, PlanOptions, PluginRef
from vally.engine.planning.planner import build_plan
from vally.engine.planning.spec_files import SpecFiles, spec_roots
from vally.engine.trials import components
from vally.engine.trials.budget import Budget, BudgetGate
from vally.engine.trials.components import BackendChoice, ReporterChoice, RunnerChoice
from vally.engine.trials.context import GraderFactory, RunContext, TrialGate, new_run_id
from vally.engine.trials.remote import REPLAYED_KINDS, RemoteRun
from vally.engine.trials.run_engine import RunEngine, RunResult
from vally.engine.trials.run_plugins import create_run_plugins
from vally.engine.trials.scheduler import DEFAULT_WORKERS, stop_on_signals
from vally.engine.trials.summaries import PlanSummaries, RunSummaries, VariantSummaries
from vally.errors import MissingExecutorError
from vally.models.pricing import PriceTable
from vally.models.project import ProjectConfig
from vally.models.records import ExperimentBlock, TrialResultRecord
from vally.models.spec import Stimulus
from vally.models.trajectory import utc_now
from vally.plugins.session import Session

if TYPE_CHECKING:
    from vally.engine.planning.resume import ResumePlan
    from vally.engine.trials.judge_cache import CachedJudge

StimulusFilter = Callable[[LoadedEval, Stimulus], bool]
"""Selects stimuli beyond the plan options' tag filter (e.g. a suite's filter)."""

ShardSelector = Callable[[list[TrialKey]], list[TrialKey]]
"""Picks the keys this process runs from the whole plan's keys (a shard of them)."""


def run_coroutine(main: Callable[[], Coroutine[Any, Any, RunResult]]) -> RunResult:
    """Run ``main()`` to completion from synchronous code. Inside a running event loop (a
    Jupyter notebook, an async application) it runs on its own loop in a worker thread, so
    the blocking call still works there; use :meth:`PreparedRun.execute_async` to await a
    run on the caller's loop instead."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, main()).result()


@dataclass(frozen=True)
class ExperimentMode:
    """What makes a run an experiment: named variants compared with a baseline.

    Attributes:
        name: The experiment's name.
        baseline: The baseline variant.
        variants: Every variant, in the experiment file's order.
        snapshot: The plan snapshot (``plan-snapshot.json``) the summaries follow.
        blocks: The ``experiment`` block of each (variant, eval name), added to records.
        shard: ``"i/n"`` when this process runs one shard.
    """

    name: str
    baseline: str
    variants: Sequence[str]
    snapshot: Mapping[str, Any]
    blocks: Mapping[tuple[str, str], ExperimentBlock]
    shard: str | None = None


@dataclass
class RunRequest:
    """One run, fully described: which evals, which plugins, which reporters.

    Attributes:
        session: The plugin session (plugins named by flags already loaded into it).
        inputs: The evals to plan, each with its variant, in run order.
        plan_options: Run-wide planning choices (models, runs, timeout, filters, ...).
        project_root: The folder of ``.vally.yaml`` (None without one): the confinement
            root of ``files[].src``.
        stimulus_filter: Extra stimulus selection.
        command: ``eval`` or ``experiment`` (given to reporters).
        backend: The backend choice.
        reporters: The reporters to create, in registration order.
        reporter_plugins: ``--reporter-plugin`` specifiers (resolved from ``plugin_base``).
        plugin_base: Where relative plugin specifiers resolve.
        workers: Concurrent trials (None: the project's default, else 5).
        max_retries: Retries of a trial that failed in setup or execution.
        skip_grade: Execute without grading.
        select: Picks this process's shard of the plan's keys (None: every key).
        experiment: Set for experiment runs.
        run_id: A stable run id (None: a new UUID).
        runner: Where the trials execute (None: in this process, as ``--runner local``).
        options: Presentation options given to reporters (``RunInfo.options``).
        gate: Decides during the run which trials still start (sequential experiments);
            None runs every selected trial.
        budget: ``--max-cost``/``--max-tokens``: stop starting trials once spent (an
            experiment's variants share it evenly); None: no limit.
        no_cache: Graders' judge requests bypass the judge cache (``--no-cache``).
    """

    session: Session
    inputs: Sequence[PlanInput]
    plan_options: PlanOptions = field(default_factory=PlanOptions)
    project_root: Path | None = None
    stimulus_filter: StimulusFilter | None = None
    command: str = "eval"
    backend: BackendChoice = field(default_factory=BackendChoice)
    reporters: Sequence[ReporterChoice] = ()
    reporter_plugins: Sequence[str] = ()
    plugin_base: Path = field(default_factory=Path.cwd)
    workers: int | None = None
    max_retries: int = 0
    skip_grade: bool = False
    select: ShardSelector | None = None
    experiment: ExperimentMode | None = None
    run_id: str | None = None
    runner: RunnerChoice | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    gate: TrialGate | None = None
    budget: Budget | None = None
    no_cache: bool = False

    @property
    def project(self) -> ProjectConfig:
        """The project configuration (defaults when the session has none)."""
        return self.session.project or ProjectConfig()


def plan_request(request: RunRequest) -> Plan:
    """The request's plan (no plugin is created).

    Raises:
        ConfigError: A spec is invalid for planning; a missing executor names the
            installed ones.
    """
    from vally.specs.environments import resolve_environment

    session = request.session
    project = request.project

    known: dict[tuple[int, int], Any] = {}  # stimuli that set no environment share the eval's

    def resolve(item: LoadedEval, stimulus: Stimulus) -> Any:
        key = (id(item), 0 if stimulus.environment is None else id(stimulus))
        if key not in known:
            known[key] = resolve_environment(item, stimulus, project, request.project_root)
        return known[key]

    try:
        return build_plan(
            request.inputs,
            request.plan_options,
            resolve_environment=resolve,
            stimulus_filter=request.stimulus_filter,
        )
    except MissingExecutorError as exc:
        names = ", ".join(sorted(session.known_names("executor"))) or "(none)"
        raise MissingExecutorError(
            exc.message, location=exc.location, hint=f"{exc.hint}; installed executors: {names}"
        ) from None


def prepare_run(
    request: RunRequest, *, dry_run: bool = False, plan: Plan | None = None
) -> PreparedRun:
    """Plan the request and create every plugin it needs in one pass
    (:func:`~vally.engine.trials.run_plugins.create_run_plugins`), before anything is written.

    Args:
        request: The run.
        dry_run: Validate executors, graders and reporters; create no backend or provider.
        plan: The request's plan when the caller already made it (:func:`plan_request`).

    Raises:
        VallyError: A spec, plugin, config or selection problem (nothing was written).
    """
    plan = plan if plan is not None else plan_request(request)
    trials: Sequence[PlannedTrial] = plan.trials
    if request.select is not None:
        wanted = set(request.select(plan.keys))
        trials = [t for t in plan.trials if t.key in wanted]
    plugins = create_run_plugins(request, plan, dry_run=dry_run)
    prepared = PreparedRun(request, plan, trials, plugins.executors, plugins.create_grader)
    prepared.reporters = plugins.reporters
    prepared.backend, prepared.llm, prepared.runner = plugins.backend, plugins.llm, plugins.runner
    return prepared


@dataclass
class PreparedRun:
    """A planned run with its plugins created; :meth:`execute` runs it once.

    Attributes:
        request: What was asked.
        plan: The whole plan (every shard).
        trials: The trials this process runs (the selected shard), in plan order.
        executors: Executor instances by reference.
        create_grader: Hands out grader instances per config entry.
        backend: The backend (None for a dry run or an empty plan).
        reporters: The reporters by name, registered when the run starts.
        llm: The project's LLM provider when a plugin needs one.
        reused: Records a resumed run keeps from its folder (see :meth:`resume`).
        resumed_id: The run id of the run being resumed.
        budget_gate: The gate enforcing the request's budget (set when the run starts).
        judge: The graders' LLM provider behind the judge cache (its ``cache`` counts the
            hits and misses of the run).
        runner: The ``--runner`` plugin (None: trials run in this process).
    """

    request: RunRequest
    plan: Plan
    trials: Sequence[PlannedTrial]
    executors: Mapping[PluginRef, Executor]
    create_grader: GraderFactory
    backend: Backend | None = None
    reporters: list[tuple[str, object]] = field(default_factory=list)
    llm: LLMProvider | None = None
    runner: Runner | None = None
    engine: RunEngine | None = None
    reused: Sequence[TrialResultRecord] = ()
    resumed_id: str | None = None
    budget_gate: BudgetGate | None = None
    judge: CachedJudge | None = None

    def resume(self, run_dir: Path, *, retry_errors: bool = False) -> ResumePlan:
        """Continue the run in ``run_dir``: keep its finished trials, run only the others
        (errored ones too with ``retry_errors``) under its run id, into the same folder.

        Call before :meth:`execute` with the same ``run_dir``; the folder is prepared
        (superseded lines and trial folders moved aside) before this returns.

        Raises:
            ConfigError: The folder was not written by a run of the same plan, or a spec
                or option changed since.
            OutputError: The run folder cannot be written.
        """
        from vally.engine.planning.resume import apply_resume, plan_resume
        from vally.engine.records.run_folder import RESULTS_FILE, safe_name

        request = self.request
        experiment = request.experiment
        variants = [safe_name(v) for v in experiment.variants] if experiment else [""]
        plan = plan_resume(
            run_dir,
            self.trials,
            command=request.command,
            skip_grade=request.skip_grade,
            retry_errors=retry_errors,
            results=[run_dir / v / RESULTS_FILE if v else run_dir / RESULTS_FILE for v in variants],
        )
        apply_resume(plan)
        self.trials, self.reused, self.resumed_id = plan.to_run, plan.reused, plan.run_id
        return plan

    def write_plan(self, run_dir: Path, run_id: str) -> None:
        """Write ``run-plan.json`` (what ``--resume`` compares against) into ``run_dir``."""
        from vally.engine.planning.resume import stream_plan

        request = self.request
        stream_plan(
            run_dir,
            self.trials,
            run_id=run_id,
            command=request.command,
            skip_grade=request.skip_grade,
        )

    @property
    def workers(self) -> int:
        """Concurrent trials: the request's, else the project's default, else 5."""
        default = self.request.project.defaults.workers
        return self.request.workers or default or DEFAULT_WORKERS

    def empty_result(self) -> RunResult:
        """The result of a plan that runs nothing (validated, no records, no summaries)."""
        run = self.run_info(None, self.request.run_id or new_run_id())
        return RunResult(run, [], [], cancelled=False)

    def run_info(self, run_dir: Path | None, run_id: str) -> RunInfo:
        """The run's identity as reporters see it."""
        request = self.request
        experiment = request.experiment
        return RunInfo(
            run_id=run_id,
            command=request.command,
            run_dir=run_dir,
            planned_trials=len(self.trials),
            started_at=utc_now(),
            options={**request.options, "workers": self.workers},
            experiment=experiment.name if experiment else None,
            shard=experiment.shard if experiment else None,
            evals=tuple(dict.fromkeys(e.name for e in self.plan.evals)),
            stimuli={e.name: e.stimuli for e in self.plan.evals},
            baseline=experiment.baseline if experiment else None,
            variants=tuple(experiment.variants) if experiment else (),
            snapshot=experiment.snapshot if experiment else None,
        )

    def summaries(self, run: RunInfo, scrubber: Any) -> RunSummaries:
        """How the run is summarised: per planned eval, or per variant for experiments."""
        plugins = self.request.session.provenance()
        experiment = self.request.experiment
        if experiment is None:
            from vally.engine.planning.identity import plan_identities

            return PlanSummaries(
                self.plan.evals,
                run_id=run.run_id,
                run_dir=run.run_dir,
                scrubber=scrubber,
                plugins=plugins,
                identities=plan_identities(
                    self.plan,
                    session=self.request.session,
                    judge_model=self.request.plan_options.judge_model,
                ),
            )
        return VariantSummaries(
            experiment.snapshot,
            run_id=run.run_id,
            run_dir=run.run_dir,
            scrubber=scrubber,
            plugins=plugins,
            shard=experiment.shard,
        )

    def results_files(self, run_dir: Path | None) -> list[Path] | None:
        """Where the run's results writer puts its records (``results.jsonl``, per variant
        folder for experiments), so the engine can read them back instead of holding them;
        None when the run writes no results file there (no run folder, no results writer,
        or one configured to write elsewhere)."""
        from vally.engine.records.run_folder import RESULTS_FILE, safe_name
        from vally.plugins.defaults import RESULTS_REPORTER

        if run_dir is None or RESULTS_REPORTER not in dict(self.reporters):
            return None
        chosen = [c for c in self.request.reporters if c.name == RESULTS_REPORTER]
        if chosen and chosen[0].config.get("path"):
            return None
        experiment = self.request.experiment
        if experiment is None:
            return [run_dir / RESULTS_FILE]
        return [run_dir / safe_name(v) / RESULTS_FILE for v in experiment.variants]

    def start_engine(self, run_dir: Path | None, *, run_id: str | None = None) -> RunEngine:
        """Register the reporters and build the engine for one execution."""
        request = self.request
        session = request.session
        for name, reporter in self.reporters:
            session.register_observer(reporter, name)
        run = self.run_info(run_dir, run_id or self.resumed_id or request.run_id or new_run_id())
        if run_dir is not None and self.resumed_id is None:
            self.write_plan(run_dir, run.run_id)
        scrubber = components.scrubber_for(self.plan.distinct_trials, self.backend)
        context = RunContext(
            run=run,
            backend=self.backend,
            executors=self.executors,
            create_grader=self.create_grader,
            emitter=session.emitter,
            scrubber=scrubber,
            run_dir=run_dir,
            skip_grade=request.skip_grade,
            llm=self.llm,
            experiment_blocks=request.experiment.blocks if request.experiment else {},
            prices=PriceTable(request.project.prices),
            judge_llm=self.judge_llm(),
        )
        gate = request.gate
        if request.budget is not None:
            gate = self.budget_gate = BudgetGate(
                request.budget, self.trials, inner=gate, spent=self.reused
            )
        self.engine = RunEngine(
            context,
            self.summaries(run, scrubber),
            workers=self.workers,
            max_retries=request.max_retries,
            gate=gate,
            reused=self.reused,
            trial_runner=self.runner,
            remote=self.remote_run(run, scrubber) if self.runner is not None else None,
            spec_files=self.spec_files(run) if self.runner is not None else None,
            results=self.results_files(run_dir),
        )
        return self.engine

    def spec_files(self, run: RunInfo) -> SpecFiles:
        """The spec's files a distributed runner ships to its nodes (never the run's own
        output folder, nor the output folder holding it unless the specs live there)."""
        trials = self.plan.distinct_trials
        plugins = [Path(s) for _, s, _ in self.replayed_plugins() if Path(s).is_absolute()]
        plugins = [p for p in plugins if p.exists()]
        if run.run_dir is None:
            return SpecFiles(trials, extra=plugins)
        exclude = [run.run_dir.absolute()]
        outputs = exclude[0].parent
        roots, _whole = spec_roots(trials, plugins)
        if not any(r == outputs or outputs in r.parents for r in roots):
            exclude.append(outputs)
        return SpecFiles(trials, exclude, plugins)

    def replayed_plugins(self) -> tuple[tuple[str, str, Path], ...]:
        """The flag-loaded plugins a distributed run's workers load too."""
        return tuple(
            (kind, spec, base)
            for kind, spec, base in self.request.session.requested
            if kind in REPLAYED_KINDS
        )

    def judge_llm(self) -> CachedJudge | None:
        """The LLM provider behind the judge cache, for graders (None without a provider);
        with ``no_cache`` it only meters the judges' calls."""
        if self.llm is None:
            return None
        if self.judge is None:
            from vally.engine.trials.judge_cache import CachedJudge, JudgeCache, cache_root

            request = self.request
            cache = None
            if not request.no_cache:
                cache = JudgeCache(cache_root(request.project, request.project_root))
            self.judge = CachedJudge(self.llm, cache, request.project.llm.provider)
        return self.judge

    def remote_run(self, run: RunInfo, scrubber: Any) -> RemoteRun:
        """The run as a distributed runner's workers rebuild it."""
        request = self.request
        choice = request.backend
        return RemoteRun(
            run=run,
            project=request.project,
            project_root=request.project_root,
            backend=choice.specifier,
            backend_args=dict(choice.args),
            backend_base=choice.base_dir or request.plugin_base,
            skip_grade=request.skip_grade,
            scrubber=scrubber,
            experiment_blocks=request.experiment.blocks if request.experiment else {},
            plugins=self.replayed_plugins(),
            no_cache=request.no_cache,
        )

    async def execute_async(
        self, run_dir: Path | None = None, *, run_id: str | None = None
    ) -> RunResult:
        """Run the selected trials (see :meth:`execute`) on the running event loop."""
        engine = self.start_engine(run_dir, run_id=run_id)
        try:
            result = await engine.run(self.trials)
            if self.budget_gate is not None:
                result.budget_stops = self.budget_gate.stops()
            return result
        finally:
            if self.llm is not None:
                with contextlib.suppress(Exception):  # teardown is best effort
                    await self.llm.aclose()

    def execute(
        self,
        run_dir: Path | None = None,
        *,
        run_id: str | None = None,
        on_interrupt: Callable[[], None] | None = None,
    ) -> RunResult:
        """Run the selected trials and return every record and summary.

        Ctrl-C and SIGTERM stop the run: nothing new starts, running trials are cancelled
        and recorded as such, and the result says ``cancelled``.

        Args:
            run_dir: The run folder (created); None writes no file at all.
            run_id: Overrides the request's run id.
            on_interrupt: Called when an interrupt arrives, before the run stops.

        Returns:
            The result; ``result.error`` is set when a required output could not be written
            (the run stopped early, the records finished before stay).
        """

        def interrupt() -> None:
            if on_interrupt is not None and not (self.engine and self.engine.cancelled):
                on_interrupt()
            if self.engine is not None:
                self.engine.stop()

        async def main() -> RunResult:
            with stop_on_signals(interrupt):
                return await self.execute_async(run_dir, run_id=run_id)

        return run_coroutine(main)
