"""``vally plugins list``: every installed or registered plugin, where it comes from, and
whether it loads."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from vally import REGISTRY_GROUPS, command_group

if TYPE_CHECKING:
    from vally import PluginKind

KIND_CHOICES: tuple[str, ...] = tuple(REGISTRY_GROUPS)
"""The kinds ``--kind`` accepts (``-`` or ``_``, singular or plural): the run kinds,
``cli_command`` (the extensions that add commands to this CLI) and ``hook`` (hook
plugins)."""


def _normalize_kind(value: str | None) -> str | None:
    if value is None:
        return None
    kind = value.strip().lower().replace("-", "_")
    if kind.endswith("s") and kind[:-1] in KIND_CHOICES:
        kind = kind[:-1]
    if kind not in KIND_CHOICES:
        raise typer.BadParameter(
            f"unknown kind {value!r}; expected one of {', '.join(KIND_CHOICES)}",
            param_hint="--kind",
        )
    return kind


def list_command(
    kind: Annotated[
        str | None,
        typer.Option(
            "--kind",
            "-k",
            metavar="KIND",
            help="Only this kind: " + ", ".join(KIND_CHOICES) + ".",
        ),
    ] = None,
    output: Annotated[
        str | None,
        typer.Option("--output", metavar="FORMAT", help="Output format: table or json."),
    ] = None,
    old_format: Annotated[
        str | None,
        typer.Option("--format", metavar="FORMAT", hidden=True, help="Deprecated: --output."),
    ] = None,
    plugin: Annotated[
        list[str] | None,
        typer.Option(
            "--plugin",
            metavar="SPEC",
            help="Also load this plugin specifier (a module:Attr, .py file or folder) of "
            "the --kind given (repeatable).",
        ),
    ] = None,
) -> None:
    """List plugins with kind, source (distribution and version, or path) and status.

    Broken plugins are shown as error rows with a warning; the command still exits 0.
    """
    import json
    from pathlib import Path
    from typing import cast

    from vally import Session, chosen_output, user_errors

    selected = _normalize_kind(kind)
    output_format = chosen_output(output, old_format, "--format", default="table")
    if output_format not in ("table", "json"):
        raise typer.BadParameter("expected 'table' or 'json'", param_hint="--output")
    if plugin and selected is None:
        raise typer.BadParameter("--plugin needs --kind", param_hint="--plugin")
    with user_errors():
        session = Session()
        if plugin and selected is not None:
            session.load_plugins(cast("PluginKind", selected), plugin, base_dir=Path.cwd())
        rows = session.list_plugins(cast("Any", selected), warn=False)
    for row in rows:
        if row.status != "ok":
            typer.echo(f"warning: {row.kind} plugin {row.name!r} is broken: {row.error}", err=True)
    if output_format == "json":
        typer.echo(json.dumps([row.as_dict() for row in rows], indent=2))
        return
    if not rows:
        typer.echo("no plugins found")
        return
    headers = ("NAME", "KIND", "SOURCE", "STATUS", "DESCRIPTION")
    table = [
        (
            row.name,
            row.kind,
            row.source,
            row.status,
            (row.description if row.status == "ok" else (row.error or ""))[:80],
        )
        for row in rows
    ]
    widths = [max(len(h), *(len(r[i]) for r in table)) for i, h in enumerate(headers)]
    for line in (headers, *table):
        typer.echo("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip())


def register(app: typer.Typer) -> None:
    """Add the ``plugins`` command group to the ``vally`` app."""
    plugins_app = command_group("plugins", "Inspect installed and loadable plugins.")
    plugins_app.command("list")(list_command)
    app.add_typer(plugins_app, name="plugins")
