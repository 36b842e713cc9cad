"""The ``vally`` typer application and its entry point."""

from __future__ import annotations

import importlib
import os
from typing import Annotated

import typer

from vally._version import __version__

app = typer.Typer(
    name="vally",
    help="Evaluate AI agents: run stimuli, grade trajectories, compare variants.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

COMMAND_MODULES = (
    "vally.cli.lint",
    "vally.cli.schema",
    "vally.cli.plugins",
    "vally.cli.eval",
    "vally.cli.grade",
    "vally.cli.compare",
    "vally.cli.experiment",
    "vally.cli.new",
)
"""Modules that each define ``register(app)``. Missing ones are skipped while the CLI grows."""


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"vally {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version_callback, is_eager=True, help="Show the version."
        ),
    ] = False,
    debug: Annotated[
        bool, typer.Option("--debug", help="Show Python tracebacks for errors.")
    ] = False,
) -> None:
    """Evaluate AI agents."""
    if debug:
        os.environ["VALLY_DEBUG"] = "1"


CLI_ENTRY_POINT_GROUP = "vally.cli"
"""Installed distributions may add commands: each entry point is a ``register(app)``."""


def _register_commands() -> None:
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        module.register(app)
    from importlib.metadata import entry_points

    for entry_point in entry_points(group=CLI_ENTRY_POINT_GROUP):
        try:
            entry_point.load()(app)
        except Exception as exc:  # a broken extension must not break the whole CLI
            typer.echo(f"warning: command plugin {entry_point.name!r} failed: {exc}", err=True)


_register_commands()


def main() -> None:
    """Console-script entry point."""
    app()
