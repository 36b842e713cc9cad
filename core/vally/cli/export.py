"""``vally export``: write an eval spec in another tool's format.

Usage::

    vally export --eval-spec eval.yaml --exporter harbor --output-dir tasks
    vally export -e eval.yaml --exporter harbor -- base_image=python:3.12-slim

Arguments after ``--`` are ``key=value`` settings of the exporter (a repeated key becomes a
list). The work is done by :func:`vally.tools.export.export`. Exit code 0 when everything was
written, 1 on any error (nothing is written when the spec or the exporter is invalid).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from vally.cli import options as o
from vally.cli.common import user_errors
from vally.cli.options import opt


def export_command(
    eval_spec: Annotated[str, opt("PATH", "Eval spec to export.", "--eval-spec", "-e")],
    exporter: Annotated[
        str, opt("NAME|SPEC", "Exporter: harbor, or a plugin specifier.", "--exporter")
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
        str, opt("DIR", "Folder to write into.", "--output-dir", "-o")
    ] = "vally-export",
    eval_plugin: o.EvalPlugin = None,
    params: o.Params = None,
) -> None:
    """Write an eval spec in another tool's format (e.g. Harbor task folders)."""
    from vally.specs.params import parse_params
    from vally.tools.export import ExportRequest, export

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
