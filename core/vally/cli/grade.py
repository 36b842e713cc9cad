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

from vally.cli.common import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, parse_key_values, user_errors


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
            help="Folder file and command graders work in, through the local backend "
            "(used in place, never cleared or deleted)."
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
    from vally.tools.regrade import GradeOptions, regrade

    with user_errors():
        params = parse_key_values(param or [], flag="--param")
        opts = GradeOptions(
            eval_spec=eval_spec,
            stimulus=stimulus,
            workspace=workspace,
            output=output,
            judge_model=judge_model,
            grader_plugins=list(grader_plugin or []),
            verbose=verbose,
            threshold=threshold,
            params={key: str(value) for key, value in params.items()},
        )
        outcome = regrade(opts, sys.stdin, warn=_warn)
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
