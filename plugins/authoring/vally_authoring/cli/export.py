"""``vally export``: write an eval spec in another tool's format.

Usage::

    vally export --eval-spec eval.yaml --exporter harbor --output-dir tasks
    vally export -e eval.yaml --exporter harbor -- base_image=python:3.12-slim

Arguments after ``--`` are ``key=value`` settings of the exporter (a repeated key becomes a
list). The work is done by :func:`vally_authoring.export.export`. Exit code 0 when everything was
written, 1 on any error (nothing is written when the spec or the exporter is invalid).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from vally import cli_options, user_errors


def export_command(
    eval_spec: Annotated[
        str, typer.Option("--eval-spec", "-e", metavar="PATH", help="Eval spec to export.")
    ],
    exporter: Annotated[
        str,
        typer.Option(
            "--exporter", metavar="NAME|SPEC", help="Exporter: harbor, or a plugin specifier."
        ),
    ],
    exporter_args: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[-- KEY=VALUE...]",
            help="Exporter settings after '--', e.g. -- base_image=python:3.12-slim.",
            show_default=False,
        ),
    ] = None,
    output_dir: Annotated[
        str, typer.Option("--output-dir", "-o", metavar="DIR", help="Folder to write into.")
    ] = "vally-export",
    eval_plugin: Annotated[
        str | None, typer.Option(metavar="SPEC", help="Eval provider reading the eval files.")
    ] = None,
    params: cli_options.Params = None,
) -> None:
    """Write an eval spec in another tool's format (e.g. Harbor task folders)."""
    from vally import parse_params
    from vally_authoring.export import ExportRequest, export

    with user_errors():
        request = ExportRequest(
            eval_spec=eval_spec,
            exporter=exporter,
            output_dir=output_dir,
            exporter_args=exporter_args or [],
            params=parse_params(params or []),
            eval_plugin=eval_plugin,
        )
        result = export(request)
    typer.echo(f"Exported {eval_spec} with {result.exporter} to {result.output_dir}")
    for path in result.written:
        typer.echo(f"  {_shown(path, result.output_dir)}")


def _shown(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def register(app: typer.Typer) -> None:
    """Add ``vally export`` to the application."""
    app.command("export")(export_command)
