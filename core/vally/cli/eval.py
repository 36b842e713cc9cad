"""``vally eval``: run stimuli through an agent, grade them, write the results.

Stimuli come from ``-e/--eval-spec`` files, a ``--suite`` of ``.vally.yaml``, or ``--tag``
filters over every discovered eval. Exit codes: 0 when the run completed (whatever the
verdicts), 1 on an operational error (bad spec, unknown plugin, setup, executor, grader or
output failure) or, with ``--require-pass``, a failing verdict; 130 when interrupted.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from vally.cli.common import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    check_folder_flag,
    debug_enabled,
    fail,
    parse_key_values,
)
from vally.engine import components
from vally.errors import ConfigError, VallyError

if TYPE_CHECKING:
    from vally.contracts.protocols import LoadedEval
    from vally.engine.planner import Plan
    from vally.models.project import ProjectConfig
    from vally.plugins.session import Session

DEFAULT_OUTPUT_DIR = "vally-results"


@dataclass
class EvalOptions:
    """Every option of ``vally eval`` (the CLI flags, parsed minimally).

    Attributes mirror the flags; see ``vally eval --help``.
    """

    eval_specs: list[str] = field(default_factory=list)
    suite: str | None = None
    tags: list[str] = field(default_factory=list)
    skill_dirs: list[str] = field(default_factory=list)
    work_dir: str | None = None
    model: str | None = None
    timeout: str | None = None
    threshold: float | None = None
    judge_model: str | None = None
    grader_plugins: list[str] = field(default_factory=list)
    executor_plugins: list[str] = field(default_factory=list)
    eval_plugin: str | None = None
    output_dir: str | None = None
    output: str | None = None
    skip_grade: bool = False
    workers: int | None = None
    runs: int | None = None
    require_pass: bool = False
    junit: bool = False
    workspace: str | None = None
    params: list[str] = field(default_factory=list)
    backend: str | None = None
    backend_args: list[str] = field(default_factory=list)
    reporter_plugins: list[str] = field(default_factory=list)
    max_retries: int = 0
    otlp_endpoint: str | None = None
    verbose: bool = False
    console: bool = True
    """Print the console report (tests and benchmarks switch it off)."""


def _echo(message: str) -> None:
    typer.echo(message, err=True)


# --------------------------------------------------------------------------- validation


def _check_flags(opts: EvalOptions) -> None:
    if opts.eval_plugin and not opts.eval_specs:
        raise ConfigError(
            "--eval-plugin needs --eval-spec: the provider reads the files you name",
            hint="add -e <file> for each file the eval provider should load",
        )
    if opts.eval_plugin and opts.suite:
        raise ConfigError("--eval-plugin cannot be combined with --suite")
    if opts.suite and opts.eval_specs:
        raise ConfigError(
            "--suite and --eval-spec select evals in two different ways; use one of them"
        )
    if opts.backend_args and not opts.backend:
        raise ConfigError(
            "--backend-args needs --backend (the arguments belong to one backend)",
            hint="add e.g. --backend local",
        )
    if opts.output is not None and opts.output != "jsonl":
        raise ConfigError(
            f"--output {opts.output!r} is not supported; the only format is 'jsonl'",
            hint="use --output jsonl to stream trial records to standard output",
        )
    if opts.workers is not None and opts.workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {opts.workers}")
    if opts.max_retries < 0:
        raise ConfigError(f"--max-retries must be 0 or more, got {opts.max_retries}")
    if opts.runs is not None and opts.runs < 0:
        raise ConfigError(f"--runs must be 0 or more, got {opts.runs}")
    if opts.threshold is not None and not 0.0 <= opts.threshold <= 1.0:
        raise ConfigError(f"--threshold must be between 0 and 1, got {opts.threshold}")


def _absolute(base: Path, value: str) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else base / path


def _looks_like_path(specifier: str) -> bool:
    return (
        specifier.startswith((".", "/", "~"))
        or specifier.endswith(".py")
        or os.sep in specifier
        or "/" in specifier
    ) and ":" not in specifier.split("/")[-1]


def _plugin_paths(specifiers: Sequence[str], base: Path, cwd: Path) -> list[str]:
    """Resolve path specifiers relative to ``base`` (the eval spec's folder), falling back
    to the working directory when the path exists only there."""
    out: list[str] = []
    for spec in specifiers:
        if _looks_like_path(spec) and not Path(spec).expanduser().is_absolute():
            first, second = base / spec, cwd / spec
            out.append(str(first if first.exists() or not second.exists() else second))
        else:
            out.append(spec)
    return out


def _skill_folders(skill_dirs: Sequence[str], cwd: Path) -> list[str]:
    from vally.specs.skills import find_skills

    found: list[str] = []
    for item in skill_dirs:
        folder = _absolute(cwd, item)
        if not folder.exists():
            raise ConfigError(f"--skill-dir {item}: no such directory ({folder})")
        if not folder.is_dir():
            raise ConfigError(f"--skill-dir {item}: {folder} is not a directory")
        for skill in find_skills(folder):
            path = str(skill.absolute())
            if path not in found:
                found.append(path)
    return found


# --------------------------------------------------------------------------- loading


@dataclass
class _Setup:
    """Everything prepared before any trial runs."""

    cwd: Path
    project: ProjectConfig
    project_root: Path | None
    session: Session
    plan: Plan
    executors: dict[str, Any]
    create_grader: Any
    backend: Any
    params: dict[str, str]


def _eval_files(
    opts: EvalOptions, cwd: Path, project: ProjectConfig, root: Path
) -> tuple[list[Path], dict[str, list[str]] | None]:
    from vally.specs import loading as specs

    if opts.eval_specs:
        files: list[Path] = []
        for item in opts.eval_specs:
            path = _absolute(cwd, item)
            if not path.exists():
                raise ConfigError(f"eval spec {item} does not exist ({path})")
            if path.is_dir():
                found = [
                    p
                    for name in project.paths.evalFilenames
                    for p in sorted(path.rglob(name))
                    if p.is_file()
                ]
                if not found:
                    raise ConfigError(
                        f"no eval files in folder {item} (looked for "
                        f"{', '.join(project.paths.evalFilenames)})"
                    )
                files.extend(p for p in found if p not in files)
            elif path not in files:
                files.append(path)
        return files, None
    if opts.suite:
        return specs.select_suite(project, root, opts.suite)
    files = specs.discover_eval_files(project, root)
    if not files:
        raise ConfigError(
            f"no eval files found under {', '.join(project.paths.evals)} (relative to {root})",
            hint="pass -e <eval.yaml>, a --suite, or set paths.evals in .vally.yaml",
        )
    return files, None


def _validate_unplanned(plan: Plan, session: Session, *, skip_grade: bool) -> None:
    """With nothing to run (``runs: 0``), still check that every executor and grader the
    specs name exists and accepts its config (the lint-only contract)."""
    for planned in plan.evals:
        spec = planned.loaded.spec
        source = planned.loaded.source
        ref = spec.defaults.executor
        if ref is not None:
            where = f"{source}: defaults.executor"
            with components.located(where):
                session.create("executor", ref.name, ref.config, where=where)
        if skip_grade:
            continue
        for stimulus in spec.stimuli:
            for config in [*spec.graders, *stimulus.graders]:
                where = f"{source}: stimulus {stimulus.name!r}"
                with components.located(where):
                    session.create("grader", config.type, config.config, where=where)


def _prepare(opts: EvalOptions) -> _Setup:
    from vally.engine.planner import PlanInput, PlanOptions, build_plan, parse_models
    from vally.models.durations import parse_duration
    from vally.plugins.session import Session
    from vally.specs import loading as specs

    _check_flags(opts)
    cwd = Path(opts.work_dir).expanduser().absolute() if opts.work_dir else Path.cwd()
    if not cwd.is_dir():
        raise ConfigError(f"--work-dir {opts.work_dir}: not a directory ({cwd})")
    params = {k: str(v) for k, v in parse_key_values(opts.params, flag="--param").items()}
    start = cwd
    if opts.eval_specs:
        first = _absolute(cwd, opts.eval_specs[0])
        project, root = specs.find_project(cwd, params=params)
        if root is None:
            project, root = specs.find_project(first, params=params)
    else:
        project, root = specs.find_project(start, params=params)
    session = Session(project, root or cwd)

    files, suite_filter = _eval_files(opts, cwd, project, root or cwd)
    spec_base = files[0].parent if opts.eval_specs and files else cwd
    if opts.grader_plugins:
        session.load_plugins(
            "grader", _plugin_paths(opts.grader_plugins, spec_base, cwd), base_dir=spec_base
        )
    if opts.executor_plugins:
        session.load_plugins(
            "executor", _plugin_paths(opts.executor_plugins, spec_base, cwd), base_dir=spec_base
        )
    loaded = components.load_evals(
        session, project, files, params, provider_spec=opts.eval_plugin, base=cwd
    )

    tag_filter = specs.parse_tag_flags(opts.tags) if opts.tags else None
    timeout = parse_duration(opts.timeout, field="--timeout") if opts.timeout else None
    if timeout is not None and timeout <= 0:
        raise ConfigError(
            f"--timeout must be longer than zero, got {opts.timeout!r}",
            hint="write e.g. --timeout 5m, or leave it out for the spec's timeout",
        )
    options = PlanOptions(
        models=parse_models(opts.model),
        runs=opts.runs,
        timeout=timeout,
        threshold=opts.threshold,
        judge_model=opts.judge_model,
        tag_filter=tag_filter,
        extra_skills=_skill_folders(opts.skill_dirs, cwd),
        workspace_root=_absolute(cwd, opts.workspace) if opts.workspace else None,
    )
    if opts.workspace:
        check_folder_flag("--workspace", opts.workspace, _absolute(cwd, opts.workspace))

    def stimulus_filter(item: LoadedEval, stimulus: Any) -> bool:
        if suite_filter is None:
            return True
        return specs.matches_tag_filter(specs.stimulus_tags(item.spec, stimulus), suite_filter)

    def resolve(item: LoadedEval, stimulus: Any) -> Any:
        return specs.resolve_environment(item, stimulus, project, root)

    try:
        plan = build_plan(
            [PlanInput(item) for item in loaded],
            options,
            resolve_environment=resolve,
            stimulus_filter=stimulus_filter,
        )
    except ConfigError as exc:
        if "does not say which executor" not in exc.message:
            raise
        names = ", ".join(sorted(session.known_names("executor"))) or "(none)"
        raise ConfigError(
            exc.message, location=exc.location, hint=f"{exc.hint}; installed executors: {names}"
        ) from None

    # --- executors and graders: resolved, checked and built before anything runs
    executors = components.build_executors(session, plan.trials)
    create_grader = components.build_grader_factory(
        session, plan.trials, validate=not opts.skip_grade
    )
    if plan.lint_only:
        _validate_unplanned(plan, session, skip_grade=opts.skip_grade)

    # --- backend
    backend = None
    if plan.trials:
        backend = components.build_backend(
            session,
            project,
            flag_spec=opts.backend,
            flag_args=parse_key_values(
                opts.backend_args, flag="--backend-args", collect_repeats=True
            ),
            flag_base=cwd,
            project_root=root,
        )
    return _Setup(cwd, project, root, session, plan, executors, create_grader, backend, params)


# --------------------------------------------------------------------------- running


def _output_dir(opts: EvalOptions, setup: _Setup) -> Path:
    if opts.output_dir:
        return _absolute(setup.cwd, opts.output_dir)
    if setup.project.paths.results:
        return _absolute(setup.project_root or setup.cwd, setup.project.paths.results)
    return setup.cwd / DEFAULT_OUTPUT_DIR


def _register_reporters(opts: EvalOptions, setup: _Setup) -> None:
    session = setup.session
    to_stdout = opts.output == "jsonl"
    session.register_observer(
        session.create("reporter", "jsonl", {"stdout": to_stdout}, where="--output"), "jsonl"
    )
    if opts.console:
        console = session.create(
            "reporter",
            "console",
            {"verbose": opts.verbose, "stream": "stderr" if to_stdout else "stdout"},
        )
        session.register_observer(console, "console")
    session.register_observer(session.create("reporter", "markdown", {}), "markdown")
    if opts.junit:
        session.register_observer(session.create("reporter", "junit", {}), "junit")
    components.register_user_reporters(session, opts.reporter_plugins, base_dir=setup.cwd)


def run_eval(opts: EvalOptions) -> int:
    """Run ``vally eval`` with ``opts`` and return the exit code.

    Raises:
        VallyError: A configuration, plugin or output error (the CLI prints it, exit 1).
    """
    import asyncio

    from vally.contracts.events import RunInfo
    from vally.engine.otel import Tracing
    from vally.engine.rundir import create_run_dir
    from vally.engine.runner import RunContext, RunEngine, new_run_id
    from vally.engine.scheduler import DEFAULT_WORKERS, stop_on_signals
    from vally.models.trajectory import utc_now

    setup = _prepare(opts)
    plan = setup.plan
    if plan.lint_only:
        for planned in plan.evals:
            reason = (
                "runs: 0 (lint only)" if planned.runs == 0 else "no stimulus matched the filters"
            )
            _echo(f"{planned.name}: nothing to run, {reason}.")
        _echo("Specs are valid; nothing was executed.")
        return EXIT_OK
    run_dir = create_run_dir(_output_dir(opts, setup))
    _register_reporters(opts, setup)
    workers = opts.workers or setup.project.defaults.workers or DEFAULT_WORKERS
    run_id = new_run_id()
    tracing = Tracing.start(
        run_dir,
        opts.otlp_endpoint,
        "vally.eval",
        {
            "vally.run_id": run_id,
            "vally.evals": ",".join(e.name for e in plan.evals),
            "vally.planned_trials": len(plan.trials),
        },
    )
    setup.session.register_observer(tracing.observer(), "otel")
    run = RunInfo(
        run_id=run_id,
        command="eval",
        run_dir=run_dir,
        planned_trials=len(plan.trials),
        started_at=utc_now(),
        options={
            "verbose": opts.verbose,
            "require_pass": opts.require_pass,
            "skip_grade": opts.skip_grade,
            "output": opts.output,
            "workers": workers,
            "models": [m for m in (opts.model or "").split(",") if m],
            "otlp_endpoint": opts.otlp_endpoint,
            "junit": opts.junit,
            "max_retries": opts.max_retries,
        },
    )
    scrubber = components.scrubber_for(plan.trials)
    context = RunContext(
        run=run,
        backend=setup.backend,
        executors=setup.executors,
        create_grader=setup.create_grader,
        emitter=setup.session.emitter,
        scrubber=scrubber,
        run_dir=run_dir,
        skip_grade=opts.skip_grade,
        llm=components.llm_provider_for(setup.session, setup.project, setup.plan.trials),
    )
    engine = RunEngine(
        context,
        plan.evals,
        workers=workers,
        plugins=setup.session.provenance(),
        max_retries=opts.max_retries,
    )

    def interrupt() -> None:
        if not engine.cancelled:
            _echo("Interrupted: stopping the running trials and writing what finished...")
        engine.stop()

    async def main() -> Any:
        with stop_on_signals(interrupt):
            try:
                return await engine.run(plan.trials)
            finally:
                if context.llm is not None:
                    with contextlib.suppress(Exception):  # teardown is best effort
                        await context.llm.aclose()

    try:
        result = asyncio.run(main())
    except BaseException as exc:
        tracing.finish(error=f"{type(exc).__name__}: {exc}")
        raise
    for problem in tracing.finish(error="run interrupted" if result.cancelled else None):
        _echo(f"warning: {problem}")
    for failure in result.failures:
        _echo(f"error: {failure}")
    if result.cancelled:
        _echo(f"Interrupted: {len(result.records)} finished trial(s) written to {run_dir}")
        return EXIT_INTERRUPTED
    errored = [r for r in result.records if r.status == "error"]
    if errored:
        _echo(f"{len(errored)} trial(s) failed to run (status: error); see {run_dir}")
        return EXIT_FAILURE
    if result.failures:
        return EXIT_FAILURE
    if opts.require_pass and result.verdict_failed:
        failed = ", ".join(s.eval_name for s in result.summaries if s.verdict == "fail")
        _echo(f"--require-pass: the verdict of {failed} failed")
        return EXIT_FAILURE
    return EXIT_OK


# --------------------------------------------------------------------------- typer


def eval_command(
    eval_spec: Annotated[
        list[str] | None,
        typer.Option(
            "--eval-spec",
            "-e",
            metavar="PATH",
            help="Eval spec file (repeatable).",
            show_default=False,
        ),
    ] = None,
    suite: Annotated[
        str | None, typer.Option(metavar="NAME", help="Run a named suite of .vally.yaml.")
    ] = None,
    tag: Annotated[
        list[str] | None,
        typer.Option(
            metavar="KEY=VALUE[,VALUE]",
            help="Filter stimuli by tag: KEY=VALUE[,VALUE] (repeatable).",
        ),
    ] = None,
    skill_dir: Annotated[
        list[str] | None,
        typer.Option(metavar="DIR", help="Load every skill in this folder for the run."),
    ] = None,
    work_dir: Annotated[
        str | None,
        typer.Option(metavar="DIR", help="Run as if started in this folder (default: cwd)."),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            metavar="MODEL[,MODEL]", help="Model to run; a comma list runs once per model."
        ),
    ] = None,
    timeout: Annotated[
        str | None,
        typer.Option(
            metavar="DURATION", help="Per-trial timeout, e.g. 5m (default: spec, then 2m)."
        ),
    ] = None,
    threshold: Annotated[
        float | None,
        typer.Option(metavar="0..1", help="Pass threshold 0..1, overriding the spec's."),
    ] = None,
    judge_model: Annotated[
        str | None, typer.Option(metavar="MODEL", help="Model for LLM judge graders.")
    ] = None,
    grader_plugin: Annotated[
        list[str] | None, typer.Option(metavar="SPEC", help="Grader plugin to load (repeatable).")
    ] = None,
    executor_plugin: Annotated[
        list[str] | None, typer.Option(metavar="SPEC", help="Executor plugin to load (repeatable).")
    ] = None,
    eval_plugin: Annotated[
        str | None,
        typer.Option(metavar="SPEC", help="Eval provider reading the --eval-spec files."),
    ] = None,
    output_dir: Annotated[
        str | None,
        typer.Option(
            metavar="DIR",
            help="Parent folder of run folders (default: paths.results or ./vally-results).",
        ),
    ] = None,
    output: Annotated[
        str | None, typer.Option(metavar="jsonl", help="'jsonl': stream trial records to stdout.")
    ] = None,
    skip_grade: Annotated[
        bool, typer.Option("--skip-grade", help="Execute without grading.")
    ] = False,
    workers: Annotated[
        int | None, typer.Option(metavar="N", help="Parallel trials (default 5).")
    ] = None,
    runs: Annotated[
        int | None, typer.Option(metavar="N", help="Trials per stimulus, overriding the spec.")
    ] = None,
    require_pass: Annotated[
        bool, typer.Option("--require-pass", help="Exit 1 when a verdict fails.")
    ] = False,
    junit: Annotated[bool, typer.Option("--junit", help="Also write junit.xml.")] = False,
    workspace: Annotated[
        str | None, typer.Option(metavar="DIR", help="Keep trial workspaces under this folder.")
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option(metavar="KEY=VALUE", help="Param value KEY=VALUE (repeatable)."),
    ] = None,
    backend: Annotated[
        str | None,
        typer.Option(
            metavar="NAME|SPEC", help="Backend: local, docker, or a plugin (default: local)."
        ),
    ] = None,
    backend_args: Annotated[
        list[str] | None,
        typer.Option(metavar="KEY=VALUE", help="Backend argument KEY=VALUE (repeatable)."),
    ] = None,
    reporter_plugin: Annotated[
        list[str] | None, typer.Option(metavar="SPEC", help="Reporter plugin to load (repeatable).")
    ] = None,
    max_retries: Annotated[
        int,
        typer.Option(
            metavar="N", help="Retry a trial up to N times when its setup or agent fails."
        ),
    ] = 0,
    keep_executor_session_logs: Annotated[
        bool,
        typer.Option(
            "--keep-executor-session-logs",
            hidden=True,
            help="Accepted for compatibility: session logs are always kept.",
        ),
    ] = False,
    otlp_endpoint: Annotated[
        str | None, typer.Option(metavar="URL", help="Export traces to this OTLP/HTTP endpoint.")
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", help="Show agent output and full evidence.")
    ] = False,
) -> None:
    """Run stimuli through an agent, grade them and write the results."""
    opts = EvalOptions(
        eval_specs=list(eval_spec or []),
        suite=suite,
        tags=list(tag or []),
        skill_dirs=list(skill_dir or []),
        work_dir=work_dir,
        model=model,
        timeout=timeout,
        threshold=threshold,
        judge_model=judge_model,
        grader_plugins=list(grader_plugin or []),
        executor_plugins=list(executor_plugin or []),
        eval_plugin=eval_plugin,
        output_dir=output_dir,
        output=output,
        skip_grade=skip_grade,
        workers=workers,
        runs=runs,
        require_pass=require_pass,
        junit=junit,
        workspace=workspace,
        params=list(param or []),
        backend=backend,
        backend_args=list(backend_args or []),
        reporter_plugins=list(reporter_plugin or []),
        max_retries=max_retries,
        otlp_endpoint=otlp_endpoint,
        verbose=verbose,
    )
    try:
        code = run_eval(opts)
    except VallyError as exc:
        if debug_enabled():
            raise
        fail(exc)
    except KeyboardInterrupt:  # interrupted before the run started
        _echo("Interrupted.")
        code = EXIT_INTERRUPTED
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    """Add ``eval`` to the ``vally`` application."""
    app.command("eval", help="Run stimuli through an agent, grade them, write the results.")(
        eval_command
    )
