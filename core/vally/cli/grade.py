"""``vally grade``: re-grade saved trials read from standard input.

Usage::

    vally eval -e eval.yaml --output jsonl --skip-grade | vally grade -e eval.yaml
    vally grade -e eval.yaml < results.jsonl
    vally grade -e eval.yaml --stimulus add-test --workspace ./ws < trajectory.atif.json

The work is done by :func:`vally.tools.regrade.regrade` (matching, grading, reporters);
this module parses the flags and prints the tally. Results are printed per stimulus (as
``vally eval`` does); ``--output jsonl`` writes the re-graded trial records to standard
output and the report to standard error. Exit code 0 when every trial passed, 1 when one
failed or errored, or on any error.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from vally.cli import options as o
from vally.cli.common import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, user_errors
from vally.cli.options import opt, request_from


def grade_command(
    eval_spec: Annotated[
        str, opt("PATH", "Eval spec whose graders to apply.", "--eval-spec", "-e")
    ],
    stimulus: Annotated[
        str | None,
        opt("NAME", "Stimulus for ATIF input (needed when the prompt matches several)."),
    ] = None,
    workspace: Annotated[
        str | None,
        opt(
            "DIR",
            "Folder file and command graders work in, through the local backend "
            "(used in place, never cleared or deleted).",
        ),
    ] = None,
    output: Annotated[
        str | None, opt("jsonl", "'jsonl': write the re-graded records to stdout.")
    ] = None,
    judge_model: Annotated[str | None, opt("MODEL", "Model for LLM judge graders.")] = None,
    grader_plugins: o.GraderPlugins = None,
    verbose: o.Verbose = False,
    threshold: Annotated[
        float | None, opt("0..1", "Pass threshold 0..1, overriding the spec's.")
    ] = None,
    params: o.Params = None,
    no_cache: o.NoCache = False,
) -> None:
    """Re-grade saved trials read from standard input."""
    from vally.specs.params import parse_params
    from vally.tools.regrade import GradeOptions, regrade

    with user_errors():
        opts = request_from(GradeOptions, {**locals(), "params": parse_params(params or [])})
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
