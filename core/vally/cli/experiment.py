"""``vally experiment run`` and ``vally experiment merge``.

``run`` resolves an experiment file (evals x variants, drift check, hashes), plans every
(variant x eval x stimulus x model x trial) and runs the whole plan through one shared
worker pool. Output (unsharded)::

    <output-dir>/<timestamp>/
      report.md  otel-spans.jsonl  otel-context.json
      <variant>/results.jsonl  <variant>/run-summary.jsonl
      <variant>/<eval>/<stimulus>/<model>/trial-<n>/   (session logs)

With ``--shard i/n --run-id ID`` the output goes to ``<output-dir>/<ID>/shard-<i>-of-<n>/``
with ``plan-snapshot.json`` and ``shard-manifest.json`` instead of ``report.md``; ``merge``
validates the shard folders and writes the merged results, summaries and report.

Exit codes: 0 when the run completed (whatever the verdicts); 1 on a planning, execution,
grading, configuration, cleanup or required-output error, with ``--require-pass`` when a
verdict failed, and with ``--compare`` when a variant could not be fully compared;
130 when interrupted.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any

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
from vally.contracts.hookspecs import hookimpl
from vally.engine import components
from vally.errors import ConfigError, OutputError, VallyError

if TYPE_CHECKING:
    from vally.contracts.events import RunInfo
    from vally.contracts.protocols import LoadedEval, TrialKey
    from vally.engine.experiment import ResolvedExperiment
    from vally.engine.planner import Plan, PlannedTrial
    from vally.engine.shards import ShardSpec
    from vally.models.experiment import ExperimentFile
    from vally.models.project import ProjectConfig
    from vally.models.records import ExperimentBlock, TrialResultRecord
    from vally.plugins.session import Session

DEFAULT_OUTPUT_DIR = "vally-experiment-results"
DEFAULT_STRATEGY = "round-robin"
REPORT_FILE = "report.md"

experiment_app = typer.Typer(
    name="experiment",
    help="Run an eval set across variants (A/B experiments) and merge sharded runs.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


def _echo(message: str = "", *, err: bool = False) -> None:
    typer.echo(message, err=err)


@dataclass
class ExperimentOptions:
    """Every option of ``vally experiment run`` (see ``--help``)."""

    experiment_file: str
    variant: str | None = None
    eval_filters: list[str] = field(default_factory=list)
    output_dir: str | None = None
    workers: int | None = None
    backend: str | None = None
    backend_args: list[str] = field(default_factory=list)
    params: list[str] = field(default_factory=list)
    grader_plugins: list[str] = field(default_factory=list)
    executor_plugins: list[str] = field(default_factory=list)
    reporter_plugins: list[str] = field(default_factory=list)
    eval_plugin: str | None = None
    workspace: str | None = None
    dry_run: bool = False
    require_pass: bool = False
    run_id: str | None = None
    shard: str | None = None
    shard_strategy: str | None = None
    otlp_endpoint: str | None = None
    verbose: bool = False
    compare: bool = False
    judge_model: str | None = None
    judge_timeout: str | None = None
    judge_reasoning_effort: str | None = None


# --------------------------------------------------------------------------- validation


def _check_flags(opts: ExperimentOptions) -> None:
    if opts.backend_args and not opts.backend:
        raise ConfigError(
            "--backend-args needs --backend (the arguments belong to one backend)",
            hint="add e.g. --backend local",
        )
    if opts.shard is not None and not opts.run_id:
        raise ConfigError(
            "--shard needs --run-id: every shard of a run must share one stable run id",
            hint='generate one id (e.g. a UUID) and pass --run-id "$RUN_ID" to every shard',
        )
    for flag, value in (
        ("--judge-model", opts.judge_model),
        ("--judge-timeout", opts.judge_timeout),
        ("--judge-reasoning-effort", opts.judge_reasoning_effort),
    ):
        if value is not None and not opts.compare:
            raise ConfigError(
                f"{flag} needs --compare: it only configures the post-run comparison judge",
                hint="add --compare, or drop the flag (trial grading uses the evals' settings)",
            )
    if opts.judge_reasoning_effort is not None and not opts.judge_reasoning_effort.strip():
        raise ConfigError("--judge-reasoning-effort must not be empty")
    if opts.judge_timeout is not None:
        from vally.models.durations import parse_duration

        # Checked before any trial runs, not only when the comparison starts.
        if parse_duration(opts.judge_timeout, field="--judge-timeout") <= 0:
            raise ConfigError(
                f"--judge-timeout must be longer than zero, got {opts.judge_timeout!r}",
                hint="write e.g. --judge-timeout 2m",
            )
    if opts.otlp_endpoint is not None:
        from vally.engine.otel import check_endpoint

        check_endpoint(opts.otlp_endpoint)
    if opts.workers is not None and opts.workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {opts.workers}")
    if opts.run_id is not None:
        from vally.engine.rundir import safe_name

        if not opts.run_id.strip() or safe_name(opts.run_id) != opts.run_id:
            raise ConfigError(
                f"--run-id {opts.run_id!r} cannot be used as a folder name",
                hint="use letters, digits, '-', '_' and '.' (a UUID is recommended)",
            )


def _absolute(base: Path, value: str) -> Path:
    path = Path(value).expanduser()
    return Path(os.path.normpath(path if path.is_absolute() else base / path))


# --------------------------------------------------------------------------- eval files


def expand_evals(
    patterns: Sequence[str], base: Path, project: ProjectConfig, *, exclude: Path | None = None
) -> list[Path]:
    """The eval files an experiment declares: each entry is a file, a folder (its eval files)
    or a glob, relative to ``base`` (the experiment file's folder). A pattern that matches
    nothing is skipped; when every pattern matches nothing it is an error.

    Raises:
        ConfigError: No pattern matched any eval file.
    """
    files: list[Path] = []

    def add(path: Path) -> None:
        path = Path(os.path.normpath(path))
        if exclude is not None and path == exclude:
            return
        if path.is_file() and path not in files:
            files.append(path)
        elif path.is_dir():
            for name in project.paths.evalFilenames:
                for found in sorted(path.rglob(name)):
                    add(found)

    for pattern in patterns:
        target = _absolute(base, pattern)
        if any(ch in pattern for ch in "*?["):
            anchor = Path(pattern).expanduser()
            if anchor.is_absolute():
                root = Path(anchor.anchor)
                rel = str(anchor.relative_to(root))
            else:
                root, rel = base, pattern
            for match in sorted(root.glob(rel)):
                add(match)
        elif target.exists():
            add(target)
    if not files:
        raise ConfigError(
            f"the experiment's evals ({', '.join(patterns)}) match no eval file "
            f"(relative to {base})",
            hint="paths and globs in 'evals:' are relative to the experiment file's folder",
        )
    return files


def _matches(pattern: str, path: Path, bases: Sequence[Path]) -> bool:
    candidates = {path.as_posix()}
    for base in bases:
        with contextlib.suppress(ValueError):
            candidates.add(Path(os.path.relpath(path, base)).as_posix())
    patterns = {pattern, pattern.replace("**/", "")}
    if pattern.startswith("./"):
        patterns |= {p[2:] for p in patterns}
    absolute = [str(_absolute(b, pattern)) for b in bases]
    for candidate in candidates:
        for p in patterns | set(absolute):
            if fnmatch.fnmatchcase(candidate, p):
                return True
    return False


def apply_eval_filters(
    files: Sequence[Path], filters: Sequence[str], bases: Sequence[Path]
) -> list[Path]:
    """Intersect the declared eval files with ``--eval-filter`` patterns (case-sensitive
    globs, tried relative to each of ``bases`` and as absolute paths).

    Raises:
        ConfigError: A pattern matches no declared eval (the run fails fast).
    """
    if not filters:
        return list(files)
    kept: set[Path] = set()
    for pattern in filters:
        hits = [f for f in files if _matches(pattern, f, bases)]
        if not hits:
            declared = ", ".join(_display(f, bases[0]) for f in files)
            raise ConfigError(
                f"--eval-filter {pattern!r} matches none of the experiment's evals",
                hint=f"declared evals: {declared} (matching is case-sensitive)",
            )
        kept.update(hits)
    return [f for f in files if f in kept]


def _display(path: Path, base: Path) -> str:
    try:
        return Path(os.path.relpath(path, base)).as_posix()
    except ValueError:
        return str(path)


def _plugin_paths(specifiers: Sequence[str], base: Path) -> list[str]:
    """Path specifiers made absolute against ``base`` (the experiment file's folder)."""
    out: list[str] = []
    for spec in specifiers:
        looks_like_path = (
            spec.startswith((".", "/", "~")) or spec.endswith(".py") or "/" in spec
        ) and ":" not in spec.split("/")[-1]
        if looks_like_path:
            out.append(str(_absolute(base, spec)))
        else:
            out.append(spec)
    return out


# --------------------------------------------------------------------------- preparation


@dataclass
class _Setup:
    """Everything prepared before any trial runs."""

    cwd: Path
    experiment_path: Path
    experiment: ExperimentFile
    project: ProjectConfig
    project_root: Path | None
    session: Session
    resolved: ResolvedExperiment
    plan: Plan
    params: dict[str, str]
    executors: dict[str, Any] = field(default_factory=dict)
    create_grader: Any = None
    backend: Any = None
    shard: ShardSpec | None = None
    strategy: str = DEFAULT_STRATEGY
    selected: list[TrialKey] = field(default_factory=list)


def prepare(opts: ExperimentOptions, *, build_components: bool = True) -> _Setup:
    """Load, resolve and plan an experiment; build executors, graders and the backend.

    Raises:
        VallyError: Any configuration, plugin or planning problem.
    """
    from vally.engine.experiment import resolve_experiment
    from vally.engine.planner import PlanInput, PlanOptions, build_plan
    from vally.engine.shards import parse_shard, select_keys
    from vally.plugins.session import Session
    from vally.specs import loading as specs

    _check_flags(opts)
    cwd = Path.cwd()
    experiment_path = _absolute(cwd, opts.experiment_file)
    if not experiment_path.is_file():
        problem = "is a folder, not a file" if experiment_path.is_dir() else "does not exist"
        raise ConfigError(
            f"experiment file {opts.experiment_file} {problem} ({experiment_path})",
            hint="pass the experiment YAML file (with name, evals, baseline and variants)",
        )
    if opts.workspace:
        check_folder_flag("--workspace", opts.workspace, _absolute(cwd, opts.workspace))
    base = experiment_path.parent
    params = {k: str(v) for k, v in parse_key_values(opts.params, flag="--param").items()}
    project, root = specs.find_project(base, params=params)
    if root is None:
        project, root = specs.find_project(cwd, params=params)
    session = Session(project, root or base)
    experiment = specs.load_experiment_file(experiment_path, cli_params=params, project=project)

    files = expand_evals(experiment.evals, base, project, exclude=experiment_path)
    files = apply_eval_filters(files, opts.eval_filters, [cwd, base])

    grader_plugins = [*experiment.grader_plugins, *opts.grader_plugins]
    executor_plugins = [*experiment.executor_plugins, *opts.executor_plugins]
    if grader_plugins:
        session.load_plugins("grader", _plugin_paths(grader_plugins, base), base_dir=base)
    if executor_plugins:
        session.load_plugins("executor", _plugin_paths(executor_plugins, base), base_dir=base)
    provider_spec = opts.eval_plugin or experiment.eval_plugin
    if provider_spec is not None:
        provider_spec = _plugin_paths([provider_spec], base)[0]
    loaded = components.load_evals(
        session, project, files, params, provider_spec=provider_spec, base=base
    )
    resolved = resolve_experiment(experiment, loaded, only_variant=opts.variant)

    order = {name: i for i, name in enumerate(resolved.variants)}
    inputs = [
        PlanInput(item.loaded, item.variant)
        for item in sorted(resolved.evals, key=lambda e: order[e.variant])
    ]
    options = PlanOptions(workspace_root=_absolute(cwd, opts.workspace) if opts.workspace else None)

    def resolve(item: LoadedEval, stimulus: Any) -> Any:
        return specs.resolve_environment(item, stimulus, project, root)

    plan = build_plan(inputs, options, resolve_environment=resolve)
    setup = _Setup(cwd, experiment_path, experiment, project, root, session, resolved, plan, params)

    # --- shard selection (deterministic, from the whole plan)
    keys = plan.keys
    setup.selected = list(keys)
    if opts.shard is not None:
        setup.shard = parse_shard(opts.shard)
        spec = opts.shard_strategy or DEFAULT_STRATEGY
        strategy_spec = _plugin_paths([spec], base)[0]
        name = session.resolve_single("shard_strategy", strategy_spec, base_dir=base)
        strategy = session.create("shard_strategy", name, {}, where="--shard-strategy")
        setup.strategy = name
        setup.selected = select_keys(strategy.select, keys, setup.shard, strategy=name)
    elif opts.shard_strategy is not None:
        name = session.resolve_single(
            "shard_strategy", _plugin_paths([opts.shard_strategy], base)[0], base_dir=base
        )
        setup.strategy = name
    # A dry run validates executor and grader configs too, but starts no backend.
    _build_components(opts, setup, backend=build_components)
    return setup


def _build_components(opts: ExperimentOptions, setup: _Setup, *, backend: bool = True) -> None:
    session = setup.session
    trials = setup.plan.trials
    setup.executors = components.build_executors(session, trials)
    setup.create_grader = components.build_grader_factory(session, trials)
    setup.backend = None
    if trials and backend:
        base = setup.experiment_path.parent
        setup.backend = components.build_backend(
            session,
            setup.project,
            flag_spec=_plugin_paths([opts.backend], base)[0] if opts.backend else None,
            flag_args=parse_key_values(
                opts.backend_args, flag="--backend-args", collect_repeats=True
            ),
            flag_base=base,
            project_root=setup.project_root,
        )


# --------------------------------------------------------------------------- dry run


def print_dry_run(setup: _Setup) -> None:
    """Print the resolved plan (reference format) without executing anything."""
    from vally.engine.planner import eval_name

    resolved = setup.resolved
    _echo(f"Experiment: {resolved.name}")
    _echo(f"Baseline:   {resolved.baseline}")
    _echo(f"Plans:      {len(resolved.evals)}")
    trials_by_variant: dict[str, int] = {}
    for trial in setup.plan.trials:
        trials_by_variant[trial.key.variant] = trials_by_variant.get(trial.key.variant, 0) + 1
    for variant in resolved.variants:
        suffix = " (baseline)" if variant == resolved.baseline else ""
        _echo()
        _echo(f"── {variant}{suffix} ──")
        for item in resolved.for_variant(variant):
            _echo(f"  Eval:        {eval_name(item.loaded)}")
            _echo(f"  File:        {_display(item.loaded.source, setup.cwd)}")
            _echo(f"  Model:       {item.loaded.spec.defaults.model or 'default'}")
            _echo(f"  Config hash: {item.config_hash}")
            _echo(f"  Eval hash:   {item.eval_hash}")
        _echo(f"  Trials:      {trials_by_variant.get(variant, 0)}")
    _echo()
    total = len(setup.plan.trials)
    if setup.shard is not None:
        _echo(
            f"Shard {setup.shard.label} ({setup.strategy}): {len(setup.selected)} of {total} "
            "planned trial(s)"
        )
    else:
        _echo(f"Planned trials: {total}")
    _echo("Dry run: nothing was executed.")


# --------------------------------------------------------------------------- observers


class VariantResultsWriter:
    """Appends each finished trial's record to ``<run>/<variant>/results.jsonl`` and flushes
    it at once. Critical: a write failure fails the run (it is registered as critical)."""

    def __init__(self, files: Mapping[str, Path]) -> None:
        self.paths = dict(files)
        self._handles: dict[str, IO[str]] = {}

    def open(self) -> None:
        """Create (truncate) every variant's results file.

        Raises:
            OutputError: A variant folder or file cannot be created.
        """
        for variant, path in self.paths.items():
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                self._handles[variant] = path.open("w", encoding="utf-8", newline="\n")
            except OSError as exc:
                self.close()
                raise OutputError(
                    f"cannot create the results file of variant {variant!r} at {path}: "
                    f"{exc.strerror or exc}",
                    hint="check that the output directory is writable and nothing is in the "
                    "way of the variant folder",
                ) from exc

    @hookimpl
    def vally_trial_end(self, run: RunInfo, record: TrialResultRecord) -> None:
        """Append ``record`` to its variant's file."""
        handle = self._handles.get(record.variant or "")
        if handle is None:
            raise OutputError(f"no results file for variant {record.variant!r}")
        try:
            handle.write(record.to_json_line() + "\n")
            handle.flush()
        except OSError as exc:
            raise OutputError(
                f"cannot append to {self.paths[record.variant or '']}: {exc.strerror or exc}"
            ) from exc

    def close(self) -> None:
        """Close every file (safe to call twice)."""
        handles, self._handles = self._handles, {}
        for handle in handles.values():
            with contextlib.suppress(OSError):
                handle.close()


class ProgressPrinter:
    """Prints one line per finished trial (and failed grader evidence with ``verbose``)."""

    def __init__(self, verbose: bool) -> None:
        self.verbose = verbose

    @hookimpl
    def vally_trial_end(self, run: RunInfo, record: TrialResultRecord) -> None:
        """Print the trial's outcome."""
        grade = record.grade_result
        if record.status != "success":
            mark, text = "!", f"{record.status}: {record.error.message if record.error else ''}"
        elif grade is None:
            mark, text = "·", "not graded"
        else:
            mark = "✔" if grade.passed else "✘"
            text = f"score {grade.score:.2f}"
        model = f" [{record.model}]" if record.model else ""
        _echo(
            f"  {mark} {record.variant} · {record.eval_name}/{record.stimulus_name}{model} "
            f"#{record.trial_index}: {text}"
        )
        if self.verbose and grade is not None:
            for detail in grade.details:
                if not detail.passed:
                    _echo(f"      ✘ {detail.name}: {detail.evidence[:2000]}")
            if record.trajectory is not None and record.trajectory.output:
                _echo(f"      output: {record.trajectory.output[:2000]}")


# --------------------------------------------------------------------------- running


def _experiment_blocks(
    setup: _Setup, run_id: str, shard: str | None
) -> dict[tuple[str, str], ExperimentBlock]:
    from vally.engine.planner import eval_name
    from vally.models.records import ExperimentBlock

    return {
        (item.variant, eval_name(item.loaded)): ExperimentBlock(
            run_id=run_id,
            experiment=setup.resolved.name,
            variant=item.variant,
            eval_hash=item.eval_hash,
            config_hash=item.config_hash,
            baseline=setup.resolved.baseline,
            shard=shard,
        )
        for item in setup.resolved.evals
    }


def _make_trial_runner(
    context: Any, root: Path, blocks: Mapping[tuple[str, str], ExperimentBlock]
) -> Any:
    """A trial runner writing per-trial folders under ``root`` (``<variant>/<eval>/...``)
    and adding the ``experiment`` provenance block to each record."""
    from vally.engine.rundir import trial_relpath
    from vally.engine.runner import TrialRunner

    class ExperimentTrialRunner(TrialRunner):
        """TrialRunner with per-variant trial folders and provenance."""

        def trial_dir(self, trial: PlannedTrial) -> Path | None:
            return root / trial_relpath(trial.key)

        async def run(self, trial: PlannedTrial) -> TrialResultRecord:
            record = await super().run(trial)
            block = blocks.get((trial.key.variant, trial.key.eval_name))
            return record.model_copy(update={"experiment": block})

    return ExperimentTrialRunner(context)


def _judge_conflicts(setup: _Setup, opts: ExperimentOptions) -> tuple[dict[str, Any], list[str]]:
    """The comparison judge settings inherited from the selected evals (after variant
    overrides), and the conflicts that the flags do not settle."""
    values: dict[str, set[Any]] = {
        "judge_model": set(),
        "judge_reasoning_effort": set(),
        "judge_provider": set(),
        "judge_timeout": set(),
    }
    for item in setup.resolved.evals:
        defaults = item.loaded.spec.defaults
        for name in values:
            values[name].add(getattr(defaults, name))
    overrides = {
        "judge_model": opts.judge_model,
        "judge_reasoning_effort": opts.judge_reasoning_effort,
        "judge_timeout": opts.judge_timeout,
    }
    settings: dict[str, Any] = {}
    conflicts: list[str] = []
    for name, seen in values.items():
        if overrides.get(name) is not None:
            settings[name] = overrides[name]
            continue
        if len(seen) > 1:
            shown = ", ".join(sorted(repr(v) for v in seen))
            conflicts.append(f"{name} differs across the selected evals and variants ({shown})")
            continue
        settings[name] = next(iter(seen)) if seen else None
    return settings, conflicts


def _run_compare(setup: _Setup, opts: ExperimentOptions, run_dir: Path) -> int:
    from vally.cli.compare import CompareRequest, execute
    from vally.models.durations import parse_duration

    settings, conflicts = _judge_conflicts(setup, opts)
    if conflicts:
        _echo("Comparison failed: the comparison judge settings conflict:", err=True)
        for conflict in conflicts:
            _echo(f"  - {conflict}", err=True)
        _echo(
            "  Use --judge-model, --judge-reasoning-effort or --judge-timeout to choose one, "
            "or set a common judge_provider. Trial results are saved.",
            err=True,
        )
        return EXIT_FAILURE
    timeout = settings.get("judge_timeout")
    if isinstance(timeout, str):
        timeout = parse_duration(timeout, field="--judge-timeout")
    request = CompareRequest(
        experiment_dir=run_dir,
        baseline_variant=setup.resolved.baseline,
        judge_model=settings.get("judge_model"),
        judge_reasoning_effort=settings.get("judge_reasoning_effort"),
        judge_provider=settings.get("judge_provider"),
        judge_timeout=float(timeout) if timeout is not None else None,
        params=dict(setup.params),
        verbose=opts.verbose,
    )
    _echo()
    _echo("Comparison (LLM-judged, baseline vs each variant):")
    try:
        return execute(request, setup.session)
    except VallyError as exc:
        _echo(f"Comparison failed: {exc.render()}", err=True)
        return EXIT_FAILURE


def _register_reporters(opts: ExperimentOptions, setup: _Setup) -> list[str]:
    session = setup.session
    base = setup.experiment_path.parent
    specifiers = [*setup.experiment.reporter_plugins, *opts.reporter_plugins]
    return components.register_user_reporters(
        session, _plugin_paths(specifiers, base), base_dir=base
    )


def _prepare_run_dir(opts: ExperimentOptions, setup: _Setup, output_dir: Path) -> Path:
    from vally.engine.rundir import check_output_dir, create_run_dir
    from vally.engine.shards import MANIFEST_FILE

    if setup.shard is None:
        return create_run_dir(output_dir)
    assert opts.run_id is not None
    check_output_dir(output_dir)
    shard_dir = output_dir / opts.run_id / setup.shard.dir_name
    try:
        if shard_dir.exists():
            if (shard_dir / MANIFEST_FILE).is_file():
                shutil.rmtree(shard_dir)  # a re-run reproduces the same slice
            elif any(shard_dir.iterdir()):
                raise OutputError(
                    f"shard folder {shard_dir} exists and is not a shard output",
                    hint="move it away or pass another --output-dir",
                )
        shard_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(
            f"cannot create the shard folder {shard_dir}: {exc.strerror or exc}"
        ) from exc
    return shard_dir


def run_experiment(opts: ExperimentOptions) -> int:
    """Run ``vally experiment run`` with ``opts`` and return the exit code.

    Raises:
        VallyError: A configuration, plugin, planning or output error (exit 1).
    """
    import asyncio

    from vally.contracts.events import RunInfo
    from vally.engine.otel import Tracing
    from vally.engine.report import compare_variants, comparison_table, render_report
    from vally.engine.rundir import SUMMARY_FILE, safe_name, write_jsonl
    from vally.engine.runner import RunContext, RunEngine, new_run_id
    from vally.engine.scheduler import DEFAULT_WORKERS, stop_on_signals
    from vally.engine.shards import (
        MANIFEST_FILE,
        SNAPSHOT_FILE,
        build_summaries,
        key_id,
        plan_digest,
        plan_snapshot,
        record_key_id,
        shard_manifest,
        write_json_file,
    )
    from vally.models.trajectory import utc_now

    setup = prepare(opts, build_components=not opts.dry_run)
    if opts.dry_run:
        print_dry_run(setup)
        return EXIT_OK
    plan = setup.plan
    resolved = setup.resolved
    run_id = opts.run_id or new_run_id()
    shard = setup.shard
    shard_label = shard.label if shard is not None else None
    output_dir = _absolute(setup.cwd, opts.output_dir or DEFAULT_OUTPUT_DIR)
    run_dir = _prepare_run_dir(opts, setup, output_dir)
    started_at = utc_now()

    snapshot = plan_snapshot(resolved, plan, setup.experiment_path)
    digest = plan_digest(snapshot)
    selected_ids = [key_id(k) for k in setup.selected]
    if shard is not None:
        write_json_file(run_dir / SNAPSHOT_FILE, snapshot)
        write_json_file(
            run_dir / MANIFEST_FILE,
            shard_manifest(
                run_id=run_id,
                experiment=resolved.name,
                shard=shard,
                strategy=setup.strategy,
                digest=digest,
                selected=selected_ids,
                completed=[],
                finished=False,
                started_at=started_at,
                completed_at=None,
            ),
        )

    variant_dirs = {v: run_dir / safe_name(v) for v in resolved.variants}
    writer = VariantResultsWriter({v: d / "results.jsonl" for v, d in variant_dirs.items()})
    writer.open()
    session = setup.session
    session.register_observer(writer, "experiment-results", critical=True)
    session.register_observer(ProgressPrinter(opts.verbose), "experiment-progress")
    _register_reporters(opts, setup)

    tracing = Tracing.start(
        run_dir,
        opts.otlp_endpoint,
        "vally.experiment",
        {
            "vally.run_id": run_id,
            "vally.experiment": resolved.name,
            "vally.baseline": resolved.baseline,
            "vally.shard": shard_label,
            "vally.planned_trials": len(setup.selected),
        },
    )
    session.register_observer(tracing.observer(), "otel")

    workers = (
        opts.workers
        or (setup.experiment.execution.workers if setup.experiment.execution else None)
        or setup.project.defaults.workers
        or DEFAULT_WORKERS
    )
    wanted = set(setup.selected)
    trials = [t for t in plan.trials if t.key in wanted]
    run = RunInfo(
        run_id=run_id,
        command="experiment",
        run_dir=run_dir,
        planned_trials=len(trials),
        started_at=started_at,
        options={
            "verbose": opts.verbose,
            "require_pass": opts.require_pass,
            "workers": workers,
            "otlp_endpoint": opts.otlp_endpoint,
            "variants": list(resolved.variants),
            "baseline": resolved.baseline,
        },
        experiment=resolved.name,
        shard=shard_label,
    )
    scrubber = components.scrubber_for(trials)
    context = RunContext(
        run=run,
        backend=setup.backend,
        executors=setup.executors,
        create_grader=setup.create_grader,
        emitter=session.emitter,
        scrubber=scrubber,
        run_dir=None,  # per-trial folders come from the experiment trial runner below
        llm=components.llm_provider_for(setup.session, setup.project, setup.plan.trials),
    )
    engine = RunEngine(context, plan.evals, workers=workers, plugins=session.provenance())
    blocks = _experiment_blocks(setup, run_id, shard_label)
    engine.runner = _make_trial_runner(context, run_dir, blocks)

    _echo(
        f"Experiment {resolved.name}: {len(resolved.variants)} variant(s), {len(trials)} "
        f"trial(s), {workers} worker(s)"
        + (f", shard {shard_label} ({setup.strategy})" if shard_label else "")
    )

    async def main() -> Any:
        with stop_on_signals(engine.stop):
            try:
                return await engine.run(trials)
            finally:
                if context.llm is not None:
                    with contextlib.suppress(Exception):  # teardown is best effort
                        await context.llm.aclose()

    errors: list[str] = []
    incomplete = False  # a required artifact could not be written
    result = None
    try:
        result = asyncio.run(main())
    except VallyError as exc:
        errors.append(exc.render())
        incomplete = True
    finally:
        writer.close()
    records = list(result.records) if result is not None else list(engine.records)
    cancelled = bool(result.cancelled) if result is not None else engine.cancelled
    if result is not None:
        errors.extend(result.failures)

    # --- per-variant summaries (required)
    summaries = build_summaries(
        snapshot,
        records,
        run_id=run_id,
        plugins=session.provenance(),
        shard=shard_label,
    )
    for variant, folder in variant_dirs.items():
        try:
            write_jsonl(folder / SUMMARY_FILE, summaries.get(variant, []), scrubber)
        except OSError as exc:
            incomplete = True
            errors.append(
                OutputError(f"cannot write {folder / SUMMARY_FILE}: {exc.strerror or exc}").render()
            )
    completed_at = utc_now()
    if shard is not None:
        completed = {record_key_id(r) for r in records if r.status != "cancelled"}
        finished = not cancelled and not incomplete
        try:
            write_json_file(
                run_dir / MANIFEST_FILE,
                shard_manifest(
                    run_id=run_id,
                    experiment=resolved.name,
                    shard=shard,
                    strategy=setup.strategy,
                    digest=digest,
                    selected=selected_ids,
                    completed=[k for k in selected_ids if k in completed],
                    finished=finished,
                    started_at=started_at,
                    completed_at=completed_at,
                ),
            )
        except OutputError as exc:
            errors.append(exc.render())
    else:
        try:
            from vally.engine.rundir import write_text_atomic

            write_text_atomic(
                run_dir / REPORT_FILE,
                render_report(
                    snapshot, summaries, records, run_id=run_id, rendered_at=completed_at
                ),
            )
        except Exception as exc:
            _echo(f"warning: cannot render {run_dir / REPORT_FILE}: {exc}", err=True)

    for problem in tracing.finish(error="; ".join(errors) if errors else None):
        _echo(f"warning: {problem}", err=True)
    for failure in session.emitter.failures:
        if not failure.critical:
            _echo(
                f"warning: reporter {failure.observer!r} failed in {failure.hook}: "
                f"{type(failure.error).__name__}: {failure.error}",
                err=True,
            )

    # --- console comparison
    _echo()
    comparison = compare_variants(
        list(resolved.variants), resolved.baseline, records, shard=shard_label
    )
    for line in comparison_table(comparison):
        _echo(line)
    _echo(f"Results: {run_dir}")

    for error in errors:
        _echo(f"error: {error}", err=True)
    if cancelled:
        _echo(f"Interrupted: {len(records)} finished trial(s) written to {run_dir}", err=True)
        return EXIT_INTERRUPTED
    code = EXIT_OK
    errored = [r for r in records if r.status == "error"]
    if errored:
        _echo(f"{len(errored)} trial(s) failed to run (status: error); see {run_dir}", err=True)
        code = EXIT_FAILURE
    if errors:
        code = EXIT_FAILURE
    failed = [
        f"{s.variant}/{s.eval_name}"
        for items in summaries.values()
        for s in items
        if s.verdict == "fail"
    ]
    if opts.require_pass and failed:
        what = "partial verdict" if shard is not None else "verdict"
        _echo(f"--require-pass: the {what} of {', '.join(failed)} failed", err=True)
        code = EXIT_FAILURE
    if opts.compare:
        if shard is not None:
            _echo("Comparison skipped: sharded runs are compared after 'vally experiment merge'.")
        elif len(resolved.variants) < 2:
            _echo("Comparison skipped: only one variant ran (--variant); nothing to compare.")
        elif cancelled:
            _echo("Comparison skipped: the run was interrupted.")
        elif _run_compare(setup, opts, run_dir) != EXIT_OK:
            code = EXIT_FAILURE
    return code


# --------------------------------------------------------------------------- merge


def merge_shards(
    shard_dirs: Sequence[str],
    output_dir: str,
    *,
    require_pass: bool = False,
    otlp_endpoint: str | None = None,
) -> int:
    """Run ``vally experiment merge`` and return the exit code.

    Raises:
        VallyError: A shard-validation or required output-write error (exit 1).
    """
    from vally.engine.otel import CONTEXT_FILE, Tracing, check_endpoint
    from vally.engine.report import compare_variants, comparison_table, render_report
    from vally.engine.rundir import (
        RESULTS_FILE,
        SUMMARY_FILE,
        safe_name,
        write_jsonl,
        write_text_atomic,
    )
    from vally.engine.shards import (
        EXPERIMENT_MANIFEST_FILE,
        SNAPSHOT_FILE,
        build_summaries,
        plan_digest,
        read_shard,
        read_shard_records,
        validate_shards,
        write_json_file,
    )
    from vally.models.trajectory import utc_now

    if otlp_endpoint is not None:
        check_endpoint(otlp_endpoint)
    cwd = Path.cwd()
    shards = [read_shard(_absolute(cwd, d)) for d in shard_dirs]
    validate_shards(shards)
    shards.sort(key=lambda s: s.index)
    first = shards[0]
    snapshot = first.snapshot
    run_id = str(first.manifest["runId"])
    variants = [str(v) for v in snapshot.get("variants") or []]
    baseline = str(snapshot.get("baseline"))
    folders = {v: safe_name(v) for v in variants}
    target = _absolute(cwd, output_dir)
    resolved = target.resolve()
    for shard in shards:
        folder = shard.path.resolve()
        if resolved == folder or folder in resolved.parents:
            raise OutputError(
                f"merge output {target} is inside shard directory {shard.path}: merging there "
                "would overwrite or mix with that shard's files",
                hint="pass an -o/--output-dir outside every shard directory, e.g. "
                f"{folder.parent / 'merged'}",
            )
    try:
        if target.exists() and not target.is_dir():
            raise OutputError(
                f"merge output {target} is a file", hint="pass another -o/--output-dir"
            )
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create {target}: {exc.strerror or exc}") from exc

    links = []
    for shard in shards:
        path = shard.path / CONTEXT_FILE
        with contextlib.suppress(OSError, ValueError):
            context = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(context, dict):
                links.append({**context, "vally.shard": f"{shard.index}/{shard.total}"})
    tracing = Tracing.start(
        target,
        otlp_endpoint,
        "vally.experiment.merge",
        {"vally.run_id": run_id, "vally.experiment": snapshot.get("experiment")},
        links=[
            {k: v for k, v in link.items() if k in {"traceId", "spanId", "vally.shard"}}
            for link in links
        ],
    )
    all_records: list[Any] = []
    by_variant: dict[str, list[Any]] = {v: [] for v in variants}
    for shard in shards:
        for variant, records in read_shard_records(shard, folders).items():
            by_variant.setdefault(variant, []).extend(records)
            all_records.extend(records)
    summaries = build_summaries(snapshot, all_records, run_id=run_id)
    try:
        for variant in variants:
            folder = target / folders[variant]
            write_jsonl(folder / RESULTS_FILE, by_variant.get(variant, []))
            write_jsonl(folder / SUMMARY_FILE, summaries.get(variant, []))
        write_json_file(target / SNAPSHOT_FILE, snapshot)
        merged_at = utc_now()
        write_json_file(
            target / EXPERIMENT_MANIFEST_FILE,
            {
                "schemaVersion": 1,
                "runId": run_id,
                "experiment": snapshot.get("experiment"),
                "baseline": baseline,
                "variants": variants,
                "planDigest": plan_digest(snapshot),
                "strategy": first.manifest.get("strategy"),
                "shards": [
                    {
                        "index": s.index,
                        "total": s.total,
                        "dir": s.path.name,
                        "trials": len(s.manifest.get("selectedKeys") or []),
                        "otelContext": next(
                            (
                                {"traceId": lk.get("traceId"), "spanId": lk.get("spanId")}
                                for lk in links
                                if lk.get("vally.shard") == f"{s.index}/{s.total}"
                            ),
                            None,
                        ),
                    }
                    for s in shards
                ],
                "trials": len(all_records),
                "mergedAt": merged_at,
            },
        )
        write_text_atomic(
            target / REPORT_FILE,
            render_report(snapshot, summaries, all_records, run_id=run_id, rendered_at=merged_at),
        )
    except OSError as exc:
        tracing.finish(error=str(exc))
        raise OutputError(
            f"cannot write the merged output in {target}: {exc.strerror or exc}"
        ) from exc
    for problem in tracing.finish():
        _echo(f"warning: {problem}", err=True)

    comparison = compare_variants(variants, baseline, all_records)
    _echo(f"Merged {len(shards)} shard(s) of run {run_id}: {len(all_records)} trial(s)")
    for line in comparison_table(comparison):
        _echo(line)
    _echo(f"Merged output: {target}")
    code = EXIT_OK
    errored = [r for r in all_records if r.status != "success"]
    if errored:
        _echo(
            f"{len(errored)} trial(s) of the shards failed to run (status: {errored[0].status}); "
            "the merged run reports them as errors",
            err=True,
        )
        code = EXIT_FAILURE
    failed = [
        f"{s.variant}/{s.eval_name}"
        for items in summaries.values()
        for s in items
        if s.verdict == "fail"
    ]
    if require_pass and failed:
        _echo(f"--require-pass: the merged verdict of {', '.join(failed)} failed", err=True)
        code = EXIT_FAILURE
    return code


# --------------------------------------------------------------------------- typer


@experiment_app.command("run")
def run_command(
    experiment_file: Annotated[
        str, typer.Argument(metavar="EXPERIMENT_FILE", help="Path to the experiment YAML file.")
    ],
    variant: Annotated[
        str | None, typer.Option(metavar="NAME", help="Run only the named variant.")
    ] = None,
    eval_filter: Annotated[
        list[str] | None,
        typer.Option(
            metavar="PATTERN",
            help="Run only declared evals matching this path/glob (repeatable, case-sensitive; "
            "each must match).",
        ),
    ] = None,
    output_dir: Annotated[
        str | None,
        typer.Option(metavar="DIR", help="Output folder (default ./vally-experiment-results)."),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(metavar="N", help="Max concurrent trials across all variants (default 5)."),
    ] = None,
    backend: Annotated[
        str | None, typer.Option(metavar="NAME|SPEC", help="Backend: local, docker or a plugin.")
    ] = None,
    backend_args: Annotated[
        list[str] | None,
        typer.Option(metavar="KEY=VALUE", help="Backend argument (repeatable; needs --backend)."),
    ] = None,
    shard: Annotated[
        str | None, typer.Option(metavar="I/N", help="Run only shard i of n (needs --run-id).")
    ] = None,
    run_id: Annotated[
        str | None, typer.Option(metavar="ID", help="Stable run id (default: a new UUID).")
    ] = None,
    shard_strategy: Annotated[
        str | None,
        typer.Option(metavar="SPEC", help="round-robin (default), by-stimulus, or a module."),
    ] = None,
    param: Annotated[
        list[str] | None, typer.Option(metavar="KEY=VALUE", help="Param value (repeatable).")
    ] = None,
    grader_plugin: Annotated[
        list[str] | None, typer.Option(metavar="SPEC", help="Grader plugin (repeatable).")
    ] = None,
    executor_plugin: Annotated[
        list[str] | None, typer.Option(metavar="SPEC", help="Executor plugin (repeatable).")
    ] = None,
    reporter_plugin: Annotated[
        list[str] | None, typer.Option(metavar="SPEC", help="Reporter plugin (repeatable).")
    ] = None,
    eval_plugin: Annotated[
        str | None, typer.Option(metavar="SPEC", help="Eval provider plugin to load and select.")
    ] = None,
    workspace: Annotated[
        str | None,
        typer.Option(metavar="DIR", help="Keep agent workspaces here, keyed by variant/stimulus."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the resolved plan without executing.")
    ] = False,
    require_pass: Annotated[
        bool, typer.Option("--require-pass", help="Exit 1 when a valid verdict fails.")
    ] = False,
    otlp_endpoint: Annotated[
        str | None, typer.Option(metavar="URL", help="Export traces to an OTLP/HTTP collector.")
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", help="More output.")] = False,
    compare: Annotated[
        bool, typer.Option("--compare", help="Compare each variant with the baseline afterwards.")
    ] = False,
    judge_model: Annotated[
        str | None, typer.Option(metavar="MODEL", help="Comparison judge model (needs --compare).")
    ] = None,
    judge_timeout: Annotated[
        str | None,
        typer.Option(metavar="DURATION", help="Comparison judge timeout (needs --compare)."),
    ] = None,
    judge_reasoning_effort: Annotated[
        str | None,
        typer.Option(metavar="LEVEL", help="Comparison judge reasoning effort (needs --compare)."),
    ] = None,
) -> None:
    """Run the declared eval set across every variant of the experiment file."""
    opts = ExperimentOptions(
        experiment_file=experiment_file,
        variant=variant,
        eval_filters=list(eval_filter or []),
        output_dir=output_dir,
        workers=workers,
        backend=backend,
        backend_args=list(backend_args or []),
        params=list(param or []),
        grader_plugins=list(grader_plugin or []),
        executor_plugins=list(executor_plugin or []),
        reporter_plugins=list(reporter_plugin or []),
        eval_plugin=eval_plugin,
        workspace=workspace,
        dry_run=dry_run,
        require_pass=require_pass,
        run_id=run_id,
        shard=shard,
        shard_strategy=shard_strategy,
        otlp_endpoint=otlp_endpoint,
        verbose=verbose,
        compare=compare,
        judge_model=judge_model,
        judge_timeout=judge_timeout,
        judge_reasoning_effort=judge_reasoning_effort,
    )
    try:
        code = run_experiment(opts)
    except VallyError as exc:
        if debug_enabled():
            raise
        fail(exc)
    sys.stdout.flush()
    raise typer.Exit(code)


@experiment_app.command("merge")
def merge_command(
    shard_dirs: Annotated[
        list[str], typer.Argument(metavar="SHARD_DIR...", help="Every shard directory of the run.")
    ],
    output_dir: Annotated[
        str,
        typer.Option("--output-dir", "-o", metavar="PATH", help="Folder for the merged output."),
    ],
    require_pass: Annotated[
        bool, typer.Option("--require-pass", help="Exit 1 when a valid merged verdict fails.")
    ] = False,
    otlp_endpoint: Annotated[
        str | None, typer.Option(metavar="URL", help="Export merge traces to OTLP/HTTP.")
    ] = None,
) -> None:
    """Reconcile the shard directories of a sharded run into one result and report."""
    try:
        code = merge_shards(
            shard_dirs, output_dir, require_pass=require_pass, otlp_endpoint=otlp_endpoint
        )
    except VallyError as exc:
        if debug_enabled():
            raise
        fail(exc)
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    """Add ``experiment`` (``run`` and ``merge``) to the ``vally`` application."""
    app.add_typer(experiment_app, name="experiment")
