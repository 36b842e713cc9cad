"""``vally schema eval|experiment|project``: the JSON Schema of vally's files (for editors)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

SCHEMA_KINDS = ("eval", "experiment", "project")


def json_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of one file kind: ``eval`` (eval.yaml), ``experiment`` or ``project``
    (.vally.yaml)."""
    from pydantic import BaseModel

    from vally.models.experiment import ExperimentFile
    from vally.models.project import ProjectConfig
    from vally.models.spec import EvalSpec

    models: dict[str, type[BaseModel]] = {
        "eval": EvalSpec,
        "experiment": ExperimentFile,
        "project": ProjectConfig,
    }
    titles = {
        "eval": "vally eval spec (eval.yaml)",
        "experiment": "vally experiment file",
        "project": "vally project file (.vally.yaml)",
    }
    schema = models[kind].model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = titles[kind]
    return schema


def schema_command(
    kind: Annotated[
        str,
        typer.Argument(
            metavar="KIND", help="Which file: eval, experiment or project.", show_default=False
        ),
    ],
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", metavar="PATH", help="Write the schema to this file."),
    ] = None,
) -> None:
    """Print the JSON Schema of eval.yaml, experiment files or .vally.yaml."""
    import json

    from vally.cli.common import user_errors
    from vally.errors import OutputError

    if kind not in SCHEMA_KINDS:
        raise typer.BadParameter(
            f"unknown kind {kind!r}; expected one of {', '.join(SCHEMA_KINDS)}",
            param_hint="KIND",
        )
    text = json.dumps(json_schema(kind), indent=2) + "\n"
    if output is None:
        typer.echo(text, nl=False)
        return
    with user_errors():
        try:
            output.parent.mkdir(parents=True, exist_ok=True)
            tmp = output.with_name(output.name + ".tmp")
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(output)
        except OSError as exc:
            raise OutputError(f"cannot write {output}: {exc.strerror or exc}") from None
    typer.echo(f"wrote {output}", err=True)


def register(app: typer.Typer) -> None:
    """Add ``vally schema`` to the application."""
    app.command("schema")(schema_command)
