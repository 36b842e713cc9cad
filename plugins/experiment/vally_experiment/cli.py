"""``vally experiment run`` and ``vally experiment merge``.

``run`` parses its flags into an :class:`~vally.ExperimentRequest` and runs it through the
run API (every variant x eval x stimulus x model x trial in one worker pool); ``merge``
reconciles the shard folders of a sharded run (:mod:`vally_experiment.merge`).

Exit codes: 0 when the run completed (whatever the verdicts); 1 on a planning, execution,
grading, configuration, cleanup or required-output error, with ``--require-pass`` when a
verdict failed, and with ``--compare`` when a variant could not be fully compared;
3 when a ``--max-cost``/``--max-tokens`` budget stopped a variant before all its trials
started (and nothing else failed); 130 when interrupted.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Annotated

import typer

from vally import cli_options as o, command_group, user_errors

experiment_app = command_group(
    "experiment", "Run an eval set across variants (A/B experiments) and merge sharded runs."
)


def _guarded(run: Callable[[], int]) -> None:
    with user_errors():
        code = run()
    sys.stdout.flush()
    raise typer.Exit(code)


ExperimentFileArg = Annotated[
    str, typer.Argument(metavar="EXPERIMENT_FILE", help="Path to the experiment YAML file.")
]
Variant = Annotated[str | None, o.opt("NAME", "Run only the named variant.")]
EvalFilters = Annotated[
    list[str] | None,
    o.opt(
        "PATTERN",
        "Run only declared evals matching this path/glob (repeatable, case-sensitive; "
        "each must match).",
        "--eval-filter",
    ),
]
OutputDir = Annotated[
    str | None, o.opt("DIR", "Output folder (default ./vally-experiment-results).")
]
Shard = Annotated[str | None, o.opt("I/N", "Run only shard i of n (needs --run-id).")]
RunId = Annotated[str | None, o.opt("ID", "Stable run id (default: a new UUID).")]
ShardStrategy = Annotated[
    str | None, o.opt("SPEC", "round-robin (default), by-stimulus, or a module.")
]
Workspace = Annotated[
    str | None, o.opt("DIR", "Keep agent workspaces here, keyed by variant/stimulus.")
]
DryRun = Annotated[bool, o.switch("--dry-run", "Print the resolved plan without executing.")]
Compare = Annotated[
    bool, o.switch("--compare", "Compare each variant with the baseline afterwards.")
]
JudgeModel = Annotated[str | None, o.opt("MODEL", "Comparison judge model (needs --compare).")]
JudgeTimeout = Annotated[
    str | None, o.opt("DURATION", "Comparison judge timeout (needs --compare).")
]
UntilDecided = Annotated[
    bool,
    o.switch(
        "--until-decided",
        "Stop each variant's trials once an anytime-valid test decides it against the baseline.",
    ),
]
JudgeEffort = Annotated[
    str | None, o.opt("LEVEL", "Comparison judge reasoning effort (needs --compare).")
]


@experiment_app.command("run")
def run_command(
    experiment_file: ExperimentFileArg,
    variant: Variant = None,
    eval_filters: EvalFilters = None,
    output_dir: OutputDir = None,
    workers: o.Workers = None,
    backend: o.Backend = None,
    backend_args: o.BackendArgs = None,
    runner: o.Runner = None,
    runner_args: o.RunnerArgs = None,
    ray_address: o.RayAddress = None,
    shard: Shard = None,
    run_id: RunId = None,
    shard_strategy: ShardStrategy = None,
    params: o.Params = None,
    stimuli: o.Stimuli = None,
    grader_plugins: o.GraderPlugins = None,
    executor_plugins: o.ExecutorPlugins = None,
    reporter_plugins: o.ReporterPlugins = None,
    eval_plugin: o.EvalPlugin = None,
    workspace: Workspace = None,
    dry_run: DryRun = False,
    max_cost: o.MaxCost = None,
    max_tokens: o.MaxTokens = None,
    no_cache: o.NoCache = False,
    resume: o.Resume = None,
    retry_errors: o.RetryErrors = False,
    require_pass: o.RequirePass = False,
    output: o.Output = None,
    junit: o.Junit = False,
    junit_file: o.JunitFile = None,
    junit_cases: o.JunitCases = None,
    otlp_endpoint: o.OtlpEndpoint = None,
    trace: o.Trace = False,
    verbose: o.Verbose = False,
    quiet: o.Quiet = False,
    compare: Compare = False,
    judge_model: JudgeModel = None,
    judge_timeout: JudgeTimeout = None,
    judge_reasoning_effort: JudgeEffort = None,
    until_decided: UntilDecided = False,
) -> None:
    """Run the declared eval set across every variant of the experiment file."""
    from vally import ExperimentRequest
    from vally_experiment.commands import run_experiment_command

    opts = o.request_from(ExperimentRequest, locals())
    _guarded(lambda: run_experiment_command(opts))


ShardDirs = Annotated[
    list[str],
    typer.Argument(metavar="SHARD_DIR", help="Every shard folder of the run (one or more)."),
]
MergeOutput = Annotated[str, o.opt("PATH", "Folder for the merged output.", "--output-dir", "-o")]


@experiment_app.command("merge")
def merge_command(
    shard_dirs: ShardDirs,
    output_dir: MergeOutput,
    require_pass: o.RequirePass = False,
    otlp_endpoint: o.OtlpEndpoint = None,
    trace: o.Trace = False,
) -> None:
    """Reconcile the shard directories of a sharded run into one result and report."""
    from vally_experiment.commands import merge_command_main

    _guarded(
        lambda: merge_command_main(
            shard_dirs,
            output_dir,
            require_pass=require_pass,
            otlp_endpoint=otlp_endpoint,
            trace=trace,
        )
    )


def register(app: typer.Typer) -> None:
    """Add ``experiment`` (``run`` and ``merge``) to the ``vally`` application."""
    app.add_typer(experiment_app, name="experiment")
