"""``vally serve``: the results dashboard and REST API.

Usage::

    vally serve ./vally-results                       # a folder, from memory
    vally serve --store eval-history.db               # an existing store
    vally serve ./vally-results --store eval-history.db   # ingest, then serve

The work is done by :mod:`vally.tools.history.service`. The server binds 127.0.0.1 unless
``--host`` says otherwise and is read-only. Exit code 0 when the server stopped normally,
1 on an error (no runs found, a port that cannot be bound, a store that cannot be opened).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from vally.cli.common import EXIT_OK, user_errors
from vally.cli.options import opt, switch


def serve_command(
    directory: Annotated[
        Path | None,
        typer.Argument(
            metavar="DIR",
            help="Results folder (run, experiment or output folder). Optional with --store.",
            show_default=False,
        ),
    ] = None,
    store: Annotated[
        str | None,
        opt(
            "PATH|URL",
            "History store (SQLite file or postgresql:// URL); with DIR, the "
            "folder is ingested into it first.",
            "--store",
        ),
    ] = None,
    host: Annotated[str, opt("HOST", "Address to listen on (0.0.0.0: every interface).")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, opt("PORT", "Port to listen on (0: any free port).")] = 3200,
    cors: Annotated[bool, switch("--cors", "Allow cross-origin browser requests.")] = False,
) -> None:
    """Serve the results dashboard and REST API.

    Three modes: a results folder (from memory), a --store, or both (the folder is ingested
    into the store, then the store is served). Read-only; binds 127.0.0.1 unless --host
    says otherwise. Exit 1 when no run is found, the port cannot be bound or the store
    cannot be opened; 130 after Ctrl-C.
    """
    from vally.tools.history.service import prepare_serve

    with user_errors():
        session = prepare_serve(directory, store, host=host, port=port, cors=cors)
    report = session.report
    if report is not None:
        for problem in report.problems[:20]:
            typer.echo(f"warning: skipped {problem}", err=True)
        typer.echo(f"Ingested {report.added} new outcomes ({report.duplicates} already stored)")
    typer.echo(
        f"Serving {session.runs} run{'s' if session.runs != 1 else ''} "
        f"({session.outcomes} outcomes) at {session.url}  (Ctrl-C to stop)"
    )
    session.run()
    raise typer.Exit(EXIT_OK)


def register(app: typer.Typer) -> None:
    """Add ``serve`` to the ``vally`` application."""
    app.command("serve")(serve_command)
