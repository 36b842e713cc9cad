"""``vally grade``: re-grade saved trials read from standard input.

Usage::

    vally eval -e eval.yaml --output jsonl --skip-grade | vally grade -e eval.yaml
    vally grade -e eval.yaml < results.jsonl
    vally grade -e eval.yaml --stimulus add-test --workspace ./ws < trajectory.atif.json

Every input trial (see :mod:`vally.tools.ingest` for the accepted shapes) is matched to its
stimulus in the spec by name; ATIF trajectories, which carry no stimulus name, are matched
by ``--stimulus`` or by their first user prompt. That stimulus's graders (eval-level ones
first), constraints, weights and threshold are applied through
:func:`vally.engine.grading.grade_trial`.
Without ``--workspace`` graders get no sandbox: graders whose metadata declares
``needs_workspace`` (they read files or run commands) are named in a warning before grading
and their results are errors; with it, they work in that folder (which is never cleared or
deleted).

Results are printed per stimulus (as ``vally eval`` does); ``--output jsonl`` writes the
re-graded trial records to standard output and the report to standard error. Exit code 0
when every trial passed, 1 when one failed or errored, or on any error.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO

import typer

from vally.cli.common import (
    EXIT_FAILURE,
    EXIT_OK,
    debug_enabled,
    fail,
    parse_key_values,
)
from vally.errors import ConfigError, VallyError

if TYPE_CHECKING:
    from vally.contracts.protocols import LoadedEval
    from vally.models.records import GradeResult, TrialResultRecord
    from vally.models.spec import EvalSpec, GraderConfig, Stimulus
    from vally.models.trajectory import Trajectory
    from vally.plugins.session import Session
    from vally.tools.ingest import IngestedItem


@dataclass
class GradeOptions:
    """The flags of ``vally grade``."""

    eval_spec: str
    stimulus: str | None = None
    workspace: str | None = None
    output: str | None = None
    judge_model: str | None = None
    grader_plugins: list[str] = field(default_factory=list)
    verbose: bool = False
    threshold: float | None = None
    params: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- matching


def _first_prompt(stimulus: Stimulus) -> str:
    return " ".join(stimulus.prompts[0].split()) if stimulus.prompts else ""


def match_stimulus(item: IngestedItem, spec: EvalSpec, forced: str | None, source: str) -> Stimulus:
    """The spec stimulus an input trial belongs to.

    Named trials match by name. ATIF trajectories use ``--stimulus`` when given, else the
    stimulus whose first prompt equals the trajectory's first user message, else the only
    stimulus of a one-stimulus spec.

    Raises:
        ConfigError: No stimulus (or more than one) matches; says which line and what to do.
    """
    by_name = {s.name: s for s in spec.stimuli}
    names = ", ".join(by_name)
    name = item.stimulus_name
    if name is None and forced is not None:
        name = forced
    if name is not None:
        found = by_name.get(name)
        if found is None:
            flag = "--stimulus " if item.stimulus_name is None else ""
            raise ConfigError(
                f"line {item.line}: {flag}{name!r} is not a stimulus of {source} "
                f"(its stimuli: {names})",
                hint="grade with the eval spec that produced these trials",
            )
        return found
    trajectory = item.trajectory
    prompt = " ".join(trajectory.stimulus.prompts[0].split()) if trajectory else ""
    candidates = [s for s in spec.stimuli if prompt and _first_prompt(s) == prompt]
    if len(candidates) == 1:
        return candidates[0]
    if not candidates and len(spec.stimuli) == 1:
        return spec.stimuli[0]
    what = "several stimuli" if candidates else "no stimulus"
    raise ConfigError(
        f"line {item.line}: the {item.format} trajectory's prompt matches {what} of {source}",
        hint=f"name the stimulus with --stimulus (one of: {names})",
    )


# --------------------------------------------------------------------------- grading


def _llm_provider(session: Session, configs: Sequence[GraderConfig]) -> Any:
    from vally.plugins.capabilities import needs_llm

    wanted = any(needs_llm(session.plugin_class("grader", c.type)) for c in configs)
    if not wanted or session.project is None:
        return None
    from vally.engine.llm import provider_config_from_settings

    settings = session.project.llm
    return session.create(
        "llm_provider",
        settings.provider,
        provider_config_from_settings(settings),
        where=".vally.yaml llm",
    )


def workspace_warnings(
    session: Session, spec: EvalSpec, stimuli: Sequence[Stimulus], source: str
) -> list[str]:
    """One warning per grader that needs the trial workspace, for a run without
    ``--workspace``: those graders cannot run and their results will be errors.

    Args:
        session: The session the graders resolve in.
        spec: The eval spec (its eval-level graders apply to every stimulus).
        stimuli: The stimuli the input trials matched, in input order.
        source: The eval spec as the user named it.
    """
    from vally.plugins.capabilities import needs_workspace

    by_grader: dict[tuple[str, str], list[str]] = {}
    for stimulus in stimuli:
        for config in [*spec.graders, *stimulus.graders]:
            if needs_workspace(session.plugin_class("grader", config.type)):
                names = by_grader.setdefault((config.label, config.type), [])
                if stimulus.name not in names:
                    names.append(stimulus.name)
    return [
        f"grader '{label}' ({kind}) of {source} needs the trial workspace (stimuli: "
        f"{', '.join(names)}); without --workspace it is not run and its results are "
        "errors. Pass --workspace DIR with the trial's files to grade it."
        for (label, kind), names in by_grader.items()
    ]


def _new_record(
    trajectory: Trajectory,
    stimulus: Stimulus,
    loaded: LoadedEval,
    run_id: str,
    trial_index: int,
    grade: GradeResult,
) -> TrialResultRecord:
    from vally.engine.planner import eval_name
    from vally.models.records import TrialResultRecord
    from vally.models.trajectory import utc_now

    name = eval_name(loaded)
    model = trajectory.metadata.model
    now = utc_now()
    return TrialResultRecord(
        run_id=run_id,
        eval_name=name,
        eval_file=str(loaded.source),
        stimulus_name=stimulus.name,
        stimulus=stimulus,
        variant=None,
        model=model,
        trial_index=trial_index,
        trial_id=f"{name}/{stimulus.name}/{model or 'default'}/{trial_index}",
        status="success",
        error=None,
        started_at=trajectory.metadata.started_at or now,
        completed_at=trajectory.metadata.completed_at or now,
        duration_ms=trajectory.metrics.wall_time_ms,
        tags=dict(stimulus.tags),
        grade_result=grade,
        trajectory=trajectory,
    )


def _plugin_paths(specifiers: Sequence[str], spec_dir: Path, cwd: Path) -> list[str]:
    """Relative plugin paths that exist from the working folder are made absolute; others
    resolve from the eval spec's folder."""
    out = []
    for spec in specifiers:
        candidate = cwd / spec
        looks_like_path = spec.endswith(".py") or "/" in spec or spec.startswith(".")
        out.append(str(candidate) if looks_like_path and candidate.exists() else spec)
    return out


def run_grade(opts: GradeOptions, stdin: TextIO) -> int:
    """Run ``vally grade`` over the trials read from ``stdin``; return the exit code."""
    from vally.contracts.events import RunInfo, RunOutcome
    from vally.engine.grading import grade_trial
    from vally.engine.planner import judge_settings, merge_constraints
    from vally.models.trajectory import utc_now
    from vally.plugins.session import Session
    from vally.specs import loading as specs
    from vally.tools.ingest import read_items

    if opts.output not in (None, "jsonl"):
        raise ConfigError(f"--output {opts.output!r} is not supported; the only value is 'jsonl'")
    if opts.threshold is not None and not 0.0 <= opts.threshold <= 1.0:
        raise ConfigError(f"--threshold {opts.threshold} is outside 0..1")
    cwd = Path.cwd()
    spec_path = (cwd / opts.eval_spec).absolute()
    if not spec_path.is_file():
        problem = "is a folder, not a file" if spec_path.is_dir() else "no such file"
        raise ConfigError(
            f"--eval-spec {opts.eval_spec}: {problem} ({spec_path})",
            hint="pass the eval spec file whose graders to apply",
        )
    workspace: Path | None = None
    if opts.workspace:
        workspace = (cwd / opts.workspace).absolute()
        if not workspace.is_dir():
            raise ConfigError(f"--workspace {opts.workspace}: not a folder ({workspace})")
    if stdin.isatty():
        raise ConfigError(
            "vally grade reads trial records from standard input, which is a terminal",
            hint="pipe them in: vally eval -e eval.yaml --output jsonl | vally grade -e "
            "eval.yaml, or vally grade -e eval.yaml < results.jsonl",
        )

    params = {k: str(v) for k, v in parse_key_values(opts.params, flag="--param").items()}
    project, root = specs.find_project(spec_path.parent, params=params)
    session = Session(project, root or cwd)
    if opts.grader_plugins:
        session.load_plugins(
            "grader",
            _plugin_paths(opts.grader_plugins, spec_path.parent, cwd),
            base_dir=spec_path.parent,
        )
    loaded = specs.load_eval_file(spec_path, cli_params=params, project=project)
    spec = loaded.spec
    source = str(opts.eval_spec)
    if opts.stimulus is not None and opts.stimulus not in {s.name for s in spec.stimuli}:
        raise ConfigError(
            f"--stimulus {opts.stimulus!r} is not a stimulus of {source}",
            hint="its stimuli: " + ", ".join(s.name for s in spec.stimuli),
        )

    items = read_items(stdin, source="<stdin>")
    if not items:
        raise ConfigError(
            "no trials on standard input",
            hint="pipe the output of `vally eval --output jsonl` or a results.jsonl file",
        )
    matched = [(item, match_stimulus(item, spec, opts.stimulus, source)) for item in items]

    # Graders are validated and built once per distinct config, before anything runs.
    graders: dict[str, Any] = {}

    def create_grader(config: Any) -> Any:
        key = config.type + ":" + json.dumps(config.config, sort_keys=True, default=str)
        if key not in graders:
            graders[key] = session.create(
                "grader", config.type, config.config, where=f"{source}: grader {config.label!r}"
            )
        return graders[key]

    all_configs = [*spec.graders, *(g for _, s in matched for g in s.graders)]
    for config in all_configs:
        create_grader(config)
    if workspace is None:
        for warning in workspace_warnings(session, spec, [s for _, s in matched], source):
            typer.echo(f"warning: {warning}", err=True)
    llm = _llm_provider(session, all_configs)
    judge = judge_settings(spec, opts.judge_model)
    threshold = opts.threshold if opts.threshold is not None else spec.scoring.threshold

    to_stdout = opts.output == "jsonl"
    session.register_observer(
        session.create(
            "reporter",
            "console",
            {"verbose": opts.verbose, "stream": "stderr" if to_stdout else "stdout"},
        ),
        "console",
    )
    if to_stdout:
        session.register_observer(
            session.create("reporter", "jsonl", {"stdout": True}, where="--output"), "jsonl"
        )
    run = RunInfo(
        run_id=str(uuid.uuid4()),
        command="grade",
        run_dir=None,
        planned_trials=len(matched),
        started_at=utc_now(),
        options={"verbose": opts.verbose},
    )
    emitter = session.emitter
    records: list[TrialResultRecord] = []
    counters: dict[str, int] = {}

    async def grade_all() -> None:
        try:
            for item, stimulus in matched:
                record = await _grade_one(item, stimulus)
                records.append(record)
                emitter.emit("vally_trial_end", run=run, record=record)
        finally:
            if llm is not None:
                with contextlib.suppress(Exception):
                    await llm.aclose()

    async def _grade_one(item: IngestedItem, stimulus: Stimulus) -> TrialResultRecord:
        from vally.contracts.protocols import TrialKey
        from vally.models.records import TrialError, TrialResultRecord

        trajectory = item.trajectory
        original = item.value if isinstance(item.value, TrialResultRecord) else None
        if trajectory is None:
            assert original is not None
            if original.error is not None:
                return original
            error = TrialError(
                phase="grade",
                code=ConfigError.code,
                message="the record holds no trajectory to grade",
            )
            return original.model_copy(update={"status": "error", "error": error})
        if item.format == "atif":
            trajectory = trajectory.model_copy(update={"stimulus": stimulus})
        index = counters.get(stimulus.name, 0)
        counters[stimulus.name] = index + 1
        key = TrialKey(
            original.variant or "" if original else "",
            original.eval_name if original else "",
            stimulus.name,
            (original.model if original else trajectory.metadata.model) or "",
            original.trial_index if original else index,
        )
        emitter.emit("vally_trial_start", run=run, key=key)

        def on_result(result: Any) -> None:
            emitter.emit("vally_grader_result", run=run, key=key, result=result)

        from vally.engine.folder_sandbox import FolderSandbox

        sandbox = FolderSandbox(workspace) if workspace is not None else None
        try:
            grade = await grade_trial(
                trajectory,
                stimulus,
                [*spec.graders, *stimulus.graders],
                create_grader=create_grader,
                sandbox=sandbox,
                spec_dir=loaded.source.parent,
                llm=llm,
                judge=judge,
                weights=spec.scoring.weights,
                threshold=threshold,
                constraints=merge_constraints(spec.constraints, stimulus.constraints),
                on_result=on_result,
            )
        except VallyError as exc:
            error = TrialError(phase="grade", code=exc.code, message=exc.render())
            if original is not None:
                return original.model_copy(
                    update={"status": "error", "error": error, "grade_result": None}
                )
            raise
        if original is not None:
            update: dict[str, Any] = {"grade_result": grade, "stimulus": stimulus}
            if original.error is not None and original.error.phase == "grade":
                update.update({"status": "success", "error": None})
            return original.model_copy(update=update)
        return _new_record(trajectory, stimulus, loaded, run.run_id, index, grade)

    emitter.emit("vally_run_start", run=run)
    cancelled = False
    try:
        asyncio.run(grade_all())
    except KeyboardInterrupt:
        cancelled = True
    emitter.emit("vally_run_end", run=run, outcome=RunOutcome(records, [], cancelled))
    if cancelled:
        return 130
    passed = failed = errored = 0
    for record in records:
        grade_result = record.grade_result
        if record.status != "success" or grade_result is None or grade_result.errored:
            errored += 1
        elif grade_result.passed:
            passed += 1
        else:
            failed += 1
    typer.echo(
        f"Graded {len(records)} trial{'s' if len(records) != 1 else ''}: "
        f"{passed} passed, {failed} failed, {errored} errored",
        err=to_stdout,
    )
    return EXIT_OK if failed == 0 and errored == 0 else EXIT_FAILURE


# --------------------------------------------------------------------------- typer


def grade_command(
    eval_spec: Annotated[
        str, typer.Option("--eval-spec", "-e", help="Eval spec whose graders to apply.")
    ],
    stimulus: Annotated[
        str | None,
        typer.Option(help="Stimulus for ATIF input (needed when the prompt matches several)."),
    ] = None,
    workspace: Annotated[
        str | None,
        typer.Option(
            help="Folder file and command graders work in (used in place, never deleted)."
        ),
    ] = None,
    output: Annotated[
        str | None, typer.Option(help="'jsonl': write the re-graded records to stdout.")
    ] = None,
    judge_model: Annotated[str | None, typer.Option(help="Model for LLM judge graders.")] = None,
    grader_plugin: Annotated[
        list[str] | None, typer.Option(help="Grader plugin to load (repeatable).")
    ] = None,
    verbose: Annotated[bool, typer.Option(help="Show agent output and full evidence.")] = False,
    threshold: Annotated[
        float | None, typer.Option(help="Pass threshold 0..1, overriding the spec's.")
    ] = None,
    param: Annotated[
        list[str] | None, typer.Option(help="Param value KEY=VALUE (repeatable).")
    ] = None,
) -> None:
    """Re-grade saved trials read from standard input."""
    opts = GradeOptions(
        eval_spec=eval_spec,
        stimulus=stimulus,
        workspace=workspace,
        output=output,
        judge_model=judge_model,
        grader_plugins=list(grader_plugin or []),
        verbose=verbose,
        threshold=threshold,
        params=list(param or []),
    )
    try:
        code = run_grade(opts, sys.stdin)
    except VallyError as exc:
        if debug_enabled():
            raise
        fail(exc)
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    """Add ``grade`` to the ``vally`` application."""
    app.command("grade", help="Re-grade saved trials read from standard input.")(grade_command)
