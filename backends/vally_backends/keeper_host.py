"""The vally side of the keepers (:mod:`vally_backends.reaper`): a pool of long-lived keeper
processes per vally thread, each serving one command at a time.

Starting a Python interpreter per command cost about 30 ms of CPU, and forking one about
6 ms; a keeper that is already running starts a command with ``vfork`` as
:mod:`subprocess` does. A keeper is taken from the pool for a command and given back once
the command's whole tree is gone (its status pipe closed); the pool grows to the number of
commands running at once. Keepers are started in a session of their own. Each asks for
``SIGHUP`` when the thread that started it ends (``prctl(PR_SET_PDEATHSIG)`` follows the
thread), which is why each thread has its own pool.
"""

from __future__ import annotations

import array
import marshal
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

REAPER = Path(__file__).with_name("reaper.py")
"""The module every keeper runs (see :data:`KEEPER_MAIN`)."""

KEEPER_MAIN = (
    "import sys; sys.path.append(sys.argv[2]); import reaper; "
    "sys.exit(reaper.serve(int(sys.argv[1])))"
)
"""What a keeper's interpreter runs: :data:`REAPER` imported from its folder (after the
standard library's), so its cached bytecode is used; a script named on the command line
would be compiled again by every keeper."""


@dataclass(frozen=True)
class KeeperRequest:
    """A command for a keeper to run.

    Attributes:
        argv: The command.
        cwd: Its working directory.
        env: Its whole environment.
        grace: Seconds its processes get between SIGTERM and SIGKILL when it is stopped.
        status: The write end of the pipe the keeper reports the command's start and end on.
        stdio: Its standard input, output and error (None: ``/dev/null``).
    """

    argv: Sequence[str]
    cwd: str
    env: Mapping[str, str]
    grace: float
    status: int
    stdio: Sequence[int | None]


def _plain(text: str) -> str:
    """``text`` as a plain ``str``: :mod:`marshal` writes no subclass of it.

    Raises:
        TypeError: ``text`` is not a string.
    """
    if not isinstance(text, str):
        raise TypeError(f"a keeper request takes strings, not {type(text).__name__}")
    return text if type(text) is str else str.__str__(text)


class Keeper:
    """One running keeper and the socket its requests are sent on."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-I",
                    "-S",
                    "-c",
                    KEEPER_MAIN,
                    str(theirs.fileno()),
                    str(REAPER.parent),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._socket = ours

    @property
    def pid(self) -> int:
        """The keeper's process id."""
        return self.process.pid

    @property
    def alive(self) -> bool:
        """Whether the keeper still runs."""
        return self.process.poll() is None

    def send(self, request: KeeperRequest) -> None:
        """Ask the keeper to run ``request``'s command, passing it the status pipe and the
        command's standard streams.

        Raises:
            OSError: The keeper is gone (its socket is closed).
        """
        body = marshal.dumps(
            {
                "argv": [_plain(part) for part in request.argv],
                "cwd": _plain(request.cwd),
                "env": {_plain(name): _plain(value) for name, value in request.env.items()},
                "grace": float(request.grace),
                "stdio": [fd is not None for fd in request.stdio],
            }
        )
        fds = [request.status, *(fd for fd in request.stdio if fd is not None)]
        message = len(body).to_bytes(4, "big") + body
        rights = (socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())
        # One call for the length, the body and the descriptors (which travel with the
        # first bytes): the keeper wakes once per request, not once per part.
        sent = self._socket.sendmsg([message], [rights])
        if sent < len(message):
            self._socket.sendall(message[sent:])

    def close(self) -> None:
        """Close the socket (the keeper then exits) and reap the keeper."""
        self._socket.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.discard()

    def discard(self) -> None:
        """Kill the keeper (one that died or misbehaved) and reap it."""
        self._socket.close()
        self.process.kill()
        self.process.wait()


class KeeperPool:
    """The idle keepers of one thread."""

    def __init__(self) -> None:
        self._idle: list[Keeper] = []

    def take(self) -> Keeper:
        """An idle keeper that still runs, or a new one."""
        while self._idle:
            keeper = self._idle.pop()
            if keeper.alive:
                return keeper
            keeper.discard()
        return Keeper()

    def give_back(self, keeper: Keeper, *, finished: bool) -> None:
        """Return ``keeper`` once its command's tree is gone (``finished``: it said so);
        one that died or did not finish is discarded."""
        if finished and keeper.alive:
            self._idle.append(keeper)
        else:
            keeper.discard()


_pools: dict[tuple[int, int], KeeperPool] = {}
_lock = threading.Lock()


def pool() -> KeeperPool:
    """The keeper pool of this process and thread."""
    key = (os.getpid(), threading.get_ident())
    with _lock:
        found = _pools.get(key)
        if found is None:
            found = _pools[key] = KeeperPool()
        return found


def spawn(request: KeeperRequest) -> Keeper:
    """Send one command to an idle keeper of this thread (see :meth:`Keeper.send`), or to a
    new one when the one taken turns out to be gone; the keeper now serving it. Give it
    back with :meth:`KeeperPool.give_back` once the status pipe closed."""
    keepers = pool()
    for attempt in (1, 2):
        keeper = keepers.take()
        try:
            keeper.send(request)
            return keeper
        except OSError:
            keeper.discard()
            if attempt == 2:
                raise
    raise AssertionError("unreachable")
