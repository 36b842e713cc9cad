"""Commands of the ``local`` backend, each started below its own keeper: starting one,
reading its status and output, feeding its input, and stopping its whole tree.

A command is sent to an idle keeper of this thread (:mod:`vally_backends.keeper_host`), a
long-lived child subreaper (:mod:`vally_backends.reaper`) that runs it. Nothing here waits
on a process id: the keeper's status pipe says when the command started and ended, and its
end of file says the command's whole tree is gone (the keeper then serves the next one).
Output and input are plain pipes read and written by the event loop directly (no subprocess
transport), so a command costs a few system calls here.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping, Sequence

from vally_backends.keeper_host import Keeper, KeeperRequest, pool, spawn

KILL_GRACE_SECONDS = 2.0
"""How long a command's processes get between SIGTERM and SIGKILL."""

KEEPER_MARGIN_SECONDS = 3.0
"""How long past the grace period a keeper may take to kill and reap its tree before its
process group is killed outright."""

CHUNK = 65536
"""Bytes read from a pipe at once."""


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def append_capped(sink: bytearray, data: bytes, limit: int) -> bool:
    """Append ``data`` to ``sink`` while ``sink`` holds at most ``limit`` bytes; True when
    bytes were dropped."""
    room = limit - len(sink)
    if room >= len(data):
        sink += data
        return False
    if room > 0:
        sink += data[:room]
    return True


class Status:
    """The read end of a keeper's status pipe (see :mod:`vally_backends.reaper`).

    ``started`` resolves with ``run PID`` or ``noexec ERRNO``, ``ended`` with ``exit N`` or
    ``signal N``, and ``gone`` at end of file (the command's whole tree is gone, or the
    keeper died: ``finished`` tells which); what the keeper never said resolves with None.
    """

    def __init__(self, fd: int, loop: asyncio.AbstractEventLoop) -> None:
        self._fd = fd
        self._loop = loop
        self._buffer = bytearray()
        self.started: asyncio.Future[str | None] = loop.create_future()
        self.ended: asyncio.Future[str | None] = loop.create_future()
        self.gone: asyncio.Future[None] = loop.create_future()
        self.finished = False
        """Whether the keeper said ``done`` (it serves the next command)."""
        os.set_blocking(fd, False)
        loop.add_reader(fd, self._readable)

    def _readable(self) -> None:
        try:
            chunk = os.read(self._fd, 256)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        self._buffer += chunk
        while b"\n" in self._buffer:
            line, _, rest = bytes(self._buffer).partition(b"\n")
            self._buffer[:] = rest
            self._resolve(line.decode("ascii", "replace").strip())
        if not chunk:
            self.close()

    def _resolve(self, line: str) -> None:
        kind = line.partition(" ")[0]
        if kind in ("run", "noexec") and not self.started.done():
            self.started.set_result(line)
        elif kind in ("exit", "signal") and not self.ended.done():
            self.ended.set_result(line)
        elif kind == "done":
            self.finished = True

    def close(self) -> None:
        """Stop reading; pending futures resolve with None."""
        if self._fd >= 0:
            self._loop.remove_reader(self._fd)
            os.close(self._fd)
            self._fd = -1
        for future in (self.started, self.ended, self.gone):
            if not future.done():
                future.set_result(None)


class Capture:
    """Reads a pipe to its end, keeping at most ``limit`` bytes; ``done`` resolves with
    True when bytes were dropped."""

    def __init__(self, fd: int, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        self._fd = fd
        self._loop = loop
        self._limit = limit
        self._cut = False
        self.data = bytearray()
        self.done: asyncio.Future[bool] = loop.create_future()
        os.set_blocking(fd, False)
        loop.add_reader(fd, self._readable)

    def _readable(self) -> None:
        try:
            chunk = os.read(self._fd, CHUNK)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk:
            self._cut = append_capped(self.data, chunk, self._limit) or self._cut
        else:
            self.close()

    def close(self) -> None:
        """Stop reading (what was read stays in ``data``)."""
        if self._fd >= 0:
            self._loop.remove_reader(self._fd)
            os.close(self._fd)
            self._fd = -1
        if not self.done.done():
            self.done.set_result(self._cut)


async def feed(fd: int, data: bytes) -> None:
    """Write ``data`` to the pipe ``fd`` without blocking the loop, then close it (a reader
    that stopped reading ends the writing quietly)."""
    loop = asyncio.get_running_loop()
    view = memoryview(data)
    os.set_blocking(fd, False)
    try:
        while view:
            try:
                written = os.write(fd, view)
            except BlockingIOError:
                ready = loop.create_future()
                loop.add_writer(fd, ready.set_result, None)
                try:
                    await ready
                finally:
                    loop.remove_writer(fd)
                continue
            view = view[written:]
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        os.close(fd)


class KeptCommand:
    """A command running below its keeper: the keeper's status and the command's pipes.

    Attributes:
        keeper: The keeper serving the command.
        status: The keeper's status pipe.
        stdin: The write end of the command's standard input, when it was asked for.
        stdout: The read end of its standard output.
        stderr: The read end of its standard error, when it was asked for.
    """

    def __init__(
        self,
        keeper: Keeper,
        status: Status,
        stdin: int | None,
        stdout: int | None,
        stderr: int | None,
    ) -> None:
        self.keeper = keeper
        self.status = status
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr

    @property
    def pid(self) -> int | None:
        """The command's process id, which is also its session and process-group id (None
        when it did not start)."""
        line = self.status.started.result() if self.status.started.done() else None
        kind, _, number = (line or "").partition(" ")
        return int(number) if kind == "run" and number.isdigit() else None

    @property
    def keeper_alive(self) -> bool:
        """Whether the keeper still serves this command (it does while orphans remain)."""
        return not self.status.gone.done()

    @property
    def returncode(self) -> int | None:
        """The command's exit status once it ended (negative: killed by that signal); None
        before, or when the keeper died without saying."""
        line = self.status.ended.result() if self.status.ended.done() else None
        if line is not None:
            kind, _, number = line.partition(" ")
            if number.lstrip("-").isdigit():
                return -int(number) if kind == "signal" else int(number)
        return None

    async def wait_exit(self, timeout: float | None) -> bool:
        """Wait until the command exits; False when ``timeout`` seconds passed first."""
        try:
            said = await asyncio.wait_for(asyncio.shield(self.status.ended), timeout)
            if said is None:  # the keeper died without a report: its own exit is the end
                await asyncio.wait_for(asyncio.shield(self.status.gone), timeout)
        except TimeoutError:
            return False
        return True

    async def wait_keeper(self, timeout: float | None) -> bool:
        """Wait until the keeper exits; False when ``timeout`` seconds passed first."""
        try:
            await asyncio.wait_for(asyncio.shield(self.status.gone), timeout)
        except TimeoutError:
            return False
        return True

    def release(self) -> None:
        """Close this side's pipe ends that nobody else took over."""
        for name in ("stdin", "stdout", "stderr"):
            fd = getattr(self, name)
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
                setattr(self, name, None)


def _pipes(stdin: bool, stderr: bool) -> tuple[list[int], list[int | None]]:
    """Our ends (stdin write, stdout read, stderr read; -1 when not asked for) and the
    command's ends (None: ``/dev/null``)."""
    ours: list[int] = []
    theirs: list[int | None] = []
    for wanted, outgoing in ((stdin, False), (True, True), (stderr, True)):
        if not wanted:
            ours.append(-1)
            theirs.append(None)
            continue
        read, write = os.pipe()
        ours.append(read if outgoing else write)
        theirs.append(write if outgoing else read)
    return ours, theirs


async def start_kept(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    stdin: bool,
    stderr: bool,
) -> KeptCommand:
    """Start ``argv`` below an idle keeper; return once the keeper reported the start
    (``status.started`` says ``run PID``, or ``noexec ERRNO`` when it could not start, or
    None when the keeper died first: killed by the command itself, say).

    Raises:
        OSError: No keeper could be reached or started.
        ValueError: An argument or variable contains a NUL byte.
    """
    if any("\0" in part for part in (*argv, cwd, *env, *env.values())):
        raise ValueError("a command, its folder or its environment contains a NUL byte")
    loop = asyncio.get_running_loop()
    status_r, status_w = os.pipe()
    ours, theirs = _pipes(stdin, stderr)
    try:
        keeper = spawn(
            KeeperRequest(
                argv=argv, cwd=cwd, env=env, grace=KILL_GRACE_SECONDS, status=status_w, stdio=theirs
            )
        )
    except BaseException:
        for mine in (status_r, *ours):
            if mine >= 0:
                os.close(mine)
        raise
    finally:
        for given in (status_w, *theirs):
            if given is not None:
                os.close(given)
    status = Status(status_r, loop)
    keepers = pool()
    status.gone.add_done_callback(lambda _: keepers.give_back(keeper, finished=status.finished))
    command = KeptCommand(
        keeper, status, ours[0] if stdin else None, ours[1], ours[2] if stderr else None
    )
    try:
        await asyncio.shield(status.started)
    except asyncio.CancelledError:
        await kill_process_tree(command)
        raise
    return command


async def kill_process_tree(command: KeptCommand, grace: float | None = None) -> None:
    """Stop ``command`` and everything below its keeper, whatever session or group it moved
    to: SIGTERM to the keeper (it passes SIGTERM on to every descendant and SIGKILLs them
    all after its grace period), SIGKILL to the command's group and to the keeper when the
    tree is not gone ``grace`` seconds (default :data:`KILL_GRACE_SECONDS`) later plus a
    margin, then wait until the keeper closed the status pipe.
    """
    if command.keeper_alive:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(command.keeper.pid, signal.SIGTERM)
        wait = (KILL_GRACE_SECONDS if grace is None else grace) + KEEPER_MARGIN_SECONDS
        finished = False
        try:
            finished = await command.wait_keeper(wait)
        except asyncio.CancelledError:
            pass
        finally:
            if not finished and command.keeper_alive:  # a keeper that did not finish
                if command.pid is not None:
                    _signal_group(command.pid, signal.SIGKILL)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(command.keeper.pid, signal.SIGKILL)
        if command.keeper_alive:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(command.status.gone)
    command.release()
