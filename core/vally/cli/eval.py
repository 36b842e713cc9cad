"""``vally eval``: run stimuli through an agent, grade them, write the results.

The command parses its flags into an :class:`~vally.engine.evals.EvalRequest`, runs it
through the run API and turns the result into an exit code: 0 when the run completed
(whatever the verdicts), 1 on an operational error (bad spec, unknown plugin, setup,
executor, grader or output failure) or, with ``--require-pass``, a failing verdict; 3 when a
``--max-cost``/``--max-tokens`` budget stopped it before every trial started; 130 when
interrupted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from vally.cli import options as o
from vally.cli.common import (
    EXIT_BUDGET,
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    debug_enabled,
    fail,
    kept_to_the_end,
    report_judge_cache,
    report_observer_failures,
    report_tracebacks,
    say,
)
from vally.cli.options import opt, request_from, switch
from vally.errors import VallyError

if TYPE_CHECKING:
    from pathlib import Path

    from vally.engine.evals import EvalRequest
    from vally.engine.run import PreparedRun
    from vally.engine.trials.run_engine import RunResult
    from vally.models.spec import EvalSpec


def _nothing_to_run(prepared: PreparedRun) -> int:
    for planned in prepared.plan.evals:
        reason = "runs: 0 (lint only)" if planned.runs == 0 else "no stimulus matched the filters"
        say(f"{planned.name}: nothing to run, {reason}.")
        if planned.runs != 0:
            tags = existing_tags(planned.loaded.spec)
            say(f"  tags in {planned.name}: {', '.join(tags) if tags else 'none'}")
    say("Specs are valid; nothing was executed.")
    return EXIT_OK


def existing_tags(spec: EvalSpec) -> list[str]:
    """Every ``key=value`` tag the eval's stimuli carry (the eval's own included), sorted."""
    from vally.specs.loading import stimulus_tags

    found = {f"{k}={v}" for s in spec.stimuli for k, v in stimulus_tags(spec, s).items()}
    return sorted(found)


def exit_code(result: RunResult, run_dir: Path, *, require_pass: bool) -> int:
    """The exit code of a finished eval run, saying why on standard error."""
    for failure in result.failures:
        say(f"error: {failure}")
    if result.cancelled:
        say(f"Interrupted: {len(result.records)} finished trial(s) written to {run_dir}")
        return EXIT_INTERRUPTED
    if result.error is not None:
        fail(result.error)
    errored = [r for r in result.records if r.status == "error"] if result.count("error") else []
    if errored:
        report_tracebacks(errored)
        say(f"{len(errored)} trial(s) failed to run (status: error); see {run_dir}")
        return EXIT_FAILURE
    if result.failures:
        return EXIT_FAILURE
    if result.budget_stops:
        for line in result.budget_stops:
            say(f"{line}; continue with --resume {run_dir} and a larger budget")
        return EXIT_BUDGET
    if require_pass and result.verdict_failed:
        failed = ", ".join(s.eval_name for s in result.summaries if s.verdict == "fail")
        say(f"--require-pass: the verdict of {failed} failed")
        return EXIT_FAILURE
    return EXIT_OK


def run_eval_command(opts: EvalRequest) -> int:
    """Run ``vally eval`` with ``opts`` and return the exit code.

    Raises:
        VallyError: A configuration, plugin or output error (the CLI prints it, exit 1).
    """
    from vally.engine.evals import eval_run_dir, prepare_eval

    with kept_to_the_end():  # the spec, the plan and the plugins
        prepared, output_dir = prepare_eval(opts)
    if prepared.plan.lint_only:
        return _nothing_to_run(prepared)
    run_dir = eval_run_dir(prepared, opts, output_dir)
    if opts.resume:
        say(
            f"Resuming {run_dir}: {len(prepared.reused)} finished trial(s) kept, "
            f"{len(prepared.trials)} to run"
        )

    def interrupted() -> None:
        say("Interrupted: stopping the running trials and writing what finished...")

    result = prepared.execute(run_dir, on_interrupt=interrupted)
    report_observer_failures(prepared)
    report_judge_cache(prepared)
    return exit_code(result, run_dir, require_pass=opts.require_pass)


EvalSpecs = Annotated[
    list[str] | None,
    opt("PATH", "Eval spec file (repeatable).", "--eval-spec", "-e", show_default=False),
]
Suite = Annotated[str | None, opt("NAME", "Run a named suite of .vally.yaml.")]
Tags = Annotated[
    list[str] | None, opt("KEY=VALUE[,VALUE]", "Filter stimuli by tag (repeatable).", "--tag")
]
SkillDirs = Annotated[
    list[str] | None, opt("DIR", "Load every skill in this folder for the run.", "--skill-dir")
]
WorkDir = Annotated[str | None, opt("DIR", "Run as if started in this folder (default: cwd).")]
Model = Annotated[
    str | None, opt("MODEL[,MODEL]", "Model to run; a comma list runs once per model.")
]
Timeout = Annotated[
    str | None, opt("DURATION", "Per-trial timeout, e.g. 5m (default: spec, then 2m).")
]
Threshold = Annotated[float | None, opt("0..1", "Pass threshold 0..1, overriding the spec's.")]
JudgeModel = Annotated[str | None, opt("MODEL", "Model for LLM judge graders.")]
OutputDir = Annotated[
    str | None,
    opt("DIR", "Parent folder of run folders (default: paths.results or ./vally-results)."),
]
SkipGrade = Annotated[bool, switch("--skip-grade", "Execute without grading.")]
Runs = Annotated[int | None, opt("N", "Trials per stimulus, overriding the spec.")]
Workspace = Annotated[str | None, opt("DIR", "Keep trial workspaces under this folder.")]
MaxRetries = Annotated[int, opt("N", "Retry a trial up to N times when its setup or agent fails.")]
KeepSessionLogs = Annotated[
    bool,
    switch(
        "--keep-executor-session-logs",
        "Accepted for compatibility: session logs are always kept.",
        hidden=True,
    ),
]


def eval_command(
    eval_specs: EvalSpecs = None,
    suite: Suite = None,
    tags: Tags = None,
    skill_dirs: SkillDirs = None,
    work_dir: WorkDir = None,
    model: Model = None,
    timeout: Timeout = None,
    threshold: Threshold = None,
    judge_model: JudgeModel = None,
    grader_plugins: o.GraderPlugins = None,
    executor_plugins: o.ExecutorPlugins = None,
    eval_plugin: o.EvalPlugin = None,
    output_dir: OutputDir = None,
    output: o.Output = None,
    skip_grade: SkipGrade = False,
    workers: o.Workers = None,
    runs: Runs = None,
    require_pass: o.RequirePass = False,
    junit: o.Junit = False,
    junit_file: o.JunitFile = None,
    junit_cases: o.JunitCases = None,
    workspace: Workspace = None,
    params: o.Params = None,
    stimuli: o.Stimuli = None,
    backend: o.Backend = None,
    backend_args: o.BackendArgs = None,
    runner: o.Runner = None,
    runner_args: o.RunnerArgs = None,
    ray_address: o.RayAddress = None,
    reporter_plugins: o.ReporterPlugins = None,
    max_retries: MaxRetries = 0,
    max_cost: o.MaxCost = None,
    max_tokens: o.MaxTokens = None,
    no_cache: o.NoCache = False,
    resume: o.Resume = None,
    retry_errors: o.RetryErrors = False,
    keep_executor_session_logs: KeepSessionLogs = False,
    otlp_endpoint: o.OtlpEndpoint = None,
    trace: o.Trace = False,
    verbose: o.Verbose = False,
    quiet: o.Quiet = False,
) -> None:
    """Run stimuli through an agent, grade them and write the results."""
    with kept_to_the_end():  # the run engine's modules
        from vally.engine.evals import EvalRequest

    opts = request_from(EvalRequest, locals())
    try:
        code = run_eval_command(opts)
    except VallyError as exc:
        if debug_enabled():
            raise
        fail(exc)
    except KeyboardInterrupt:  # interrupted before the run started
        say("Interrupted.")
        code = EXIT_INTERRUPTED
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    """Add ``eval`` to the ``vally`` application."""
    app.command("eval", help="Run stimuli through an agent, grade them, write the results.")(
        eval_command
    )
