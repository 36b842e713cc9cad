"""The ``vally`` typer application and its entry point."""

from __future__ import annotations

import copy
import gc
import importlib
import os
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from vally._version import __version__
from vally.cli.common import coerce_given_values_only, command_group, show_argument_metavars
from vally.errors import PluginError, PluginLoadError, VallyError
from vally.plugins.groups import CLI_COMMAND_KIND
from vally.plugins.registry import Registry
from vally.plugins.settings import PluginSettings

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from vally.plugins.provenance import Registration

app = command_group(
    "vally",
    "Evaluate AI agents: run stimuli, grade trajectories, compare variants.",
    pretty_exceptions_enable=False,
    add_completion=True,
)

COMMAND_MODULES = ("vally.cli.eval",)
"""Modules that each define ``register(app)``."""

COMMAND_ORDER = ("lint", "schema", "eval", "grade", "compare", "new", "init", "export")
"""The commands ``vally --help`` lists first, in the order of the work (check, run,
re-grade, compare, scaffold, start, export), whether the kernel or a command extension adds
them; the other commands follow in the order they were added, and command groups after
them. A name that no installed package provides is skipped."""

GROUP_ORDER = ("plugins", "experiment")
"""The command groups listed first, in this order; the others follow as added."""


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


def _register_commands() -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(app)


def _register_extensions() -> None:
    """Mount the commands of installed CLI extensions (entry-point group ``vally.cli``).

    Each extension is a ``register(app)`` function resolved through the plugin registry, so
    blocking, the distribution filter, conflicts and provenance work as for every plugin. One
    that fails to load or to register becomes a command that explains the failure when it
    is invoked: ``vally --help`` and the other commands keep working.
    """
    registry = Registry(CLI_COMMAND_KIND, PluginSettings.from_env())
    for name in sorted(registry.names()):
        try:
            _mount_extension(registry.get(name))
        except PluginError as exc:
            _mount_broken_extension(name, exc)


def _order_commands() -> None:
    """Sort the registered commands by :data:`COMMAND_ORDER` and the groups by
    :data:`GROUP_ORDER` (stable: the others keep their order after the named ones)."""
    rank = {name: place for place, name in enumerate(COMMAND_ORDER)}
    app.registered_commands.sort(key=lambda command: rank.get(command.name or "", len(rank)))
    groups = {name: place for place, name in enumerate(GROUP_ORDER)}
    app.registered_groups.sort(key=lambda group: groups.get(group.name or "", len(groups)))


def _mount_extension(registration: Registration) -> None:
    """Call one extension's ``register(app)``; undo what it added when it raises."""
    commands, groups = len(app.registered_commands), len(app.registered_groups)
    try:
        registration.cls(app)
    except Exception as exc:
        del app.registered_commands[commands:], app.registered_groups[groups:]
        raise PluginLoadError(
            f"CLI command {registration.name!r} ({registration.provenance.label()}) failed "
            f"to register: {type(exc).__name__}: {exc}",
            hint=f"fix or uninstall {registration.provenance.label()}, or block it with "
            f"VALLY_BLOCK_PLUGINS={registration.name}",
        ) from exc


def _mount_broken_extension(name: str, error: VallyError) -> None:
    """Add command ``name`` that reports ``error`` (exit 1) whatever arguments it gets."""

    def broken() -> None:
        from vally.cli.common import user_errors

        with user_errors():
            raise error

    app.command(
        name,
        help=f"Unavailable: the '{name}' command extension failed to load.",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        add_help_option=False,
    )(broken)


show_argument_metavars()
coerce_given_values_only()
_register_commands()
_register_extensions()
_order_commands()


def invoked_app(args: Sequence[str], environ: Mapping[str, str] = os.environ) -> typer.Typer:
    """The application to run for the command line ``args``: :data:`app` itself, or, when
    ``args`` name one of its commands or groups first (after ``--debug`` at most), a copy of
    it holding that one alone.

    typer builds the click command of everything the application holds (each command's
    options, from its signature) before it parses a thing: about 12 ms of CPU for vally's
    13 commands and groups, where a run needs one. The copy keeps the root's options and
    callback, so the command parses, runs, reports errors and prints its help as it does in
    the whole application. The root's own help, ``--version``, an unknown name and shell
    completion (a ``_*_COMPLETE`` variable set) get the whole application.
    """
    rest = list(args)
    while rest and rest[0] == "--debug":
        del rest[0]
    if not rest or any(name.endswith("_COMPLETE") for name in environ):
        return app
    commands = [command for command in app.registered_commands if command.name == rest[0]]
    groups = [group for group in app.registered_groups if group.name == rest[0]]
    if len(commands) + len(groups) != 1:
        return app
    alone = copy.copy(app)
    alone.registered_commands = commands
    alone.registered_groups = groups
    return alone


def main() -> None:
    """Console-script entry point: runs :func:`invoked_app` for the process's arguments; the
    heap left is frozen (shutdown's GC over it: 60-80 ms)."""
    try:
        invoked_app(sys.argv[1:])()
    finally:
        gc.freeze()
