"""What ``vally experiment run`` and ``vally experiment merge`` do once their flags are
parsed: run or merge through the library, print the dry run and why the command exits as it
does. The ``--until-decided`` gate and the decision on the variants (promotion rules,
``--compare``) come from hook plugins (:class:`vally.ExperimentHooks`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import typer

from vally import (
    EXIT_BUDGET,
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    display_path,
    eval_name,
    report_judge_cache,
    report_observer_failures,
    report_tracebacks,
)

if TYPE_CHECKING:
    from pathlib import Path

    from vally import (
        ExperimentGate,
        ExperimentHooks,
        ExperimentRequest,
        ExperimentSetup,
        RunResult,
        RunSummaryRecord,
    )


_RECORDS_ON_STDOUT = [False]
"""Whether standard output carries the trial records (``--output jsonl``): then every
message goes to standard error."""


def _echo(message: str = "", *, err: bool = False) -> None:
    typer.echo(message, err=err or _RECORDS_ON_STDOUT[0])


def print_dry_run(setup: ExperimentSetup) -> None:
    """Print the resolved plan (reference format) without executing anything."""
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


def _decides(opts: ExperimentRequest, setup: ExperimentSetup) -> bool:
    """Whether the run ends with a hook plugin deciding its variants: the experiment file
    has promotion rules or ``--compare`` was given, and an unsharded run of two or more
    variants is there to decide."""
    asked = setup.experiment.promotion is not None or opts.compare
    return asked and setup.shard is None and len(setup.resolved.variants) > 1


def _prepare_hooks(
    opts: ExperimentRequest, setup: ExperimentSetup
) -> tuple[ExperimentHooks, ExperimentGate | None]:
    """The run's hook plugins, checked before any trial starts, and the ``--until-decided``
    gate (set on the run).

    Raises:
        PluginError: No hook plugin provides what the run asks for, or one is broken.
    """
    from vally import ExperimentHooks

    prepared = setup.prepared
    hooks = ExperimentHooks(prepared.request.session)
    if _decides(opts, setup):
        promotion = setup.experiment.promotion is not None
        what = " and ".join(["the promotion: section"] * promotion + ["--compare"] * opts.compare)
        hooks.require("vally_experiment_decide", what, where=setup.path if promotion else None)
    gate = None
    if opts.until_decided:
        gate = prepared.request.gate = hooks.gate(setup.resolved.baseline, prepared.trials)
    return hooks, gate


def _skipped_decisions(opts: ExperimentRequest, setup: ExperimentSetup) -> list[str]:
    """Why the promotion rules and ``--compare`` are not applied to a sharded run or a run
    of one variant."""
    lines = []
    sharded = setup.shard is not None
    if setup.experiment.promotion is not None:
        lines.append(
            "Promotion rules: after 'vally experiment merge', decide the merged run with "
            f"'vally compare MERGED_DIR --rules {setup.path.name}'."
            if sharded
            else "Promotion rules skipped: only one variant ran (--variant)."
        )
    if opts.compare:
        lines.append(
            "Comparison skipped: sharded runs are compared after 'vally experiment merge'."
            if sharded
            else "Comparison skipped: only one variant ran (--variant); nothing to compare."
        )
    return lines


def _decide(
    hooks: ExperimentHooks, opts: ExperimentRequest, setup: ExperimentSetup, run_dir: Path
) -> int:
    """The hook plugins' decision on the finished run's variants: its exit code."""
    from vally import FinishedExperiment

    experiment = FinishedExperiment(
        run_dir=run_dir,
        baseline=setup.resolved.baseline,
        promotion=setup.experiment.promotion,
        request=opts,
        evals=[item.loaded for item in setup.resolved.evals],
        params=setup.params,
        session=setup.prepared.request.session,
    )
    return hooks.decide(experiment)


def _exit_code(
    opts: ExperimentRequest,
    setup: ExperimentSetup,
    result: RunResult,
    run_dir: Path,
    hooks: ExperimentHooks,
) -> int:
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
    if _decides(opts, setup):
        if _decide(hooks, opts, setup, run_dir) != EXIT_OK:
            code = EXIT_FAILURE
    else:
        for line in _skipped_decisions(opts, setup):
            _echo(line)
    return code


def run_experiment_command(opts: ExperimentRequest) -> int:
    """Run ``vally experiment run`` with ``opts`` and return the exit code.

    Raises:
        VallyError: A configuration, plugin, planning or output error (exit 1).
    """
    # The run engine is imported here, not with the module: a merge needs none of it.
    from vally import execute_experiment, experiment_run_dir, prepare_experiment

    _RECORDS_ON_STDOUT[0] = opts.output == "jsonl" and not opts.dry_run
    setup = prepare_experiment(opts)
    if opts.dry_run:
        print_dry_run(setup)
        return EXIT_OK
    hooks, gate = _prepare_hooks(opts, setup)
    run_dir = experiment_run_dir(opts, setup)
    prepared = setup.prepared
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
    return _exit_code(opts, setup, result, run_dir, hooks)


def merge_command_main(
    shard_dirs: Sequence[str],
    output_dir: str,
    *,
    require_pass: bool,
    otlp_endpoint: str | None,
    trace: bool = False,
) -> int:
    """Run ``vally experiment merge`` and return the exit code.

    Raises:
        VallyError: A shard-validation or required output-write error (exit 1).
    """
    from vally_experiment.merge import MergeRequest, merge, read_shards

    request = MergeRequest(shard_dirs, output_dir, otlp_endpoint=otlp_endpoint, trace=trace)
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
