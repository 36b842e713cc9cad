"""``vally lint [PATH]``: static checks of eval specs and SKILL.md files, no agent."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def lint_command(
    path: Annotated[
        Path | None,
        typer.Argument(
            help="Root scanned for SKILL.md files and, without --eval-spec, for eval files "
            "(through .vally.yaml when there is one). Default: the current folder.",
        ),
    ] = None,
    eval_spec: Annotated[
        list[Path] | None,
        typer.Option(
            "--eval-spec",
            "-e",
            help="Eval spec file or folder to validate (repeatable). Replaces discovery.",
        ),
    ] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Warnings count as errors (exit 1 on any).")
    ] = False,
    grader_plugin: Annotated[
        list[str] | None,
        typer.Option(
            "--grader-plugin",
            help="Load grader plugins (name, distribution, module:Attr, .py file or folder) "
            "so their types are known (repeatable).",
        ),
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option(
            "--param", "-p", help="Param NAME=value used to resolve ${NAME} (repeatable)."
        ),
    ] = None,
    output_format: Annotated[
        str, typer.Option("--format", help="Output format: text or json.")
    ] = "text",
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Also list every file checked.")
    ] = False,
) -> None:
    """Validate eval specs and skills without running an agent.

    Exit 0 when there are no errors (warnings are allowed unless --strict), 1 otherwise.
    """
    from vally.cli.common import parse_key_values, user_errors
    from vally.errors import ConfigError
    from vally.plugins.session import Session
    from vally.specs.loading import discover_eval_files, eval_files_in, find_project
    from vally.tools.lint import SessionGraderCatalog, run_lint

    if output_format not in ("text", "json"):
        raise typer.BadParameter("expected 'text' or 'json'", param_hint="--format")
    with user_errors():
        cwd = Path.cwd()
        root = (path or cwd).absolute()
        if not root.exists():
            raise ConfigError(f"path not found: {root}")
        params = {k: str(v) for k, v in parse_key_values(param or [], flag="--param").items()}
        project, project_root = find_project(root, params=params)
        session = Session(project, project_root)
        if grader_plugin:
            session.load_plugins("grader", grader_plugin, base_dir=cwd)
        patterns = project.paths.evalFilenames
        if eval_spec:
            files: list[Path] = []
            for entry in eval_spec:
                found = eval_files_in(cwd, [str(entry)], patterns)
                if not found:
                    raise ConfigError(
                        f"--eval-spec {entry}: no such file, or no eval files "
                        f"({', '.join(patterns)}) in that folder"
                    )
                files.extend(f for f in found if f not in files)
        elif root.is_file():
            files = [root]
        elif project_root is not None:
            files = discover_eval_files(project, project_root)
            if root != project_root:
                files = [f for f in files if f.is_relative_to(root)]
        else:
            files = eval_files_in(root, ["."], patterns)
        skills_root = root if root.is_dir() else None
        result = run_lint(
            files,
            SessionGraderCatalog(session),
            skills_root=skills_root,
            project=project,
            cli_params=params,
            executors=SessionGraderCatalog(session, "executor"),
        )

    if output_format == "json":
        typer.echo(result.to_json())
    else:
        if verbose:
            for file in result.eval_files:
                typer.echo(f"checked eval {file}")
            for skill in result.skills:
                typer.echo(f"checked skill {skill}")
        for diagnostic in result.diagnostics:
            typer.echo(diagnostic.render())
        if not result.eval_files and not result.skills:
            typer.echo("nothing to lint: no eval files or SKILL.md found", err=True)
        summary = (
            f"{result.errors} error(s), {result.warnings} warning(s) in "
            f"{len(result.eval_files)} eval file(s) and {len(result.skills)} skill(s)"
        )
        typer.echo(summary)
    raise typer.Exit(result.exit_code(strict=strict))


def register(app: typer.Typer) -> None:
    """Add ``vally lint`` to the application."""
    app.command("lint")(lint_command)
