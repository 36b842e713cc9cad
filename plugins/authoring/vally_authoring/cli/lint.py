"""``vally lint [PATH]``: static checks of eval specs and SKILL.md files, no agent (the
checks are :mod:`vally_authoring.lint`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from vally import SourceLocation, source_excerpt

if TYPE_CHECKING:
    from vally_authoring.lint.diagnostics import LintResult


Root = Annotated[
    Path | None,
    typer.Argument(
        metavar="PATH",
        show_default=False,
        help="Folder scanned for SKILL.md files and, without --eval-spec, for eval files "
        "(through .vally.yaml when there is one; default: the current folder). Skills are "
        "also read from paths.skills of .vally.yaml and from each eval file's folder and "
        "its skills/ folder.",
    ),
]
EvalSpecs = Annotated[
    list[Path] | None,
    typer.Option(
        "--eval-spec",
        "-e",
        metavar="PATH",
        help="Eval spec file or folder to validate (repeatable). Replaces discovery.",
    ),
]
Strict = Annotated[bool, typer.Option("--strict", help="Warnings count as errors (exit 1 on any).")]
GraderPlugins = Annotated[
    list[str] | None,
    typer.Option(
        "--grader-plugin",
        metavar="SPEC",
        help="Load grader plugins (name, distribution, module:Attr, .py file or folder) so "
        "their types are known (repeatable).",
    ),
]
Params = Annotated[
    list[str] | None,
    typer.Option(
        "--param", "-p", metavar="NAME=VALUE", help="Param used to resolve ${NAME} (repeatable)."
    ),
]
Output = Annotated[
    str | None,
    typer.Option("--output", metavar="FORMAT", help="Output format: text or json."),
]
OldFormat = Annotated[
    str | None,
    typer.Option("--format", metavar="FORMAT", hidden=True, help="Deprecated: --output."),
]
Verbose = Annotated[bool, typer.Option("--verbose", "-v", help="Also list every file checked.")]


def lint_command(
    path: Root = None,
    eval_spec: EvalSpecs = None,
    strict: Strict = False,
    grader_plugin: GraderPlugins = None,
    param: Params = None,
    output: Output = None,
    old_format: OldFormat = None,
    verbose: Verbose = False,
) -> None:
    """Validate eval specs and skills without running an agent.

    Exit 0 when there are no errors (warnings are allowed unless --strict), 1 otherwise.
    """
    from vally import chosen_output, parse_params, user_errors
    from vally_authoring.lint.run import lint_path

    output_format = chosen_output(output, old_format, "--format", default="text")
    if output_format not in ("text", "json"):
        raise typer.BadParameter("expected 'text' or 'json'", param_hint="--output")
    with user_errors():
        result = lint_path(
            path,
            eval_spec or [],
            cwd=Path.cwd(),
            params=parse_params(param or []),
            grader_plugins=grader_plugin or [],
        )
    if output_format == "json":
        typer.echo(result.to_json())
    else:
        _print_text(result, verbose=verbose)
    raise typer.Exit(result.exit_code(strict=strict))


def _print_text(result: LintResult, *, verbose: bool) -> None:
    """Diagnostics one per line, then the tally (``--verbose``: every file checked first)."""
    if verbose:
        for file in result.eval_files:
            typer.echo(f"checked eval {file}")
        for skill in result.skills:
            typer.echo(f"checked skill {skill}")
    for diagnostic in result.diagnostics:
        typer.echo(diagnostic.render())
        where = SourceLocation(diagnostic.file, diagnostic.line, diagnostic.column)
        for line in source_excerpt(where):
            typer.echo(line)
    if not result.eval_files and not result.skills:
        typer.echo("nothing to lint: no eval files or SKILL.md found", err=True)
    typer.echo(
        f"{result.errors} error(s), {result.warnings} warning(s) in "
        f"{len(result.eval_files)} eval file(s) and {len(result.skills)} skill(s)"
    )


def register(app: typer.Typer) -> None:
    """Add ``vally lint`` to the application."""
    app.command("lint")(lint_command)
