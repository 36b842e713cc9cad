"""``vally compare``: compare a treatment run with a baseline, case by case from their
graded records (no model), and pair by pair through an LLM judge when one is configured.

A ``vally.cli`` entry point (:func:`register`) that the CLI mounts like any installed command
extension. The work is done by :func:`vally_compare.run.execute`, imported when the command
runs; this module parses the flags. ``CompareRequest`` and ``execute`` are re-exported here
for callers that import them from the command.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any

import typer

from vally import cli_options, user_errors

opt, switch = cli_options.opt, cli_options.switch

__all__ = ["compare_command", "register"]

EXIT_USAGE = 2
"""The exit code of a usage error (as every vally command)."""


def __getattr__(name: str) -> Any:
    """``CompareRequest`` and ``execute``, imported on first use (CLI start-up stays light)."""
    if name in ("CompareRequest", "execute"):
        from vally_compare import run as comparison_run

        return getattr(comparison_run, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _usage_error(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(EXIT_USAGE)


def _judge_timeout(value: str | None) -> float | None:
    """``--judge-timeout`` in seconds.

    Raises:
        ConfigError: Not a duration, or not longer than zero.
    """
    from vally import ConfigError, parse_duration

    timeout = parse_duration(value, field="--judge-timeout") if value else None
    if timeout is not None and timeout <= 0:
        raise ConfigError(
            f"--judge-timeout must be longer than zero, got {value!r}",
            hint="write e.g. --judge-timeout 2m",
        )
    return timeout


Rejudge = Annotated[
    int, opt("N", "Judge N sampled pairs again to measure self-consistency.", min=0)
]


Rules = Annotated[
    Path | None,
    opt("PATH", "Promotion rules (YAML) to decide on; exit 1 unless every rule passes."),
]
ConfidenceLevel = Annotated[
    float | None,
    opt("LEVEL", "Confidence level of every interval, strictly between 0 and 1 (0.95)."),
]
IntervalOption = Annotated[
    str | None, opt("cases|repeats", "Intervals over cases (default) or over repeats (Welch).")
]
By = Annotated[
    list[str] | None,
    opt("DIM", "Also break the comparison down by 'eval' or a stimulus tag (repeatable)."),
]
AllowDifferentSuites = Annotated[
    bool, switch("--allow-different-suites", "Compare runs even when their suites differ.")
]
Judge = Annotated[
    bool | None,
    typer.Option(
        "--judge/--no-judge",
        help="Add the judged pairwise comparison (default: when a judge model is set).",
        show_default=False,
    ),
]
Junit = Annotated[
    Path | None, opt("PATH", "Write the promotion rules as JUnit XML (a case per rule).")
]


def _check_flags(values: dict[str, Any]) -> None:
    """Usage errors of the command's flags (exit 2), then errors in their values.

    Raises:
        ConfigError: An empty reasoning effort, a ``--plan`` effect outside (0, 2], or a
            confidence level not strictly between 0 and 1.
    """
    from vally import ConfigError

    experiment_dir, baseline, treatment = (
        values["experiment_dir"],
        values["baseline"],
        values["treatment"],
    )
    if experiment_dir is not None and (baseline is not None or treatment is not None):
        _usage_error("give an experiment directory or --baseline/--treatment, not both")
    if experiment_dir is None and (baseline is None or treatment is None):
        _usage_error("give an experiment directory, or both --baseline and --treatment")
    if values["judge_evidence"] not in ("tools", "inline"):
        _usage_error("--judge-evidence must be 'tools' or 'inline'")
    if values["interval"] not in (None, "cases", "repeats"):
        _usage_error("--interval must be 'cases' or 'repeats'")
    if values["junit"] is not None and values["rules"] is None:
        _usage_error("--junit writes the promotion rules' verdicts: give --rules too")
    effort, plan, level = (
        values["judge_reasoning_effort"],
        values["plan"],
        values["confidence_level"],
    )
    if effort is not None and not effort.strip():
        raise ConfigError("--judge-reasoning-effort must not be empty")
    if plan is not None and not 0 < plan <= 2:
        raise ConfigError(
            f"--plan must be an effect on the score scale in (0, 2], got {plan}",
            hint="write e.g. --plan 0.2 (a fifth of the way from a tie to 'much better')",
        )
    if level is not None and not 0 < level < 1:
        raise ConfigError(
            f"--confidence-level must lie strictly between 0 and 1, got {level}",
            hint="write e.g. --confidence-level 0.9",
        )


def compare_command(
    experiment_dir: Annotated[
        Path | None,
        typer.Argument(
            metavar="EXPERIMENT_DIR",
            help="Experiment output folder to compare (experiment mode).",
            show_default=False,
        ),
    ] = None,
    baseline: Annotated[
        Path | None, opt("PATH", "Baseline run folder or results JSONL file.", "--baseline")
    ] = None,
    treatment: Annotated[
        Path | None, opt("PATH", "Treatment run folder or results JSONL file.", "--treatment")
    ] = None,
    baseline_variant: Annotated[
        str | None, opt("NAME", "Variant to use as the baseline instead of the recorded one.")
    ] = None,
    eval_spec: Annotated[
        Path | None,
        opt("PATH", "Eval spec whose rubrics override the records'.", "--eval-spec", "-e"),
    ] = None,
    judge_model: Annotated[
        str | None,
        opt("MODEL[,MODEL]", "Model of the comparison judge; a comma list judges as a panel."),
    ] = None,
    judge_timeout: Annotated[
        str | None, opt("DURATION", "Timeout of one judge turn, e.g. 90s (default 2m).")
    ] = None,
    judge_reasoning_effort: Annotated[
        str | None, opt("LEVEL", "Reasoning effort of the judge model, e.g. low or high.")
    ] = None,
    judge_evidence: Annotated[
        str, opt("tools|inline", "How the judge sees the trials: tools (default) or inline.")
    ] = "tools",
    judge_workers: Annotated[int, opt("N", "Pairs judged in parallel (at least 1).", min=1)] = 4,
    output: Annotated[
        Path | None, opt("PATH", "Also write the comparison records to this JSONL file.")
    ] = None,
    fail_on_regression: Annotated[
        bool, switch("--fail-on-regression", "Exit 1 when the treatment regresses.")
    ] = False,
    rejudge: Rejudge = 0,
    plan: Annotated[
        float | None,
        opt("EFFECT", "Also print the stimuli and runs needed to detect this score effect."),
    ] = None,
    rules: Rules = None,
    confidence_level: ConfidenceLevel = None,
    interval: IntervalOption = None,
    by: By = None,
    allow_different_suites: AllowDifferentSuites = False,
    judge: Judge = None,
    junit: Junit = None,
    params: cli_options.Params = None,
    no_cache: cli_options.NoCache = False,
    verbose: Annotated[
        bool, switch("--verbose", "Show per-case changes and the judge's full reasoning.")
    ] = False,
) -> None:
    """Compare a treatment run against a baseline: graded figures case by case with no
    model, a judged pairwise comparison when a judge model is set, promotion rules."""
    values = dict(locals())
    with user_errors():
        from vally import parse_params
        from vally_compare.run import CompareRequest, execute

        _check_flags(values)
        flags = {
            **locals(),
            "by": list(by or []),
            "judge_timeout": _judge_timeout(judge_timeout),
            "params": parse_params(params or []),
        }
        names = {f.name for f in dataclasses.fields(CompareRequest)}
        request = CompareRequest(**{k: v for k, v in flags.items() if k in names})
        code = execute(request)
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    """Mount ``vally compare`` (compare two runs, decide by promotion rules) on the CLI app."""
    app.command("compare")(compare_command)
