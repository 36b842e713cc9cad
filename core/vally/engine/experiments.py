"""``vally experiment run`` as a library call: the experiment file's evals across its
variants, planned as one run (a variant per trial) through the one run API.

Output (unsharded)::

    <output-dir>/<timestamp>/
      report.md  otel-spans.jsonl  otel-context.json
      <variant>/results.jsonl  <variant>/run-summary.jsonl
      <variant>/<eval>/<stimulus>/<model>/trial-<n>/   (session logs)

With a shard (``--shard i/n --run-id ID``) the output goes to
``<output-dir>/<ID>/shard-<i>-of-<n>/`` with ``plan-snapshot.json`` and
``shard-manifest.json`` instead of ``report.md``.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from vally.contracts.metadata import PluginKind
from vally.engine.experiment_hooks import ExperimentHooks
from vally.engine.options import (
    ExperimentRequest,
    check_folder_flag,
    plugin_paths,
    run_reporters,
)
from vally.engine.planning.plan import PlanInput, PlanOptions
from vally.engine.planning.variants import ResolvedExperiment
from vally.engine.run import ExperimentMode, PreparedRun, RunRequest, prepare_run
from vally.engine.shards.partition import ShardSpec
from vally.engine.trials import components
from vally.engine.trials.components import BackendChoice
from vally.engine.trials.context import new_run_id
from vally.engine.trials.run_engine import RunResult
from vally.errors import ConfigError, OutputError, VallyError
from vally.models.experiment import ExperimentFile
from vally.models.trajectory import utc_now
from vally.plugins import defaults
from vally.plugins.session import Session
from vally.specs.params import parse_key_values, parse_params
from vally.specs.selection import absolute

DEFAULT_OUTPUT_DIR = "vally-experiment-results"


@dataclass
class ExperimentSetup:
    """An experiment prepared to run: the resolved experiment, its plan and its shard.

    Attributes:
        cwd: The working directory.
        path: The experiment file.
        experiment: The experiment file's model.
        resolved: Evals x variants with hashes.
        prepared: The prepared run (plan, plugins).
        params: ``--param`` values.
        shard: The shard this process runs, if any.
        strategy: The shard strategy's name.
    """

    cwd: Path
    path: Path
    experiment: ExperimentFile
    resolved: ResolvedExperiment
    prepared: PreparedRun
    params: dict[str, str]
    shard: ShardSpec | None = None
    strategy: str = defaults.DEFAULT_SHARD_STRATEGY

    @property
    def base(self) -> Path:
        """The experiment file's folder (relative paths in it resolve from there)."""
        return self.path.parent


def _experiment_path(opts: ExperimentRequest, cwd: Path) -> Path:
    path = absolute(cwd, opts.experiment_file)
    if not path.is_file():
        problem = "is a folder, not a file" if path.is_dir() else "does not exist"
        raise ConfigError(
            f"experiment file {opts.experiment_file} {problem} ({path})",
            hint="pass the experiment YAML file (with name, evals, baseline and variants)",
        )
    if opts.workspace:
        check_folder_flag("--workspace", opts.workspace, absolute(cwd, opts.workspace))
    return path


def _load(
    opts: ExperimentRequest, cwd: Path, path: Path, params: dict[str, str]
) -> tuple[Session, ExperimentFile, ResolvedExperiment, Path | None]:
    from vally.engine.planning.variants import resolve_experiment
    from vally.specs import loading as specs
    from vally.specs.selection import apply_eval_filters, expand_evals

    base = path.parent
    project, root = specs.find_project(base, params=params)
    if root is None:
        project, root = specs.find_project(cwd, params=params)
    session = Session(project, root or base)
    experiment = specs.load_experiment_file(path, cli_params=params, project=project)
    files = expand_evals(experiment.evals, base, project, exclude=path)
    files = apply_eval_filters(files, opts.eval_filters, [cwd, base])
    named: tuple[tuple[PluginKind, list[str]], ...] = (
        ("grader", [*experiment.grader_plugins, *opts.grader_plugins]),
        ("executor", [*experiment.executor_plugins, *opts.executor_plugins]),
    )
    for kind, specifiers in named:
        if specifiers:
            session.load_plugins(kind, plugin_paths(specifiers, base), base_dir=base)
    provider = opts.eval_plugin or experiment.eval_plugin
    if provider is not None:
        provider = plugin_paths([provider], base)[0]
    loaded = components.load_evals(
        session, project, files, params, provider_spec=provider, base=base
    )
    resolved = resolve_experiment(experiment, loaded, only_variant=opts.variant)
    return session, experiment, resolved, root


def _shard_selector(
    opts: ExperimentRequest, session: Session, base: Path
) -> tuple[ShardSpec | None, str, Any]:
    from vally.engine.shards.partition import parse_shard, select_keys

    spec = opts.shard_strategy
    if opts.shard is None and spec is None:
        return None, defaults.DEFAULT_SHARD_STRATEGY, None
    specifier = plugin_paths([spec or defaults.DEFAULT_SHARD_STRATEGY], base)[0]
    name = session.resolve_single("shard_strategy", specifier, base_dir=base)
    if opts.shard is None:
        return None, name, None
    shard = parse_shard(opts.shard)
    strategy = session.create("shard_strategy", name, {}, where="--shard-strategy")
    return shard, name, lambda keys: select_keys(strategy.select, keys, shard, strategy=name)


def prepare_experiment(opts: ExperimentRequest) -> ExperimentSetup:
    """Load, resolve and plan an experiment and create every plugin it needs (a dry run
    creates no backend or reporter). Nothing is written.

    Raises:
        VallyError: Any configuration, plugin or planning problem.
    """
    from vally.engine.planning.identity import plan_identities
    from vally.engine.run import plan_request
    from vally.engine.shards.partition import packed_snapshot, plan_snapshot
    from vally.engine.trials.summaries import experiment_blocks

    opts.check()
    cwd = Path.cwd()
    path = _experiment_path(opts, cwd)
    params = parse_params(opts.params)
    session, experiment, resolved, root = _load(opts, cwd, path, params)
    order = {name: i for i, name in enumerate(resolved.variants)}
    inputs = [
        PlanInput(item.loaded, item.variant)
        for item in sorted(resolved.evals, key=lambda e: order[e.variant])
    ]
    workspace = absolute(cwd, opts.workspace) if opts.workspace else None
    options = PlanOptions(workspace_root=workspace, stimulus_patterns=tuple(opts.stimuli))
    shard, strategy, select = _shard_selector(opts, session, path.parent)
    run_id = opts.run_id or _resumed_run_id(opts, cwd) or new_run_id()
    base = path.parent
    request = RunRequest(
        session=session,
        inputs=inputs,
        plan_options=options,
        project_root=root,
        command="experiment",
        backend=BackendChoice(
            plugin_paths([opts.backend], base)[0] if opts.backend else None,
            parse_key_values(opts.backend_args, flag="--backend-args", collect_repeats=True),
            base,
        ),
        reporters=run_reporters(opts, results={"per_variant": True}, console={"style": "lines"}),
        reporter_plugins=plugin_paths([*experiment.reporter_plugins, *opts.reporter_plugins], base),
        plugin_base=base,
        workers=opts.workers or (experiment.execution.workers if experiment.execution else None),
        select=select,
        run_id=run_id,
        runner=opts.runner_choice(),
        budget=opts.budget(),
        no_cache=opts.no_cache,
        options={
            "verbose": opts.verbose,
            "quiet": opts.quiet,
            "require_pass": opts.require_pass,
        },
    )
    plan = plan_request(request)
    label = shard.label if shard is not None else None
    identities = plan_identities(plan, session=session, judge_model=options.judge_model)
    snapshot = plan_snapshot(resolved, plan, path, identities)
    request.experiment = ExperimentMode(
        name=resolved.name,
        baseline=resolved.baseline,
        variants=list(resolved.variants),
        snapshot=packed_snapshot(snapshot),
        blocks=experiment_blocks(snapshot, run_id=run_id, shard=label),
        shard=label,
    )
    prepared = prepare_run(request, dry_run=opts.dry_run, plan=plan)
    return ExperimentSetup(cwd, path, experiment, resolved, prepared, params, shard, strategy)


# --------------------------------------------------------------------------- running


def _shard_dir(output_dir: Path, run_id: str, shard: ShardSpec) -> Path:
    from vally.engine.records.run_folder import check_output_dir
    from vally.engine.shards.partition import MANIFEST_FILE

    check_output_dir(output_dir)
    shard_dir = output_dir / run_id / shard.dir_name
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


def _resumed_run_id(opts: ExperimentRequest, cwd: Path) -> str | None:
    """The run id of the folder ``--resume`` names (None without ``--resume``)."""
    from vally.engine.planning.resume import resumed_run_id

    return resumed_run_id(absolute(cwd, opts.resume)) if opts.resume else None


def experiment_run_dir(opts: ExperimentRequest, setup: ExperimentSetup) -> Path:
    """Create the run folder: timestamped, or the shard's folder of the run id; with
    ``--resume`` the folder being resumed, made ready (see
    :meth:`~vally.engine.run.PreparedRun.resume`).

    Raises:
        OutputError: The folder cannot be created, or a foreign folder is in the way.
        ConfigError: The folder cannot be resumed (the reason is said).
    """
    from vally.engine.records.run_folder import create_run_dir

    if opts.resume:
        run_dir = absolute(setup.cwd, opts.resume)
        setup.prepared.resume(run_dir, retry_errors=opts.retry_errors)
        return run_dir
    output_dir = absolute(setup.cwd, opts.output_dir or DEFAULT_OUTPUT_DIR)
    run_id = setup.prepared.request.run_id
    if setup.shard is None or run_id is None:
        return create_run_dir(output_dir)
    return _shard_dir(output_dir, run_id, setup.shard)


@dataclass
class ShardBook:
    """Keeps a shard's ``plan-snapshot.json`` and ``shard-manifest.json`` up to date, and
    tells the hook plugins when the shard opens and when it has finished (vally's own seals
    it then: see :mod:`vally.engine.experiment_hooks`)."""

    setup: ExperimentSetup
    run_dir: Path
    started_at: str = field(default_factory=utc_now)
    digest: str | None = field(default=None, init=False)
    """The plan snapshot's digest (the manifest's ``planDigest``), from the plain snapshot
    the first write makes for the file."""

    @cached_property
    def hooks(self) -> ExperimentHooks:
        """The run's hook plugins."""
        return ExperimentHooks(self.setup.prepared.request.session)

    def _selected(self) -> list[str]:
        """The shard's trials in plan order: those to run and, when resumed, those kept."""
        from vally.engine.shards.partition import key_id, record_key_id

        prepared = self.setup.prepared
        chosen = {key_id(t.key) for t in prepared.trials}
        chosen.update(record_key_id(r) for r in prepared.reused)
        return [k for k in (key_id(t.key) for t in prepared.plan.trials) if k in chosen]

    def write(
        self, *, completed: list[str], finished: bool, completed_at: str | None
    ) -> dict[str, Any]:
        """Write the manifest (and, the first time, the snapshot, after telling the hook
        plugins that the shard opens); returns the manifest.

        Raises:
            OutputError: A file cannot be written.
            PluginError: A hook plugin cannot be loaded.
        """
        from vally.engine.shards.partition import (
            MANIFEST_FILE,
            SNAPSHOT_FILE,
            plan_digest,
            shard_manifest,
            write_json_file,
        )
        from vally.specs.packed import plain

        setup = self.setup
        mode = setup.prepared.request.experiment
        assert mode is not None and setup.shard is not None
        if completed_at is None:
            self.hooks.shard_opened(self.run_dir)
            document = plain(mode.snapshot)
            write_json_file(self.run_dir / SNAPSHOT_FILE, document)
            self.digest = plan_digest(document)
            del document
        if self.digest is None:
            self.digest = plan_digest(plain(mode.snapshot))
        manifest = shard_manifest(
            run_id=str(setup.prepared.request.run_id),
            experiment=mode.name,
            shard=setup.shard,
            strategy=setup.strategy,
            digest=self.digest,
            selected=self._selected(),
            completed=completed,
            finished=finished,
            started_at=self.started_at,
            completed_at=completed_at,
        )
        write_json_file(self.run_dir / MANIFEST_FILE, manifest)
        return manifest

    def close(self, result: RunResult) -> None:
        """Record which selected trials completed and whether the shard finished; tell the
        hook plugins when it did.

        Raises:
            VallyError: The manifest, or what a hook plugin writes, cannot be written.
        """
        from vally.engine.shards.partition import record_key_id
        from vally.specs.packed import plain

        done = {record_key_id(r) for r in result.records if r.status != "cancelled"}
        finished = not result.cancelled and result.error is None and not result.missing_outputs
        manifest = self.write(
            completed=[k for k in self._selected() if k in done],
            finished=finished,
            completed_at=utc_now(),
        )
        mode = self.setup.prepared.request.experiment
        if finished and mode is not None:
            self.hooks.shard_closed(self.run_dir, manifest, plain(mode.snapshot))


def execute_experiment(setup: ExperimentSetup, run_dir: Path) -> RunResult:
    """Run a prepared experiment into ``run_dir``; a shard's manifest that cannot be
    completed afterwards is listed in the result's ``missing_outputs``.

    Raises:
        OutputError: The shard's first manifest cannot be written (nothing ran).
    """
    book = ShardBook(setup, run_dir) if setup.shard is not None else None
    if book is not None:
        book.write(completed=[], finished=False, completed_at=None)
    result = setup.prepared.execute(run_dir)
    if book is not None:
        try:
            book.close(result)
        except VallyError as exc:
            result.missing_outputs.append(exc.render())
    return result


def run_experiment(opts: ExperimentRequest) -> RunResult:
    """Run an experiment as ``vally experiment run`` does (without ``--compare``) and return
    its records and summaries.

    Raises:
        VallyError: A configuration, plugin, planning or output problem.
    """
    setup = prepare_experiment(opts)
    if opts.dry_run:
        return setup.prepared.empty_result()
    return execute_experiment(setup, experiment_run_dir(opts, setup))
