"""``vally serve`` and ``vally ingest``: the results dashboard and REST API, and loading run
folders into a history store.

Usage::

    vally serve ./vally-results                       # a folder, from memory
    vally serve --store eval-history.db               # an existing store
    vally serve ./vally-results --store eval-history.db   # ingest, then serve

    vally ingest vally-results/ --store eval-history.db
    vally ingest runs/2026-06-09T20-41-10-885Z exp/ --store postgresql://ci@db/vally

Each command is a ``vally.cli`` entry point (:func:`register_serve`, :func:`register_ingest`)
that the CLI mounts like any installed command extension. The work is done by
:mod:`vally_serve.service`, imported when a command runs, so ``vally --help`` needs none of
the ``serve`` extra's packages and a missing one is one clear error naming the extra.

``serve`` binds 127.0.0.1 unless ``--host`` says otherwise and is read-only. It answers only
requests whose ``Host`` is its own (``--allowed-host`` adds a proxy's name), requires an
access token on every request when given one (``--token``, ``VALLY_SERVE_TOKEN``), and warns
when it listens beyond loopback. Exit code 0 when the server stopped normally, 1 on an
error (no runs found, a port that cannot be bound, a store that cannot be opened).

``ingest`` reports the lines that cannot be read (``file:line: why``) and skips them; the rest
is ingested. Re-ingesting a run adds nothing. Exit code 0 when at least one run was found, 1
when none was, or on any error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from vally import chosen_output, user_errors

EXIT_OK = 0
"""The exit code of a command that did its work."""
SHOWN_PROBLEMS = 20
"""Skipped lines printed one by one; the rest are counted."""


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
        typer.Option(
            "--store",
            metavar="PATH|URL",
            help="History store (SQLite file or postgresql:// URL); with DIR, the "
            "folder is ingested into it first.",
        ),
    ] = None,
    host: Annotated[
        str, typer.Option(metavar="HOST", help="Address to listen on (0.0.0.0: every interface).")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(metavar="PORT", help="Port to listen on (0: any free port).")
    ] = 3200,
    cors: Annotated[
        bool, typer.Option("--cors", help="Allow cross-origin browser requests.")
    ] = False,
    allowed_hosts: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            metavar="NAME",
            help="Also answer requests for this host name, e.g. a proxy's (repeatable); "
            "other Host headers get a 421.",
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            metavar="TOKEN",
            envvar="VALLY_SERVE_TOKEN",
            show_envvar=True,
            help="Require this access token (16+ characters) on every request: "
            "'Authorization: Bearer TOKEN', or open /?token=TOKEN for the dashboard.",
        ),
    ] = None,
) -> None:
    """Serve the results dashboard and REST API.

    Three modes: a results folder (from memory), a --store, or both (the folder is ingested
    into the store, then the store is served). Read-only; binds 127.0.0.1 unless --host
    says otherwise, and answers only requests whose Host is its own. Exit 1 when no run is
    found, the port cannot be bound or the store cannot be opened; 130 after Ctrl-C.
    """
    from vally_serve.service import prepare_serve

    with user_errors():
        session = prepare_serve(
            directory,
            store,
            host=host,
            port=port,
            cors=cors,
            allowed_hosts=allowed_hosts or (),
            token=token,
        )
    report = session.report
    if report is not None:
        _warn([str(p) for p in report.problems], "skipped ")
        _warn([str(p) for p in report.left_out], "")
        typer.echo(f"Ingested {report.added} new outcomes ({report.duplicates} already stored)")
    if session.exposed:
        typer.echo(_exposed_warning(session.token_required), err=True)
    elif session.token_required:
        typer.echo("Every request needs the access token: open /?token=<token>", err=True)
    typer.echo(
        f"Serving {session.runs} run{'s' if session.runs != 1 else ''} "
        f"({session.outcomes} outcomes) at {session.url}  (Ctrl-C to stop)"
    )
    session.run()
    raise typer.Exit(EXIT_OK)


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
        typer.Option(
            "--store",
            metavar="PATH|URL",
            help="History store: a SQLite file, or a postgresql:// URL.",
        ),
    ],
    output: Annotated[
        str | None,
        typer.Option(
            "--output",
            metavar="FORMAT",
            help="text (default) or json: the result as one JSON object on stdout.",
        ),
    ] = None,
    old_json: Annotated[
        bool, typer.Option("--json", hidden=True, help="Deprecated: --output json.")
    ] = False,
) -> None:
    """Load run folders into a history store.

    The store is a SQLite file or a PostgreSQL database (a postgresql:// URL). Re-ingesting
    a run adds nothing; unreadable lines are reported (file:line) and skipped. Exit 0 when
    a run was found, 1 when none was or on an error.
    """
    from vally_serve.service import ingest_runs

    chosen = chosen_output(output, "json" if old_json else None, "--json", default="text")
    if chosen not in ("text", "json"):
        raise typer.BadParameter("expected 'text' or 'json'", param_hint="--output")
    as_json = chosen == "json"
    with user_errors():
        report = ingest_runs(run_dirs, store)
    problems = [str(p) for p in report.problems]
    left_out = [str(p) for p in report.left_out]
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
                    "leftOut": left_out,
                }
            )
        )
        raise typer.Exit(EXIT_OK)
    _warn(problems, "skipped ")
    _warn(left_out, "")
    runs = len(report.runs)
    values = f", {len(left_out)} values left out" if left_out else ""
    typer.echo(
        f"Ingested {runs} run{'s' if runs != 1 else ''} from {report.folders} folder"
        f"{'s' if report.folders != 1 else ''}: {report.added} outcomes added, "
        f"{report.duplicates} already in the store, {len(problems)} lines skipped{values}"
    )
    raise typer.Exit(EXIT_OK)


def _exposed_warning(token_required: bool) -> str:
    """What to tell the user of a server reachable from other machines."""
    who = "anyone who can reach this machine on the network"
    if token_required:
        return (
            f"warning: vally serve listens beyond this machine: {who} can try it; every "
            "request needs the access token, which plain HTTP sends unencrypted (put a "
            "TLS proxy in front beyond a trusted network). Open /?token=<token>"
        )
    return (
        f"warning: vally serve listens beyond this machine and {who} can read every run "
        "it serves; require an access token with --token or VALLY_SERVE_TOKEN"
    )


def _warn(messages: list[str], prefix: str) -> None:
    """Print the first :data:`SHOWN_PROBLEMS` of ``messages`` as warnings, then a count."""
    for message in messages[:SHOWN_PROBLEMS]:
        typer.echo(f"warning: {prefix}{message}", err=True)
    if len(messages) > SHOWN_PROBLEMS:
        typer.echo(f"warning: ... and {len(messages) - SHOWN_PROBLEMS} more", err=True)


def register_serve(app: typer.Typer) -> None:
    """Mount ``vally serve`` (the results dashboard and REST API) on the CLI app."""
    app.command("serve")(serve_command)


def register_ingest(app: typer.Typer) -> None:
    """Mount ``vally ingest`` (load run folders into a history store) on the CLI app."""
    app.command("ingest")(ingest_command)
