"""Helpers shared by the CLI commands: error reporting, exit codes, ``key=value`` flags."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn, TypeVar

import typer

from vally.errors import ConfigError, VallyError

T = TypeVar("T")

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def debug_enabled() -> bool:
    """True when ``--debug`` was given (or ``VALLY_DEBUG=1``): tracebacks are shown."""
    return os.environ.get("VALLY_DEBUG", "") not in ("", "0")


def fail(error: VallyError, code: int = EXIT_FAILURE) -> NoReturn:
    """Print ``error`` for the user (no traceback unless debugging) and exit."""
    typer.echo(f"error[{error.code}]: {error.render()}", err=True)
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


def run_guarded(fn: Callable[[], T]) -> T:
    """Call ``fn`` under :func:`user_errors`."""
    with user_errors():
        return fn()


def parse_key_values(
    items: Sequence[str], *, flag: str, collect_repeats: bool = False
) -> dict[str, str | list[str]]:
    """Parse repeated ``KEY=value`` flags.

    Args:
        items: The raw flag values.
        flag: The flag's name, for error messages.
        collect_repeats: When true, a repeated key becomes a list; otherwise the last wins.

    Raises:
        ConfigError: An item has no ``=`` or an empty key.
    """
    result: dict[str, str | list[str]] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"{flag} expects KEY=value, got {item!r}")
        if collect_repeats and key in result:
            previous = result[key]
            result[key] = [*previous, value] if isinstance(previous, list) else [previous, value]
        else:
            result[key] = value
    return result


def stdout_is_tty() -> bool:
    """True when standard output is an interactive terminal."""
    return sys.stdout.isatty()


def check_folder_flag(flag: str, value: str, path: Path) -> None:
    """Fail early when a folder flag (``--workspace``) names a file or a path under one.

    Raises:
        ConfigError: ``path`` or one of the folders above it is a file.
    """
    for folder in (path, *path.parents):
        if folder.exists():
            if not folder.is_dir():
                where = "is a file" if folder == path else f"is under the file {folder}"
                raise ConfigError(
                    f"{flag} {value}: {path} {where}, not a folder",
                    hint=f"pass a folder (it is created when missing) to {flag}",
                )
            return
