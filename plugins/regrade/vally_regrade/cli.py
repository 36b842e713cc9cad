"""``vally grade``: re-grade saved trials read from standard input.

Usage::

    vally eval -e eval.yaml --output jsonl --skip-grade | vally grade -e eval.yaml
    vally grade -e eval.yaml < results.jsonl
    vally grade -e eval.yaml --stimulus add-test --workspace ./ws < trajectory.atif.json

The work is done by :func:`vally_regrade.regrade.regrade` (matching, grading, reporters);
this module parses the flags and prints the tally. Results are printed per stimulus (as
``vally eval`` does); ``--output jsonl`` writes the re-graded trial records to standard
output and the report to standard error. Exit code 0 when every trial passed, 1 when one
failed or errored, or on any error.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from vally import cli_options, user_errors

EXIT_OK = 0
"""Every trial passed."""
EXIT_FAILURE = 1
"""A trial failed or errored, or the command could not run."""
EXIT_INTERRUPTED = 130
"""Grading was interrupted (Ctrl-C)."""


def grade_command(
    eval_spec: Annotated[
        str,
        typer.Option("--eval-spec", "-e", metavar="PATH", help="Eval spec whose graders to apply."),
    ],
    stimulus: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="Stimulus for ATIF input (needed when the prompt matches several).",
        ),
    ] = None,
    workspace: Annotated[
        str | None,
        typer.Option(
            metavar="DIR",
            help="Folder file and command graders work in, through the local backend "
            "(used in place, never cleared or deleted).",
        ),
    ] = None,
    output: Annotated[
        str | None,
        typer.Option(metavar="jsonl", help="'jsonl': write the re-graded records to stdout."),
    ] = None,
    judge_model: Annotated[
        str | None, typer.Option(metavar="MODEL", help="Model for LLM judge graders.")
    ] = None,
    grader_plugins: cli_options.GraderPlugins = None,
    verbose: cli_options.Verbose = False,
    threshold: Annotated[
        float | None,
        typer.Option(metavar="0..1", help="Pass threshold 0..1, overriding the spec's."),
    ] = None,
    params: cli_options.Params = None,
    no_cache: cli_options.NoCache = False,
) -> None:
    """Re-grade saved trials read from standard input."""
    from vally import parse_params
    from vally_regrade.regrade import regrade
    from vally_regrade.request import GradeOptions

    with user_errors():
        opts = GradeOptions(
            eval_spec=eval_spec,
            stimulus=stimulus,
            workspace=workspace,
            output=output,
            judge_model=judge_model,
            grader_plugins=grader_plugins or [],
            verbose=verbose,
            threshold=threshold,
            params=parse_params(params or []),
            no_cache=no_cache,
        )
        outcome = regrade(opts, sys.stdin, warn=_warn)
    if outcome.judge_cache is not None:
        typer.echo(outcome.judge_cache, err=True)
    if outcome.cancelled:
        raise typer.Exit(EXIT_INTERRUPTED)
    passed, failed, errored = outcome.counts()
    total = len(outcome.records)
    typer.echo(
        f"Graded {total} trial{'s' if total != 1 else ''}: "
        f"{passed} passed, {failed} failed, {errored} errored",
        err=outcome.to_stdout,
    )
    raise typer.Exit(EXIT_OK if failed == 0 and errored == 0 else EXIT_FAILURE)


def _warn(message: str) -> None:
    typer.echo(f"warning: {message}", err=True)


def register(app: typer.Typer) -> None:
    """Add ``grade`` to the ``vally`` application."""
    app.command("grade", help="Re-grade saved trials read from standard input.")(grade_command)
