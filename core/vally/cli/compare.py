"""``vally compare``: an LLM judge compares baseline and treatment runs pair by pair."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from vally.cli.common import EXIT_USAGE, parse_key_values, user_errors

if TYPE_CHECKING:
    from vally.models.records import TrialResultRecord
    from vally.models.spec import EvalSpec
    from vally.plugins.session import Session
    from vally.tools.compare import ComparisonResult, PairResult

DEFAULT_JUDGE_TIMEOUT = 120.0


@dataclass
class CompareRequest:
    """Everything ``vally compare`` (or ``experiment run --compare``) was asked to do."""

    experiment_dir: Path | None = None
    baseline: Path | None = None
    treatment: Path | None = None
    baseline_variant: str | None = None
    eval_spec: Path | None = None
    judge_model: str | None = None
    judge_timeout: float | None = None
    judge_reasoning_effort: str | None = None
    judge_provider: str | None = None
    judge_evidence: str = "tools"
    judge_workers: int = 4
    output: Path | None = None
    fail_on_regression: bool = False
    params: dict[str, str] = field(default_factory=dict)
    verbose: bool = False


def _echo(text: str = "") -> None:
    typer.echo(text)


def _fmt(value: float | None, signed: bool = True, digits: int = 2) -> str:
    if value is None:
        return "n/a"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def load_experiment_runs(
    directory: Path, baseline_variant: str | None
) -> tuple[str, dict[str, list[TrialResultRecord]]]:
    """Every variant's records of an experiment output directory, and the baseline's name.

    Raises:
        ConfigError: No variant folders, no recorded baseline, or an unknown baseline.
    """
    from vally.engine.rundir import load_records
    from vally.errors import ConfigError

    if not directory.is_dir():
        problem = "is a file, not a directory" if directory.exists() else "does not exist"
        raise ConfigError(
            f"experiment directory {directory} {problem}",
            hint="pass the timestamped folder written by 'vally experiment run' (or a merged "
            "one); to compare two results files use --baseline and --treatment",
        )
    runs: dict[str, list[TrialResultRecord]] = {}
    for child in sorted(directory.iterdir()):
        if child.is_dir() and (child / "results.jsonl").is_file():
            runs[child.name] = load_records(child)
    if not runs:
        hint = "pass the timestamped experiment run directory (or a merged one)"
        if (directory / "results.jsonl").is_file():
            hint = (
                f"{directory} looks like a 'vally eval' run directory (it holds "
                "results.jsonl); compare two eval runs with --baseline <run-dir> "
                "--treatment <run-dir>"
            )
        raise ConfigError(f"no variant folders with results.jsonl in {directory}", hint=hint)
    recorded = {
        r.experiment.baseline
        for records in runs.values()
        for r in records
        if r.experiment is not None and r.experiment.baseline
    }
    variant_names = {
        r.experiment.variant: name
        for name, records in runs.items()
        for r in records
        if r.experiment is not None
    }
    baseline = baseline_variant
    if baseline is None:
        if len(recorded) != 1:
            raise ConfigError(
                f"cannot tell the baseline variant of {directory} from its records",
                hint="pass --baseline-variant NAME",
            )
        baseline = recorded.pop()
    folder = variant_names.get(baseline, baseline)
    if folder not in runs:
        raise ConfigError(
            f"baseline variant {baseline!r} has no results in {directory}",
            hint="variants found: " + ", ".join(sorted(runs)),
        )
    ordered = {folder: runs[folder], **{k: v for k, v in runs.items() if k != folder}}
    return folder, ordered


def _rubrics(request: CompareRequest) -> dict[str, list[str]] | None:
    if request.eval_spec is None:
        return None
    from vally.specs.loading import find_project, load_eval_file

    project, _ = find_project(request.eval_spec.parent)
    loaded = load_eval_file(request.eval_spec, cli_params=request.params, project=project)
    for warning in ignored_evidence(loaded.spec):
        typer.echo(f"warning: {warning}", err=True)
    return {s.name: list(s.rubric) for s in loaded.spec.stimuli if s.rubric}


UNSUPPORTED_EVIDENCE = ("diff", "golden_patch", "repo")
"""Evidence kinds a spec's judge may ask for that comparisons never deliver."""


def ignored_evidence(spec: EvalSpec) -> list[str]:
    """Warnings for judge graders whose ``evidence`` selects kinds compare ignores: it
    always gives each run's output, timeline and metrics, never workspace diffs, golden
    patches or repository snapshots."""
    warnings = []
    for stimulus in spec.stimuli:
        for grader in [*spec.graders, *stimulus.graders]:
            evidence = grader.config.get("evidence")
            if not isinstance(evidence, list):
                continue
            ignored = [kind for kind in evidence if kind in UNSUPPORTED_EVIDENCE]
            if ignored:
                warnings.append(
                    f"stimulus {stimulus.name!r}: the {grader.type} grader asks for "
                    f"{', '.join(ignored)} evidence; compare ignores it and judges output, "
                    "timeline and metrics only"
                )
    return warnings


def _judge_and_llm(session: Session, request: CompareRequest) -> tuple[Any, Any]:
    from vally.engine.llm import provider_config_from_settings
    from vally.errors import ConfigError
    from vally.plugins.capabilities import is_pairwise

    registration = session.registration("grader", "prompt")
    if not is_pairwise(registration.cls):
        raise ConfigError(
            f"the 'prompt' grader ({registration.provenance.label()}) cannot judge pairs: "
            "its metadata does not declare pairwise=True",
            hint="install a 'prompt' grader whose GraderMetadata declares pairwise=True "
            "and implements judge_pair",
        )
    judge = session.create("grader", "prompt", {}, where="compare judge")
    settings = session.project.llm if session.project is not None else None
    if settings is None:
        from vally.models.project import LLMSettings

        settings = LLMSettings()
    provider = request.judge_provider or settings.provider
    llm = session.create(
        "llm_provider", provider, provider_config_from_settings(settings), where="judge provider"
    )
    return judge, llm


def _print_result(result: ComparisonResult, verbose: bool) -> None:
    judged = len(result.judged)
    matched = len(result.pairing.pairs)
    _echo(f"━━━ {result.treatment} vs {result.baseline} ━━━")
    _echo(f"Judge: {result.judge_model or 'n/a'}   Matched pairs: {matched}")
    if result.pairing.only_baseline or result.pairing.only_treatment:
        _echo(
            f"Unmatched: {len(result.pairing.only_baseline)} only in baseline, "
            f"{len(result.pairing.only_treatment)} only in treatment"
        )
        if verbose:
            for side, keys in (
                ("baseline", result.pairing.only_baseline),
                ("treatment", result.pairing.only_treatment),
            ):
                for key in keys:
                    _echo(f"  only in {side}: {key[0]}/{key[1]} #{key[2]}")
    if result.error:
        _echo(f"Comparison failed: {result.error}")
    if not judged:
        _echo("No statistics available — every matched pair failed")
        _print_failures(result)
        return
    if result.failed:
        failed = len(result.failed)
        _echo(f"⚠ Judged {judged} of {matched} matched pairs — {failed} failed during judging.")
        _echo("    All statistics below — score, CI, grader pass/fail, and metric deltas —")
        _echo(f"    cover only the {judged} judged pairs.")
    rate = result.win_rate
    _echo(
        f"Win rate: {rate.wins} W / {rate.ties} T / {rate.losses} L "
        f"({_fmt((rate.win_rate or 0) * 100, False, 0)}% wins over {rate.total} pairs)"
    )
    score = result.score
    interval = (
        "insufficient data for a CI"
        if score.ci is None
        else f"95% CI [{_fmt(score.ci.low)}, {_fmt(score.ci.high)}]"
    )
    _echo(
        f"Mean score: {_fmt(score.mean)}  {interval}  "
        f"({score.n_stimuli} stimuli, {score.n_pairs} pairs)"
    )
    if result.significant_regression:
        _echo("Significant regression: the whole 95% CI is below zero.")
    if result.mcnemar is not None:
        mc = result.mcnemar
        ties = f", {mc.n_ties} tied stimuli left out" if mc.n_ties else ""
        _echo(
            f"McNemar: {mc.b} pass→fail, {mc.c} fail→pass, "
            f"p = {_fmt(mc.p_value, False, 3)} ({mc.n_units} stimuli{ties})"
        )
    _echo("Metric deltas (treatment - baseline):")
    for delta in result.deltas:
        est = delta.delta
        ci = (
            "insufficient data"
            if est.ci is None
            else f"95% CI [{_fmt(est.ci.low, digits=1)}, {_fmt(est.ci.high, digits=1)}]"
        )
        relative = "" if delta.relative is None else f" ({delta.relative * 100:+.0f}%)"
        flag = "  ⚠ high variance" if delta.high_variance else ""
        _echo(f"  {delta.metric:<13} {_fmt(est.mean, digits=1)}{relative}  {ci}{flag}")
    if verbose:
        for pair in result.results:
            _print_pair(pair)
    _print_failures(result)


def _print_pair(pair: PairResult) -> None:
    key = pair.pair.key
    if pair.failure is not None:
        _echo(f"  {key[0]}/{key[1]} #{key[2]}: failed ({pair.failure.error_class})")
    else:
        _echo(f"  {key[0]}/{key[1]} #{key[2]}: {pair.verdict} ({_fmt(pair.score, digits=1)})")


def _print_failures(result: ComparisonResult) -> None:
    for pair in result.failed:
        failure = pair.failure
        assert failure is not None
        key = pair.pair.key
        _echo(
            f"  ✘ {key[0]}/{key[1]} #{key[2]}: {failure.error_class} after "
            f"{failure.attempts} attempt(s): {failure.message}"
        )
    for pair in result.results:
        for note in pair.cleanup:
            typer.echo(f"warning: {note}", err=True)


async def run_comparisons(
    request: CompareRequest,
    runs: Sequence[tuple[str, list[TrialResultRecord]]],
    session: Session,
) -> list[ComparisonResult]:
    """Compare each run after the first (the baseline) with the first."""
    from vally.contracts.protocols import JudgeSettings
    from vally.tools import compare

    judge, llm = _judge_and_llm(session, request)
    settings = JudgeSettings(
        model=request.judge_model or os.environ.get("EVAL_JUDGE_MODEL") or None,
        reasoning_effort=request.judge_reasoning_effort
        or os.environ.get("EVAL_JUDGE_REASONING_EFFORT")
        or None,
        provider=request.judge_provider,
        timeout=request.judge_timeout or DEFAULT_JUDGE_TIMEOUT,
    )
    options = compare.CompareOptions(
        judge=settings,
        llm=llm,
        rubric_override=_rubrics(request),
        delivery="inline" if request.judge_evidence == "inline" else "tools",
        judge_workers=request.judge_workers,
    )
    (baseline_name, baseline), *treatments = runs
    results = []
    try:
        for name, records in treatments:
            try:
                result = await compare.compare_runs(
                    baseline_name, baseline, name, records, judge, options
                )
            except Exception as exc:  # a comparison that errors is reported, not raised
                message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
                pairing = compare.Pairing([], [], [])
                result = compare.summarize(
                    baseline_name, name, pairing, [], settings.model, error=message
                )
            results.append(result)
    finally:
        with contextlib.suppress(Exception):
            await llm.aclose()
    return results


def check_output_file(path: Path) -> None:
    """Fail before any judging when ``--output`` cannot be written.

    Raises:
        OutputError: ``path`` is a directory, or its folder is a file or cannot be created.
    """
    from vally.errors import OutputError

    if path.is_dir():
        raise OutputError(
            f"--output {path} is a directory", hint="pass a file path, e.g. comparison.jsonl"
        )
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise OutputError(
                    f"--output {path} cannot be written: {parent} is a file",
                    hint="pass another --output path",
                )
            break
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(
            f"--output {path}: cannot create {path.parent}: {exc.strerror or exc}",
            hint="pass a writable --output path",
        ) from exc


def execute(request: CompareRequest, session: Session | None = None) -> int:
    """Run a comparison request, print it, write ``--output``; return the exit code."""
    from vally.engine.rundir import load_records, write_text_atomic
    from vally.errors import ConfigError, OutputError
    from vally.plugins.session import Session
    from vally.specs.loading import find_project
    from vally.tools import compare

    if session is None:
        project, root = find_project(Path.cwd())
        session = Session(project=project, project_root=root)
    if request.experiment_dir is not None:
        _baseline, runs = load_experiment_runs(request.experiment_dir, request.baseline_variant)
        ordered = list(runs.items())
    else:
        assert request.baseline is not None and request.treatment is not None
        ordered = [
            (str(request.baseline), load_records(request.baseline)),
            (str(request.treatment), load_records(request.treatment)),
        ]
    if len(ordered) < 2:
        raise ConfigError("nothing to compare: only the baseline has results")
    for name, records in ordered:
        if not records:
            raise ConfigError(
                f"no trial records in {name}",
                hint="pass a results.jsonl (or its run directory) that holds finished trials",
            )
    if request.output is not None:
        check_output_file(request.output)
    results = asyncio.run(run_comparisons(request, ordered, session))
    for result in results:
        _print_result(result, request.verbose)
        _echo()
    if request.output is not None:
        lines = "".join(
            json.dumps(compare.to_record(r), ensure_ascii=False) + "\n" for r in results
        )
        try:
            write_text_atomic(request.output, lines)
        except OSError as exc:
            raise OutputError(
                f"cannot write --output {request.output}: {exc.strerror or exc}",
                hint="the comparison printed above is complete; pass a writable --output path",
            ) from exc
    return compare.exit_code(results, fail_on_regression=request.fail_on_regression)


def compare_command(
    experiment_dir: Annotated[
        Path | None, typer.Argument(help="Experiment output directory (experiment mode).")
    ] = None,
    baseline: Annotated[
        Path | None, typer.Option("--baseline", help="Baseline run directory or JSONL file.")
    ] = None,
    treatment: Annotated[
        Path | None, typer.Option("--treatment", help="Treatment run directory or JSONL file.")
    ] = None,
    baseline_variant: Annotated[
        str | None, typer.Option("--baseline-variant", help="Override the recorded baseline.")
    ] = None,
    eval_spec: Annotated[
        Path | None,
        typer.Option("--eval-spec", "-e", help="Eval spec whose rubrics override the records'."),
    ] = None,
    judge_model: Annotated[str | None, typer.Option("--judge-model")] = None,
    judge_timeout: Annotated[
        str | None, typer.Option("--judge-timeout", help="Per judge turn (default 2m).")
    ] = None,
    judge_reasoning_effort: Annotated[str | None, typer.Option("--judge-reasoning-effort")] = None,
    judge_evidence: Annotated[
        str, typer.Option("--judge-evidence", help="tools (default) or inline.")
    ] = "tools",
    judge_workers: Annotated[
        int, typer.Option("--judge-workers", min=1, help="Pairs judged in parallel.")
    ] = 4,
    output: Annotated[
        Path | None, typer.Option("--output", help="Write comparison records (JSONL).")
    ] = None,
    fail_on_regression: Annotated[bool, typer.Option("--fail-on-regression")] = False,
    param: Annotated[list[str] | None, typer.Option("--param", help="KEY=value")] = None,
    verbose: Annotated[bool, typer.Option("--verbose")] = False,
) -> None:
    """Compare a treatment run against a baseline with an LLM judge (both orders)."""
    two_run = baseline is not None or treatment is not None
    if experiment_dir is not None and two_run:
        typer.echo(
            "error: give an experiment directory or --baseline/--treatment, not both", err=True
        )
        raise typer.Exit(EXIT_USAGE)
    if experiment_dir is None and (baseline is None or treatment is None):
        typer.echo(
            "error: give an experiment directory, or both --baseline and --treatment", err=True
        )
        raise typer.Exit(EXIT_USAGE)
    if judge_evidence not in ("tools", "inline"):
        typer.echo("error: --judge-evidence must be 'tools' or 'inline'", err=True)
        raise typer.Exit(EXIT_USAGE)
    with user_errors():
        from vally.errors import ConfigError
        from vally.models.durations import parse_duration

        if judge_reasoning_effort is not None and not judge_reasoning_effort.strip():
            raise ConfigError("--judge-reasoning-effort must not be empty")
        timeout = parse_duration(judge_timeout, field="--judge-timeout") if judge_timeout else None
        if timeout is not None and timeout <= 0:
            raise ConfigError(
                f"--judge-timeout must be longer than zero, got {judge_timeout!r}",
                hint="write e.g. --judge-timeout 2m",
            )
        request = CompareRequest(
            experiment_dir=experiment_dir,
            baseline=baseline,
            treatment=treatment,
            baseline_variant=baseline_variant,
            eval_spec=eval_spec,
            judge_model=judge_model,
            judge_timeout=timeout,
            judge_reasoning_effort=judge_reasoning_effort,
            judge_evidence=judge_evidence,
            judge_workers=judge_workers,
            output=output,
            fail_on_regression=fail_on_regression,
            params={k: str(v) for k, v in parse_key_values(param or [], flag="--param").items()},
            verbose=verbose,
        )
        code = execute(request)
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    """Add ``vally compare`` to the application."""
    app.command("compare")(compare_command)
