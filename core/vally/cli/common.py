"""Helpers shared by the CLI commands: error reporting, exit codes, ``key=value`` flags."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer

from vally.errors import SourceLocation, VallyError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from vally.engine.run import PreparedRun
    from vally.models.records import TrialResultRecord


EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_BUDGET = 3
"""A ``--max-cost``/``--max-tokens`` budget was reached: some planned trials never started."""
EXIT_INTERRUPTED = 130


def debug_enabled() -> bool:
    """True when ``--debug`` was given (or ``VALLY_DEBUG=1``): tracebacks are shown."""
    return os.environ.get("VALLY_DEBUG", "") not in ("", "0")


EXCERPT_FILE_BYTES = 8 * 1024 * 1024
"""A file larger than this is not read again to show the line of an error."""


def source_excerpt(location: SourceLocation | None) -> list[str]:
    """The line ``location`` points at, with a caret under its column::

         7 |   runs: zero
           |         ^

    Empty when there is no line, or the file cannot be read as text."""
    if location is None or location.line is None or location.line < 1:
        return []
    path = Path(location.file)
    try:
        if not path.is_file() or path.stat().st_size > EXCERPT_FILE_BYTES:
            return []
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    if location.line > len(lines):
        return []
    text = lines[location.line - 1].expandtabs(1)
    number = str(location.line)
    out = [f"  {number} | {text}"]
    if location.column is not None and 1 <= location.column <= len(text) + 1:
        out.append(f"  {' ' * len(number)} | {' ' * (location.column - 1)}^")
    return out


def fail(error: VallyError, code: int = EXIT_FAILURE) -> NoReturn:
    """Print ``error`` for the user (no traceback unless debugging), with the source line it
    points at, and exit."""
    typer.echo(f"error[{error.code}]: {error.render()}", err=True)
    for line in source_excerpt(error.location):
        typer.echo(line, err=True)
    cause = error.__cause__
    if cause is not None and not isinstance(cause, VallyError) and not _is_validation(cause):
        typer.echo(f"  caused by: {type(cause).__name__}: {cause}", err=True)
    raise typer.Exit(code)


def _is_validation(cause: BaseException) -> bool:
    # A pydantic ValidationError is already summarised in the message (field: problem);
    # its multi-line dump with documentation links would only repeat it.
    return type(cause).__name__ == "ValidationError" and type(cause).__module__.startswith(
        "pydantic"
    )


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn :class:`VallyError` into a clean message and exit 1."""
    try:
        yield
    except VallyError as exc:
        if debug_enabled():
            raise
        fail(exc)


@contextmanager
def kept_to_the_end() -> Iterator[None]:
    """Collect no garbage while the block builds what lives to the end of the command (the
    run engine's modules, the spec, the plan, the plugins), and freeze it afterwards.

    Collections during that work only scan the same long-lived objects again and again:
    importing the run engine alone took about 10 ms of collections, and a mock run's
    preparation a tenth of its CPU. Frozen, the objects are left out of every later
    collection; collection is enabled again when the block ends, however it ends.
    """
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def show_argument_metavars() -> None:
    """Make ``--help`` name an argument by its metavar alone (``PATH``), as it names options.

    typer prints an argument as its name followed by its Python type (``path <str>``) even when
    the argument declares a metavar; the type says nothing to someone writing a command line.
    Called once when the ``vally`` application is built; arguments without a metavar keep
    typer's rendering.
    """
    from typer.core import TyperArgument

    original = TyperArgument.display_type_rich
    if getattr(original, "_vally_metavar_only", False):
        return

    def display_type_rich(self: TyperArgument, ctx: Any) -> str | None:
        return None if self.metavar is not None else original(self, ctx)

    display_type_rich._vally_metavar_only = True  # type: ignore[attr-defined]
    TyperArgument.display_type_rich = display_type_rich  # type: ignore[method-assign,assignment]


def coerce_given_values_only() -> None:
    """Make typer build a parameter's coercion only for a value, not for an option left out.

    typer (from 0.2x) coerces every parameter of the invoked command through a pydantic
    adapter it builds on first use, and it asks for that adapter even when the option was
    not given and there is nothing to coerce (``None`` comes back as ``None``, or ``()`` for
    a repeatable option): ``vally eval`` has about 40 options, and their adapters, with the
    pydantic modules only they import, cost about 15 ms of CPU at every run's start. A
    parameter without a value now goes through typer's own pass-through coercion, which
    answers ``None`` the same way; one with a value gets the coercion typer builds, as
    before. Called once when the ``vally`` application is built; a typer without
    per-parameter coercion is left as it is.
    """
    try:
        from typer import core as typer_core
        from typer._coercion import PassThroughRuntimeParam
    except ImportError:  # pragma: no cover - a typer without per-parameter coercion
        return
    found = getattr(typer_core, "build_runtime_param", None)
    if found is None or getattr(found, "_vally_given_values_only", False):
        return
    build: Callable[[Any], Any] = found

    class GivenValuesOnly:
        """typer's coercion of one parameter, built for its first value."""

        def __init__(self, descriptor: Any) -> None:
            self.descriptor = descriptor
            self.built: Any = None
            self.absent = PassThroughRuntimeParam(
                annotation=descriptor.annotation, parameter_info=descriptor.parameter_info
            )

        def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
            if value is None:  # typer's answer to a missing value, without an adapter
                return self.absent.coerce(value, param=param, ctx=ctx)
            if self.built is None:
                self.built = build(self.descriptor)
            return self.built.coerce(value, param=param, ctx=ctx)

    def given_values_only(descriptor: Any) -> Any:
        return GivenValuesOnly(descriptor)

    given_values_only._vally_given_values_only = True  # type: ignore[attr-defined]
    setattr(typer_core, "build_runtime_param", given_values_only)  # noqa: B010


def command_group(
    name: str, help: str, *, add_completion: bool = False, **extra: Any
) -> typer.Typer:
    """A typer application for a command group (``vally experiment``, ``vally plugins``,
    a ``vally.cli`` extension): help without rich markup, completion options only where
    asked (the root ``vally`` command), and the group's help when it is called without a
    subcommand."""
    return typer.Typer(
        name=name,
        help=help,
        no_args_is_help=True,
        add_completion=add_completion,
        rich_markup_mode=None,
        **extra,
    )


def chosen_output(
    output: str | None, deprecated: str | None, deprecated_flag: str, *, default: str
) -> str:
    """The output format a command was asked for: ``--output``, else the deprecated
    spelling (with a one-line notice on standard error), else ``default``. Every command
    spells machine-readable output ``--output FORMAT``, as ``vally eval --output jsonl``.

    Raises:
        typer.BadParameter: Both spellings were given.
    """
    if deprecated is None:
        return default if output is None else output
    if output is not None:
        raise typer.BadParameter(
            f"give --output only ({deprecated_flag} is its deprecated spelling)",
            param_hint=deprecated_flag,
        )
    shown = deprecated_flag if deprecated_flag == "--json" else f"{deprecated_flag} {deprecated}"
    wanted = "json" if deprecated_flag == "--json" else deprecated
    typer.echo(f"warning: {shown} is deprecated; use --output {wanted}", err=True)
    return wanted


def say(message: str) -> None:
    """Print a line on standard error (where the run commands say why they exit so)."""
    typer.echo(message, err=True)


def report_observer_failures(prepared: PreparedRun) -> None:
    """Print the failures of non-critical reporters as warnings."""
    for failure in prepared.request.session.emitter.failures:
        if not failure.critical:
            say(
                f"warning: reporter {failure.observer!r} failed in {failure.hook}: "
                f"{type(failure.error).__name__}: {failure.error}"
            )


def report_judge_cache(prepared: PreparedRun) -> None:
    """Print the judge cache's hits and misses when graders called a judge."""
    judge = prepared.judge
    cache = judge.cache if judge is not None else None
    if cache is not None and cache.hits + cache.misses:
        say(cache.summary())


def report_tracebacks(records: Sequence[TrialResultRecord]) -> None:
    """With ``--debug``, print the traceback of each trial a plugin crashed; without it, say
    how to see them."""
    crashed = [r for r in records if r.error is not None and r.error.traceback]
    if not crashed:
        return
    if not debug_enabled():
        say(f"{len(crashed)} trial(s) crashed in a plugin; rerun with --debug for tracebacks")
        return
    for record in crashed:
        assert record.error is not None and record.error.traceback is not None
        say(f"--- {record.trial_id} ({record.error.phase}) at {record.error.location}:")
        say(record.error.traceback)
