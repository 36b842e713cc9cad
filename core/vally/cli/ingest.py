"""``vally ingest``: load run folders into a history store.

Usage::

    vally ingest vally-results/ --store eval-history.db
    vally ingest runs/2026-06-09T20-41-10-885Z exp/ --store postgresql://ci@db/vally

The work is done by :func:`vally.tools.history.service.ingest_runs`. Lines that cannot be
read are reported (``file:line: why``) and skipped; the rest is ingested. Re-ingesting a run
adds nothing. Exit code 0 when at least one run was found, 1 when none was, or on any error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from vally.cli.common import EXIT_OK, user_errors
from vally.cli.options import opt, switch

SHOWN_PROBLEMS = 20
"""Skipped lines printed one by one; the rest are counted."""


def ingest_command(
    run_dirs: Annotated[
        list[Path],
        typer.Argument(
            metavar="RUN_DIR",
            help="Run folders, experiment folders, or folders holding many runs.",
            show_default=False,
        ),
    ],
    store: Annotated[
        str,
        opt("PATH|URL", "History store: a SQLite file, or a postgresql:// URL.", "--store"),
    ],
    as_json: Annotated[
        bool, switch("--json", "Print the result as one JSON object on stdout.")
    ] = False,
) -> None:
    """Load run folders into a history store.

    The store is a SQLite file or a PostgreSQL database (a postgresql:// URL). Re-ingesting
    a run adds nothing; unreadable lines are reported (file:line) and skipped. Exit 0 when
    a run was found, 1 when none was or on an error.
    """
    from vally.tools.history.service import ingest_runs

    with user_errors():
        report = ingest_runs(run_dirs, store)
    problems = [str(p) for p in report.problems]
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "runs": report.runs,
                    "folders": report.folders,
                    "read": report.read,
                    "added": report.added,
                    "duplicates": report.duplicates,
                    "problems": problems,
                }
            )
        )
        raise typer.Exit(EXIT_OK)
    for problem in problems[:SHOWN_PROBLEMS]:
        typer.echo(f"warning: skipped {problem}", err=True)
    if len(problems) > SHOWN_PROBLEMS:
        typer.echo(f"warning: ... and {len(problems) - SHOWN_PROBLEMS} more", err=True)
    runs = len(report.runs)
    typer.echo(
        f"Ingested {runs} run{'s' if runs != 1 else ''} from {report.folders} folder"
        f"{'s' if report.folders != 1 else ''}: {report.added} outcomes added, "
        f"{report.duplicates} already in the store, {len(problems)} lines skipped"
    )
    raise typer.Exit(EXIT_OK)


def register(app: typer.Typer) -> None:
    """Add ``ingest`` to the ``vally`` application."""
    app.command("ingest")(ingest_command)
