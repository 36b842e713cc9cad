"""``vally compare``: an LLM judge compares baseline and treatment runs pair by pair.

The work is done by :func:`vally.tools.comparison_run.execute`; this module parses the
flags. ``CompareRequest`` and ``execute`` are re-exported here for callers that still
import them from the CLI.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from vally.cli import options as o
from vally.cli.common import EXIT_USAGE, user_errors
from vally.cli.options import request_from

__all__ = ["compare_command", "register"]


def __getattr__(name: str) -> Any:
    """``CompareRequest`` and ``execute``, imported on first use (CLI start-up stays light)."""
    if name in ("CompareRequest", "execute"):
        from vally.tools import comparison_run

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
    from vally.errors import ConfigError
    from vally.models.durations import parse_duration

    timeout = parse_duration(value, field="--judge-timeout") if value else None
    if timeout is not None and timeout <= 0:
        raise ConfigError(
            f"--judge-timeout must be longer than zero, got {value!r}",
            hint="write e.g. --judge-timeout 2m",
        )
    return timeout


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
    params: o.Params = None,
    verbose: Annotated[bool, typer.Option("--verbose")] = False,
) -> None:
    """Compare a treatment run against a baseline with an LLM judge (both orders)."""
    two_run = baseline is not None or treatment is not None
    if experiment_dir is not None and two_run:
        _usage_error("give an experiment directory or --baseline/--treatment, not both")
    if experiment_dir is None and (baseline is None or treatment is None):
        _usage_error("give an experiment directory, or both --baseline and --treatment")
    if judge_evidence not in ("tools", "inline"):
        _usage_error("--judge-evidence must be 'tools' or 'inline'")
    with user_errors():
        from vally.errors import ConfigError
        from vally.specs.params import parse_params
        from vally.tools.comparison_run import CompareRequest, execute

        if judge_reasoning_effort is not None and not judge_reasoning_effort.strip():
            raise ConfigError("--judge-reasoning-effort must not be empty")
        flags = {
            **locals(),
            "judge_timeout": _judge_timeout(judge_timeout),
            "params": parse_params(params or []),
        }
        request = request_from(CompareRequest, flags)
        code = execute(request)
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    """Add ``vally compare`` to the application."""
    app.command("compare")(compare_command)
