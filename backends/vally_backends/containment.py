"""How the ``local`` backend keeps every process of a trial contained.

Two layers, neither of which relies on process groups (which ``setsid`` leaves):

1. **A keeper per command** (:mod:`vally_backends.reaper`): every command runs below a
   child subreaper that adopts whatever the command leaves behind and kills it all on
   request, on a timeout, or when vally dies (keepers are long-lived and serve one command
   at a time: :mod:`vally_backends.keeper_host`).
2. **A per-sandbox marker**: every command gets ``VALLY_CELL=<token>`` in its environment,
   inherited by everything it starts. ``/proc/<pid>/environ`` then names the sandbox a
   process belongs to, even after its keeper was killed. The token starts with the pid and
   start time of the vally process that owns it, so a later run can tell leftovers of a dead
   vally (:func:`sweep_dead`) from processes of a live one.

A process that both kills its keeper and replaces its environment escapes both layers; the
``local`` backend is not a security boundary (use ``docker`` for untrusted agents). Both
layers need Linux (``prctl`` and ``/proc``); elsewhere only the process group of each
command is reached.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

CELL_ENV = "VALLY_CELL"
"""The environment variable marking every process of a sandbox."""

MAX_KILL_ROUNDS = 1000
"""Upper bound of kill-and-rescan rounds when stopping marked processes."""


def _start_time(pid: int) -> str | None:
    """The start time of ``pid`` in clock ticks since boot (None when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[19].decode("ascii")
    except (OSError, IndexError):
        return None


_own_start: dict[int, str] = {}
"""This process's start time by pid (read once; a forked child has a pid of its own)."""


def new_token() -> str:
    """A fresh marker for one sandbox: ``<vally pid>.<its start time>.<random>``."""
    pid = os.getpid()
    started = _own_start.get(pid)
    if started is None:
        started = _own_start[pid] = _start_time(pid) or "0"
    return f"{pid}.{started}.{os.urandom(8).hex()}"


def owner_mark() -> str:
    """``<vally pid>.<its start time>``: put in the names of what this process leaves on
    disk, so that a later run can tell that its owner died (see :func:`owner_alive`)."""
    return new_token().rsplit(".", 1)[0]


def can_tell_owners() -> bool:
    """Whether a process's start time can be read here (Linux's ``/proc``): without it no
    owner can be told dead, and nothing is swept."""
    return _start_time(os.getpid()) is not None


def owner_alive(token: str) -> bool:
    """Whether the vally process that created ``token`` still runs."""
    pid, _, rest = token.partition(".")
    started = rest.partition(".")[0]
    return pid.isdigit() and _start_time(int(pid)) == started


def _marks() -> Iterator[tuple[int, str]]:
    """``(pid, token)`` of every live process carrying a marker (zombies skipped)."""
    prefix = f"{CELL_ENV}=".encode()
    own = os.getpid()
    try:
        names = os.listdir("/proc")
    except OSError:  # no /proc (not Linux): nothing can be found this way
        return
    for name in names:
        if not name.isdigit() or int(name) == own:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                environ = fh.read()
        except OSError:  # gone, a zombie's empty environ, or not ours to read
            continue
        for entry in environ.split(b"\0"):
            if entry.startswith(prefix):
                yield int(name), entry[len(prefix) :].decode("ascii", "replace")
                break


def marked(token: str) -> list[int]:
    """Pids of live processes carrying ``token``."""
    return [pid for pid, found in _marks() if found == token]


def kill_marked(token: str) -> int:
    """SIGKILL every process carrying ``token``, rescanning until none is left; the number
    killed."""
    total = 0
    for _ in range(MAX_KILL_ROUNDS):
        pids = marked(token)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                total += 1
            except (ProcessLookupError, PermissionError):
                pass
    return total


def sweep_dead() -> int:
    """SIGKILL processes left by sandboxes of vally processes that are gone (killed with
    SIGKILL, say); the number killed."""
    dead = {token for _, token in _marks() if not owner_alive(token)}
    return sum(kill_marked(token) for token in dead)
