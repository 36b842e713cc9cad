"""``vally init [DIR]``: start an eval project that runs offline (see
:mod:`vally_authoring.project_init`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def init_command(
    folder: Annotated[
        Path,
        typer.Argument(
            metavar="DIR",
            help="Folder of the new project (created when missing). Default: the current one.",
            show_default=False,
        ),
    ] = Path("."),
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite the files vally init writes.")
    ] = False,
) -> None:
    """Start an eval project: .vally.yaml, an example eval and an offline demo agent."""
    from vally import user_errors
    from vally_authoring.project_init import init_project

    with user_errors():
        result = init_project(folder, force=force)
    typer.echo(f"Created a vally project in {result.root.absolute()}")
    for path in result.written:
        typer.echo(f"  {path.relative_to(result.root).as_posix()}")
    for path in result.kept:
        typer.echo(f"  {path.relative_to(result.root).as_posix()} (kept as it was)")
    typer.echo("Next steps:")
    if folder != Path("."):
        typer.echo(f"  cd {folder}")
    typer.echo("  vally eval              # runs evals/example offline")
    typer.echo("  vally lint              # checks every eval and skill")
    typer.echo("  vally schema --write    # JSON Schemas for your editor")


def register(app: typer.Typer) -> None:
    """Add ``vally init`` to the application."""
    app.command("init")(init_command)
