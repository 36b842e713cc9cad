"""``vally docker prune``: remove containers that dead vally runs left behind.

The kernel knows nothing about docker; this module offers ``register(app)`` so the CLI can
mount the ``docker`` command group when the backend is installed.
"""

from __future__ import annotations

from typing import Annotated

import typer

from vally import CleanupError, VallyError, command_group


def prune(*, dry_run: bool = False) -> tuple[list[str], list[str]]:
    """Remove every vally-labelled container whose run is dead (its ``vally.pid`` is not
    alive on this host), plus per-trial volumes of dead runs.

    Args:
        dry_run: Only list what would be removed.

    Returns:
        ``(lines, problems)``: one line per container found, and removal errors.

    Raises:
        DockerUnavailableError: No engine answers.
    """
    from vally_backends.docker.backend import connect
    from vally_backends.docker.cleanup import (
        find_leftovers,
        remove_containers,
        remove_dead_volumes,
    )

    api = connect()
    leftovers = find_leftovers(api, dead_only=True)
    lines = [
        f"{item.id[:12]}  run={item.run_id}  trial={item.trial}  pid={item.pid}  {item.status}"
        for item in leftovers
    ]
    if dry_run:
        return lines, []
    problems = remove_containers(api, leftovers)
    remove_dead_volumes(api)
    return lines, problems


def prune_command(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List the containers without removing them.")
    ] = False,
) -> None:
    """Remove containers (and workspace volumes) left by vally runs that are no longer
    running on this host. Containers of live runs and of other hosts are kept."""
    try:
        lines, problems = prune(dry_run=dry_run)
        verb = "would remove" if dry_run else "removed"
        for line in lines:
            typer.echo(f"{verb} {line}")
        typer.echo(f"{len(lines) - len(problems)} container(s) {verb}.")
        if problems:
            raise CleanupError(
                "could not remove: " + "; ".join(problems),
                hint="check 'docker ps -a --filter label=vally.run-id' and remove by hand",
            )
    except VallyError as exc:
        typer.echo(f"error[{exc.code}]: {exc.render()}", err=True)
        raise typer.Exit(1) from None


def build_app() -> typer.Typer:
    """The ``docker`` command group."""
    group = command_group("docker", "Manage what the docker backend created.")
    group.command("prune")(prune_command)
    return group


def register(app: typer.Typer) -> None:
    """Mount ``vally docker ...`` on the CLI application."""
    app.add_typer(build_app(), name="docker")
