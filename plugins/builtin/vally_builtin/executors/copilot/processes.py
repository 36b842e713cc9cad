"""Stopping the Copilot CLI and everything it started (shells, MCP servers).

The CLI runs tools in processes of their own, some in new sessions, so a process-group kill
can miss them. :func:`descendants` walks ``/proc`` from the CLI's pid; the executor takes
that list before it stops the CLI and kills whatever is still alive afterwards.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path


def _children(pid: int) -> list[int]:
    found: list[int] = []
    tasks = Path(f"/proc/{pid}/task")
    with contextlib.suppress(OSError):
        for task in tasks.iterdir():
            with contextlib.suppress(OSError, ValueError):
                text = (task / "children").read_text()
                found += [int(p) for p in text.split()]
    return found


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (children first), read from ``/proc`` (empty where
    there is no ``/proc``)."""
    seen: list[int] = []
    queue = [pid]
    while queue:
        for child in _children(queue.pop()):
            if child not in seen:
                seen.append(child)
                queue.append(child)
    return seen


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True
    return state != "Z"


def kill_all(pids: list[int]) -> list[int]:
    """Send SIGKILL to each pid still alive; return the pids that were."""
    killed = []
    for pid in pids:
        if alive(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
    return killed
