"""``vally schema [KIND]``: the JSON Schema of vally's files, for editors.

``vally schema eval`` prints one schema; ``--output`` writes it to a file; ``--write``
writes all three (eval, experiment, project) into the project's ``.vally/schemas/`` (or
``--output``) for an editor's settings to point at. The schemas include the config of
every plugin the project can load (see :mod:`vally_authoring.schema`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

DEFAULT_SCHEMA_DIR = Path(".vally") / "schemas"
"""Where ``--write`` puts the schemas, below the project's root (or the current folder)."""


def schema_command(
    kind: Annotated[
        str | None,
        typer.Argument(
            metavar="KIND",
            help="Which file: eval, experiment, project or promotion (all with --write).",
            show_default=False,
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            metavar="PATH",
            help="Write the schema to this file (with --write: into this folder).",
        ),
    ] = None,
    write: Annotated[
        bool,
        typer.Option(
            "--write",
            help="Write every schema into .vally/schemas/ of the project, for editors.",
        ),
    ] = False,
) -> None:
    """Print or write the JSON Schema of eval.yaml, experiment files, .vally.yaml or
    promotion rules."""
    import json

    from vally import user_errors
    from vally_authoring.schema import (
        SCHEMA_FILES,
        SCHEMA_KINDS,
        PluginConfigs,
        json_schema,
        write_schemas,
    )

    if kind is not None and kind not in SCHEMA_KINDS:
        raise typer.BadParameter(
            f"unknown kind {kind!r}; expected one of {', '.join(SCHEMA_KINDS)}",
            param_hint="KIND",
        )
    plugins = PluginConfigs.from_project(Path.cwd())
    if write:
        with user_errors():
            written = write_schemas(output or _schema_dir(), plugins)
        for path in written:
            typer.echo(f"wrote {path}", err=True)
        if written:
            eval_schema = next((p for p in written if p.name == SCHEMA_FILES["eval"]), written[0])
            typer.echo(
                "Point your editor at them, e.g. with this first line in an eval file "
                f"(YAML language server: VS Code, JetBrains, Neovim):\n"
                f"  # yaml-language-server: $schema={eval_schema}",
                err=True,
            )
        return
    if kind is None:
        raise typer.BadParameter("name a KIND, or pass --write for all three", param_hint="KIND")
    text = json.dumps(json_schema(kind, plugins), indent=2) + "\n"
    if output is None:
        typer.echo(text, nl=False)
        return
    with user_errors():
        _write_one(output, text)
    typer.echo(f"wrote {output}", err=True)


def _schema_dir() -> Path:
    from vally import find_project

    _, root = find_project(Path.cwd())
    return (root or Path.cwd()) / DEFAULT_SCHEMA_DIR


def _write_one(output: Path, text: str) -> None:
    from vally import OutputError

    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        tmp = output.with_name(output.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(output)
    except OSError as exc:
        raise OutputError(f"cannot write {output}: {exc.strerror or exc}") from None


def register(app: typer.Typer) -> None:
    """Add ``vally schema`` to the application."""
    app.command("schema")(schema_command)
