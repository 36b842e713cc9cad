"""``vally new KIND NAME``: scaffold a plugin package that installs, lists and tests green.

The package is the example plugin of that kind (under ``plugins/examples/``) with its names
replaced (:mod:`vally_authoring.scaffold`): a ``pyproject.toml`` declaring the class in the
kind's entry-point group, a ``src/`` package with the class, a README and tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def new_command(
    kind: Annotated[
        str,
        typer.Argument(
            metavar="KIND",
            help="Plugin kind: grader, executor, backend, reporter, eval-provider, "
            "shard-strategy, llm-provider or exporter.",
            show_default=False,
        ),
    ],
    name: Annotated[
        str,
        typer.Argument(
            metavar="NAME", help="Plugin name in kebab-case, e.g. my-check.", show_default=False
        ),
    ],
    output_dir: Annotated[
        Path,
        typer.Option("--output-dir", "-o", metavar="DIR", help="Folder to create the package in."),
    ] = Path("."),
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite files of an existing folder.")
    ] = False,
) -> None:
    """Scaffold a plugin package: pyproject with the entry point, class, README and test."""
    from vally import user_errors
    from vally_authoring.scaffold import ScaffoldUsageError, plan_scaffold, write_scaffold

    try:
        scaffold = plan_scaffold(kind, name, output_dir)
    except ScaffoldUsageError as exc:
        raise typer.BadParameter(exc.message) from None
    with user_errors():
        written = write_scaffold(scaffold, force=force)
    label = scaffold.kind.replace("_", " ")
    typer.echo(f"Created {label} plugin {scaffold.name!r} in {scaffold.root}")
    for path in written:
        typer.echo(f"  {path.relative_to(scaffold.root).as_posix()}")
    typer.echo("Next steps:")
    typer.echo(f"  pip install -e {scaffold.root}")
    typer.echo(f"  vally plugins list --kind {scaffold.kind}")
    typer.echo(f"  python -m pytest {scaffold.root / 'tests'}")


def register(app: typer.Typer) -> None:
    """Add ``vally new`` to the application."""
    app.command("new")(new_command)
