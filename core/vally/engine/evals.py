"""``vally eval`` as a library call: an :class:`EvalRequest` (the command's options) becomes a
:class:`~vally.engine.run.RunRequest` and runs through the one run API.

From Python::

    from vally import EvalRequest, run_eval

    result = run_eval(EvalRequest(eval_specs=["evals/auth/eval.yaml"], runs=3, console=False))
    for summary in result.summaries:
        print(summary.eval_name, summary.verdict)

Stimuli come from ``eval_specs`` (files or folders), a ``suite`` of ``.vally.yaml``, or
``tags`` over every discovered eval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vally.contracts.metadata import PluginKind
from vally.engine.options import RunOptions, check_folder_flag, plugin_paths, run_reporters
from vally.engine.planning.plan import PlanInput, PlanOptions
from vally.engine.planning.planner import parse_models
from vally.engine.run import PreparedRun, RunRequest, prepare_run
from vally.engine.trials import components
from vally.engine.trials.components import BackendChoice
from vally.engine.trials.run_engine import RunResult
from vally.errors import ConfigError
from vally.models.project import ProjectConfig
from vally.plugins.session import Session
from vally.specs.params import parse_key_values, parse_params
from vally.specs.selection import absolute

DEFAULT_OUTPUT_DIR = "vally-results"


@dataclass(kw_only=True)
class EvalRequest(RunOptions):
    """Every option of ``vally eval``, as the flags take them (see ``vally eval --help``)."""

    eval_specs: list[str] = field(default_factory=list)
    suite: str | None = None
    tags: list[str] = field(default_factory=list)
    skill_dirs: list[str] = field(default_factory=list)
    work_dir: str | None = None
    model: str | None = None
    timeout: str | None = None
    threshold: float | None = None
    judge_model: str | None = None
    skip_grade: bool = False
    runs: int | None = None
    max_retries: int = 0

    def check(self) -> None:
        """Reject contradictory or out-of-range options before anything is loaded.

        Raises:
            ConfigError: Naming the flag and what to do.
        """
        conflicts = (
            (
                self.eval_plugin and not self.eval_specs,
                "--eval-plugin needs --eval-spec: the provider reads the files you name",
                "add -e <file> for each file the eval provider should load",
            ),
            (
                self.eval_plugin and self.suite,
                "--eval-plugin cannot be combined with --suite",
                None,
            ),
            (
                self.suite and self.eval_specs,
                "--suite and --eval-spec select evals in two different ways; use one of them",
                None,
            ),
        )
        for conflicting, message, hint in conflicts:
            if conflicting:
                raise ConfigError(message, hint=hint)
        self.check_common()
        _check_ranges(self)


def _check_ranges(opts: EvalRequest) -> None:
    if opts.max_retries < 0:
        raise ConfigError(f"--max-retries must be 0 or more, got {opts.max_retries}")
    if opts.runs is not None and opts.runs < 0:
        raise ConfigError(f"--runs must be 0 or more, got {opts.runs}")
    if opts.threshold is not None and not 0.0 <= opts.threshold <= 1.0:
        raise ConfigError(f"--threshold must be between 0 and 1, got {opts.threshold}")


# --------------------------------------------------------------------------- loading


def _skill_folders(skill_dirs: Sequence[str], cwd: Path) -> list[str]:
    from vally.specs.skills import find_skills

    found: list[str] = []
    for item in skill_dirs:
        folder = absolute(cwd, item)
        if not folder.exists():
            raise ConfigError(f"--skill-dir {item}: no such directory ({folder})")
        if not folder.is_dir():
            raise ConfigError(f"--skill-dir {item}: {folder} is not a directory")
        for skill in find_skills(folder):
            path = str(skill.absolute())
            if path not in found:
                found.append(path)
    return found


def _named_files(opts: EvalRequest, cwd: Path, project: ProjectConfig) -> list[Path]:
    from vally.specs.loading import eval_files_in

    files: list[Path] = []
    patterns = project.paths.evalFilenames
    for item in opts.eval_specs:
        path = absolute(cwd, item)
        if not path.exists():
            raise ConfigError(f"eval spec {item} does not exist ({path})")
        found = eval_files_in(cwd, [str(path)], patterns) if path.is_dir() else [path]
        if not found:
            raise ConfigError(f"no eval files in folder {item} (looked for {', '.join(patterns)})")
        files.extend(p for p in found if p not in files)
    return files


def _eval_files(
    opts: EvalRequest, cwd: Path, project: ProjectConfig, root: Path
) -> tuple[list[Path], dict[str, list[str]] | None]:
    from vally.specs import loading as specs

    if opts.eval_specs:
        return _named_files(opts, cwd, project), None
    if opts.suite:
        return specs.select_suite(project, root, opts.suite)
    files = specs.discover_eval_files(project, root)
    if not files:
        raise ConfigError(
            f"no eval files found under {', '.join(project.paths.evals)} (relative to {root})",
            hint="pass -e <eval.yaml>, a --suite, or set paths.evals in .vally.yaml",
        )
    return files, None


def _working_dir(opts: EvalRequest) -> Path:
    cwd = Path(opts.work_dir).expanduser().absolute() if opts.work_dir else Path.cwd()
    if not cwd.is_dir():
        raise ConfigError(f"--work-dir {opts.work_dir}: not a directory ({cwd})")
    return cwd


def _plan_options(opts: EvalRequest, cwd: Path) -> PlanOptions:
    from vally.models.durations import parse_duration
    from vally.specs import loading as specs

    timeout = parse_duration(opts.timeout, field="--timeout") if opts.timeout else None
    if timeout is not None and timeout <= 0:
        raise ConfigError(
            f"--timeout must be longer than zero, got {opts.timeout!r}",
            hint="write e.g. --timeout 5m, or leave it out for the spec's timeout",
        )
    if opts.workspace:
        check_folder_flag("--workspace", opts.workspace, absolute(cwd, opts.workspace))
    return PlanOptions(
        models=parse_models(opts.model),
        runs=opts.runs,
        timeout=timeout,
        threshold=opts.threshold,
        judge_model=opts.judge_model,
        tag_filter=specs.parse_tag_flags(opts.tags) if opts.tags else None,
        stimulus_patterns=tuple(opts.stimuli),
        extra_skills=_skill_folders(opts.skill_dirs, cwd),
        workspace_root=absolute(cwd, opts.workspace) if opts.workspace else None,
    )


def eval_run_request(opts: EvalRequest) -> tuple[RunRequest, Path]:
    """The run ``opts`` describes, and the folder its run folders go under.

    Raises:
        VallyError: A flag, project, spec or plugin problem (nothing was written).
    """
    from vally.specs import loading as specs

    opts.check()
    cwd = _working_dir(opts)
    params = parse_params(opts.params)
    project, root = specs.find_project(cwd, params=params)
    if root is None and opts.eval_specs:
        project, root = specs.find_project(absolute(cwd, opts.eval_specs[0]), params=params)
    session = Session(project, root or cwd)
    files, suite_filter = _eval_files(opts, cwd, project, root or cwd)
    spec_base = files[0].parent if opts.eval_specs and files else cwd
    named: tuple[tuple[PluginKind, list[str]], ...] = (
        ("grader", opts.grader_plugins),
        ("executor", opts.executor_plugins),
    )
    for kind, specifiers in named:
        if specifiers:
            paths = plugin_paths(specifiers, spec_base, fallback=cwd)
            session.load_plugins(kind, paths, base_dir=spec_base)
    loaded = components.load_evals(
        session, project, files, params, provider_spec=opts.eval_plugin, base=cwd
    )

    def stimulus_filter(item: Any, stimulus: Any) -> bool:
        if suite_filter is None:
            return True
        return specs.matches_tag_filter(specs.stimulus_tags(item.spec, stimulus), suite_filter)

    request = RunRequest(
        session=session,
        inputs=[PlanInput(item) for item in loaded],
        plan_options=_plan_options(opts, cwd),
        project_root=root,
        stimulus_filter=stimulus_filter,
        command="eval",
        backend=BackendChoice(
            opts.backend,
            parse_key_values(opts.backend_args, flag="--backend-args", collect_repeats=True),
            cwd,
        ),
        reporters=run_reporters(opts, results={}, console={}),
        reporter_plugins=opts.reporter_plugins,
        plugin_base=cwd,
        workers=opts.workers,
        max_retries=opts.max_retries,
        skip_grade=opts.skip_grade,
        runner=opts.runner_choice(),
        budget=opts.budget(),
        no_cache=opts.no_cache,
        options=_run_options(opts),
    )
    return request, _output_dir(opts, cwd, project, root)


def _run_options(opts: EvalRequest) -> dict[str, Any]:
    return {
        "verbose": opts.verbose,
        "quiet": opts.quiet,
        "require_pass": opts.require_pass,
        "skip_grade": opts.skip_grade,
        "output": opts.output,
        "models": [m for m in (opts.model or "").split(",") if m],
        "otlp_endpoint": opts.otlp_endpoint,
        "junit": opts.junit,
        "max_retries": opts.max_retries,
    }


def _output_dir(opts: EvalRequest, cwd: Path, project: ProjectConfig, root: Path | None) -> Path:
    if opts.output_dir:
        return absolute(cwd, opts.output_dir)
    if project.paths.results:
        return absolute(root or cwd, project.paths.results)
    return cwd / DEFAULT_OUTPUT_DIR


def prepare_eval(opts: EvalRequest) -> tuple[PreparedRun, Path]:
    """Load, plan and create everything ``opts`` needs; nothing is written yet.

    Returns:
        The prepared run and the folder its run folder goes under.
    """
    request, output_dir = eval_run_request(opts)
    return prepare_run(request), output_dir


def run_eval(opts: EvalRequest) -> RunResult:
    """Run an eval as ``vally eval`` does and return its records and summaries.

    The run folder is created under ``output_dir`` (default ``./vally-results``) unless the
    plan runs nothing (every eval has ``runs: 0``): then the specs are validated and the
    result has no records.

    With ``opts.resume`` the run continues in that run folder instead (see
    :meth:`~vally.engine.run.PreparedRun.resume`); the result holds every record of it.

    Raises:
        VallyError: A configuration, plugin or planning problem (nothing was run).
    """
    prepared, output_dir = prepare_eval(opts)
    if prepared.plan.lint_only:
        return prepared.empty_result()
    return prepared.execute(eval_run_dir(prepared, opts, output_dir))


def eval_run_dir(prepared: PreparedRun, opts: EvalRequest, output_dir: Path) -> Path:
    """The run folder of ``opts``: a new one under ``output_dir``, or with ``opts.resume``
    the folder being resumed, made ready (see :meth:`PreparedRun.resume`).

    Raises:
        VallyError: The folder cannot be created, or cannot be resumed (why is said).
    """
    from vally.engine.records.run_folder import create_run_dir

    if not opts.resume:
        return create_run_dir(output_dir)
    run_dir = absolute(_working_dir(opts), opts.resume)
    prepared.resume(run_dir, retry_errors=opts.retry_errors)
    return run_dir
