"""The console reads its terminal's size once, when it is made, not on every print."""

from __future__ import annotations

import fcntl
import io
import os
import struct
import termios
from collections.abc import Iterator

import pytest
from rich.table import Table

from vally_builtin.reporters.console import make_console


@pytest.fixture
def terminal() -> Iterator[io.TextIOWrapper]:
    """A real pseudo-terminal of 132 columns and 40 lines."""
    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 132, 0, 0))
    handle = os.fdopen(follower, "w")
    try:
        yield handle
    finally:
        handle.close()
        os.close(leader)


def _print_tables(console: object, count: int) -> None:
    for index in range(count):
        table = Table("stimulus", "passed")
        table.add_row(f"s{index}", "yes")
        console.print(table)  # type: ignore[attr-defined]


def test_terminal_size_is_read_once(
    terminal: io.TextIOWrapper, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("COLUMNS", raising=False)
    real = os.get_terminal_size
    calls: list[object] = []

    def counting(*args: int) -> os.terminal_size:
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(os, "get_terminal_size", counting)
    console = make_console(terminal)
    assert (console.width, console.height) == (132, 40)
    _print_tables(console, 30)
    assert len(calls) == 1


def test_plain_output_never_asks_for_a_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    calls: list[object] = []
    monkeypatch.setattr(os, "get_terminal_size", lambda *a: calls.append(a))
    stream = io.StringIO()
    console = make_console(stream)
    _print_tables(console, 30)
    assert console.width == 120 and not calls
    assert "s29" in stream.getvalue() and "\x1b[" not in stream.getvalue()
