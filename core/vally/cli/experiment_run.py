"""What ``vally experiment run`` and ``vally experiment merge`` do once their flags are
parsed: run or merge through the library, print the dry run, the comparison and why the
command exits as it does."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import typer

from vally.cli.common import EXIT_BUDGET, EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK
from vally.errors import VallyError

if TYPE_CHECKING:
    from pathlib import Path

    from vally.engine.experiments import ExperimentRequest, ExperimentSetup
    from vally.engine.trials.run_engine import RunResult
    from vally.models.records import RunSummaryRecord


def _echo(message: str = "", *, err: bool = False) -> None:
    typer.echo(message, err=err)


def print_dry_run(setup: ExperimentSetup) -> None:
    """Print the resolved plan (reference format) without executing anything."""
    from vally.engine.planning.planner import eval_name
    from vally.specs.selection import display_path

    resolved, plan = setup.resolved, setup.prepared.plan
    _echo(f"Experiment: {resolved.name}")
    _echo(f"Baseline:   {resolved.baseline}")
    _echo(f"Plans:      {len(resolved.evals)}")
    per_variant: dict[str, int] = {}
    for trial in plan.trials:
        per_variant[trial.key.variant] = per_variant.get(trial.key.variant, 0) + 1
    for variant in resolved.variants:
        suffix = " (baseline)" if variant == resolved.baseline else ""
        _echo()
        _echo(f"── {variant}{suffix} ──")
        for item in resolved.for_variant(variant):
            _echo(f"  Eval:        {eval_name(item.loaded)}")
            _echo(f"  File:        {display_path(item.loaded.source, setup.cwd)}")
            _echo(f"  Model:       {item.loaded.spec.defaults.model or 'default'}")
            _echo(f"  Config hash: {item.config_hash}")
            _echo(f"  Eval hash:   {item.eval_hash}")
        _echo(f"  Trials:      {per_variant.get(variant, 0)}")
    _echo()
    if setup.shard is not None:
        _echo(
            f"Shard {setup.shard.label} ({setup.strategy}): {len(setup.prepared.trials)} of "
            f"{len(plan.trials)} planned trial(s)"
        )
    else:
        _echo(f"Planned trials: {len(plan.trials)}")
    _echo("Dry run: nothing was executed.")


def _failed_verdicts(summaries: Sequence[RunSummaryRecord]) -> list[str]:
    return [f"{s.variant}/{s.eval_name}" for s in summaries if s.verdict == "fail"]


def _run_compare(setup: ExperimentSetup, opts: ExperimentRequest, run_dir: Path) -> int:
    from vally.comparison.experiment_judge import comparison_judge
    from vally.comparison.run import CompareRequest, execute
    from vally.models.durations import parse_duration

    settings, conflicts = comparison_judge(
        setup.resolved,
        {
            "judge_model": opts.judge_model,
            "judge_reasoning_effort": opts.judge_reasoning_effort,
            "judge_timeout": opts.judge_timeout,
        },
    )
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
        no_cache=opts.no_cache,
    )
    _echo()
    _echo("Comparison (LLM-judged, baseline vs each variant):")
    try:
        return execute(request, setup.prepared.request.session)
    except VallyError as exc:
        _echo(f"Comparison failed: {exc.render()}", err=True)
        return EXIT_FAILURE


def _decide(setup: ExperimentSetup, run_dir: Path) -> int:
    """Decide every variant against the baseline by the experiment's promotion rules:
    print the graded comparisons and the verdicts, write ``comparison.jsonl`` and the
    report's section; 1 when a variant is held (or cannot be decided)."""
    from vally.comparison.experiment_decisions import decide_experiment

    rules = setup.experiment.promotion
    assert rules is not None
    _echo()
    try:
        return decide_experiment(run_dir, setup.resolved.baseline, rules, echo=_echo)
    except VallyError as exc:
        _echo(f"Promotion rules could not be applied: {exc.render()}", err=True)
        return EXIT_FAILURE


def _exit_code(
    opts: ExperimentRequest, setup: ExperimentSetup, result: RunResult, run_dir: Path
) -> int:
    from vally.cli.eval import report_judge_cache, report_observer_failures, report_tracebacks

    report_observer_failures(setup.prepared)
    report_judge_cache(setup.prepared)
    _echo(f"Results: {run_dir}")
    for error in result.failures + result.missing_outputs:
        _echo(f"error: {error}", err=True)
    if result.error is not None:
        _echo(f"error: {result.error.render()}", err=True)
    if result.cancelled:
        _echo(
            f"Interrupted: {len(result.records)} finished trial(s) written to {run_dir}", err=True
        )
        return EXIT_INTERRUPTED
    code = EXIT_FAILURE if result.errored else EXIT_OK
    errored = [r for r in result.records if r.status == "error"] if result.count("error") else []
    if errored:
        report_tracebacks(errored)
        _echo(f"{len(errored)} trial(s) failed to run (status: error); see {run_dir}", err=True)
    for line in result.budget_stops:
        _echo(f"{line}; continue with --resume {run_dir} and a larger budget", err=True)
    if result.budget_stops and code == EXIT_OK:
        code = EXIT_BUDGET
    failed = _failed_verdicts(result.summaries)
    if opts.require_pass and failed:
        what = "partial verdict" if setup.shard is not None else "verdict"
        _echo(f"--require-pass: the {what} of {', '.join(failed)} failed", err=True)
        code = EXIT_FAILURE
    if setup.experiment.promotion is not None:
        if setup.shard is not None:
            _echo(
                "Promotion rules: after 'vally experiment merge', decide the merged run with "
                f"'vally compare MERGED_DIR --rules {setup.path.name}'."
            )
        elif len(setup.resolved.variants) < 2:
            _echo("Promotion rules skipped: only one variant ran (--variant).")
        elif _decide(setup, run_dir) != EXIT_OK:
            code = EXIT_FAILURE
    if opts.compare:
        if setup.shard is not None:
            _echo("Comparison skipped: sharded runs are compared after 'vally experiment merge'.")
        elif len(setup.resolved.variants) < 2:
            _echo("Comparison skipped: only one variant ran (--variant); nothing to compare.")
        elif _run_compare(setup, opts, run_dir) != EXIT_OK:
            code = EXIT_FAILURE
    return code


def run_experiment_command(opts: ExperimentRequest) -> int:
    """Run ``vally experiment run`` with ``opts`` and return the exit code.

    Raises:
        VallyError: A configuration, plugin, planning or output error (exit 1).
    """
    from vally.engine.experiments import (
        execute_experiment,
        experiment_run_dir,
        prepare_experiment,
    )

    setup = prepare_experiment(opts)
    if opts.dry_run:
        print_dry_run(setup)
        return EXIT_OK
    run_dir = experiment_run_dir(opts, setup)
    prepared = setup.prepared
    gate = None
    if opts.until_decided:
        from vally.tools.sequential_gate import SequentialGate

        gate = SequentialGate(setup.resolved.baseline, prepared.trials)
        prepared.request.gate = gate
    shard = f", shard {setup.shard.label} ({setup.strategy})" if setup.shard else ""
    _echo(
        f"Experiment {setup.resolved.name}: {len(setup.resolved.variants)} variant(s), "
        f"{len(prepared.trials)} trial(s), {prepared.workers} worker(s){shard}"
    )
    if opts.resume:
        _echo(
            f"Resuming {run_dir}: {len(prepared.reused)} finished trial(s) kept, "
            f"{len(prepared.trials)} to run"
        )
    result = execute_experiment(setup, run_dir)
    for line in gate.lines() if gate is not None else []:
        _echo(line)
    return _exit_code(opts, setup, result, run_dir)


def merge_command_main(
    shard_dirs: Sequence[str], output_dir: str, *, require_pass: bool, otlp_endpoint: str | None
) -> int:
    """Run ``vally experiment merge`` and return the exit code.

    Raises:
        VallyError: A shard-validation or required output-write error (exit 1).
    """
    from vally.engine.shards.merge import MergeRequest, merge, read_shards

    request = MergeRequest(shard_dirs, output_dir, otlp_endpoint=otlp_endpoint)
    shards = read_shards(request)
    trials = sum(shard.trials for shard in shards)
    _echo(f"Merged {len(shards)} shard(s) of run {shards[0].manifest['runId']}: {trials} trial(s)")
    result = merge(request, shards)
    for warning in result.warnings:
        _echo(f"warning: {warning}", err=True)
    _echo(f"Merged output: {result.target}")
    code = EXIT_OK
    if result.unsuccessful:
        first = next(iter(result.unsuccessful))
        _echo(
            f"{sum(result.unsuccessful.values())} trial(s) of the shards failed to run "
            f"(status: {first}); the merged run reports them as errors",
            err=True,
        )
        code = EXIT_FAILURE
    failed = _failed_verdicts(result.summaries)
    if require_pass and failed:
        _echo(f"--require-pass: the merged verdict of {', '.join(failed)} failed", err=True)
        code = EXIT_FAILURE
    return code
