"""The keepers of the ``local`` backend: long-lived child subreapers, each owning the whole
process tree of one command at a time.

Run as ``python -I -S reaper.py SOCKET_FD``, or imported from this folder with
:func:`serve` called (as :mod:`vally_backends.keeper_host` starts it, so that its cached
bytecode is used); standard library only. The keeper marks itself a *child subreaper*
(``prctl(PR_SET_CHILD_SUBREAPER)``), so every process a command starts stays below it
whatever it does: ``setsid``, double forks, ``nohup`` and ``&`` only move a
process into another session or process group, and a process whose parent dies is
re-parented to this keeper instead of to ``init``. It then serves requests read from the
Unix stream socket ``SOCKET_FD`` (see :func:`serve`), one at a time; for each:

* it starts the command in a session of its own with the standard streams it was sent
  (``vfork``, as :mod:`subprocess` does: no interpreter start-up and no copy of this one
  per command) and writes ``run PID`` to the request's status pipe (``noexec ERRNO`` when
  the program could not be started or its folder not entered);
* it writes ``exit N`` or ``signal N`` when the command ended, keeps reaping adopted
  orphans, and once it has no child left writes ``done`` and closes the status pipe (end
  of file without ``done``: the keeper died). Only then does it read the next request;
* ``SIGTERM`` (or ``SIGINT``) while it serves a command stops that tree: SIGTERM to every
  descendant, SIGKILL to all of them after the request's grace period, until none is left;
  ``SIGHUP`` kills the tree at once and ends the keeper. The keeper asks for ``SIGHUP`` when
  its parent (the vally thread that started it) dies, so a killed vally leaves nothing.
  Signals that arrive while it serves nothing are ignored.

The keeper exits when its socket closes.
"""

# Started a few times per vally thread (once per concurrent command): standard library only,
# and no module it does not need. json and re, typing, subprocess, and the enum classes of
# signal and socket were over half of a keeper's start-up CPU; the C modules under them
# (_signal, _socket) and os.posix_spawn do what the keeper asks of them.
from __future__ import annotations

import _socket
import ctypes
import marshal
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal as _signal  # the same functions and numbers, as the stubs know them
    from typing import Any
else:
    import _signal

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36

_grace = 2.0
"""How long descendants get between SIGTERM and SIGKILL when the keeper is asked to stop
(the request's ``grace``, in seconds)."""

MAX_KILL_ROUNDS = 10_000
"""Upper bound of kill-and-rescan rounds (each round kills every descendant it finds)."""


_libc: list[ctypes.CDLL] = []
"""The C library, loaded once."""


def _prctl(option: int, value: int) -> bool:
    """Call ``prctl(option, value)``; False when it is not available or fails."""
    try:
        if not _libc:
            _libc.append(ctypes.CDLL(None, use_errno=True))
        return int(_libc[0].prctl(option, value, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _parents() -> list[tuple[int, int, str]]:
    """``(pid, parent pid, state)`` of every process in ``/proc``."""
    found: list[tuple[int, int, str]] = []
    try:
        names = os.listdir("/proc")
    except OSError:  # no /proc (not Linux): only the process group is reachable
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        found.append((int(name), int(fields[1]), fields[0].decode("ascii", "replace")))
    return found


def descendants(root: int) -> list[int]:
    """Pids of every live (not zombie) process below ``root``."""
    children: dict[int, list[int]] = {}
    states: dict[int, str] = {}
    for pid, ppid, state in _parents():
        children.setdefault(ppid, []).append(pid)
        states[pid] = state
    found: list[int] = []
    stack = list(children.get(root, []))
    while stack:
        pid = stack.pop()
        if states.get(pid) not in ("Z", "X"):
            found.append(pid)
        stack.extend(children.get(pid, []))
    return found


def signal_tree(sig: int) -> int:
    """Send ``sig`` to every descendant of this process; the number signalled."""
    targets = descendants(os.getpid())
    for pid in targets:
        try:  # noqa: SIM105 - contextlib costs an import
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    return len(targets)


def kill_tree() -> None:
    """SIGKILL every descendant, rescanning until none is left (processes forking meanwhile
    are found in the next round; a fork pending a fatal signal does not complete)."""
    for _ in range(MAX_KILL_ROUNDS):
        if signal_tree(_signal.SIGKILL) == 0:
            return


_serving = False
"""Whether a command's tree is being served (signals are ignored otherwise)."""


def _on_stop(signum: int, frame: object) -> None:
    """SIGTERM/SIGINT: pass SIGTERM on, and kill everything after the grace period."""
    if _serving:
        signal_tree(_signal.SIGTERM)
        _signal.setitimer(_signal.ITIMER_REAL, max(_grace, 0.001))


def _on_alarm(signum: int, frame: object) -> None:
    """The grace timer: kill the tree now."""
    if _serving:
        kill_tree()


def _on_hangup(signum: int, frame: object) -> None:
    """SIGHUP (the parent died): kill the tree now and end."""
    kill_tree()
    os._exit(129)


def _say(fd: int, line: str) -> None:
    """Write one status line."""
    try:  # noqa: SIM105 - contextlib costs an import
        os.write(fd, line.encode("ascii") + b"\n")
    except OSError:
        pass


def _status_line(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return f"exit {os.waitstatus_to_exitcode(status)}"


ENOENT, ENOTDIR, EINVAL = 2, 20, 22
"""The errno values the start reports (Linux's, as ``errno`` has them; not imported)."""

RESTORED_SIGNALS = (_signal.SIGPIPE, _signal.SIGXFSZ)
"""Signals Python ignores that a command gets back at their default (as :mod:`subprocess`
restores them)."""


def _candidates(program: str, env: dict[str, str]) -> list[str]:
    """The paths to try for ``program``, in order: itself when it names a folder, else one
    per entry of the command's ``PATH`` (the system's default when it has none), as
    :mod:`subprocess` searches. The rule of :func:`os.get_exec_path`, without the
    :mod:`warnings` import and context it enters on every call (it allows bytes keys)."""
    if "/" in program:
        return [program]
    folders = env.get("PATH", os.defpath).split(os.pathsep)
    return [os.path.join(folder, program) for folder in folders]


def _spawn(argv: list[str], env: dict[str, str], stdio: list[int | None]) -> tuple[int, int]:
    """Start ``argv`` from the current folder in a session of its own, trying each
    candidate path as ``execvpe`` does; returns (pid, 0) or (0, errno): the first error
    other than a missing file or folder, else the last."""
    actions = [
        (os.POSIX_SPAWN_DUP2, fd, target) for target, fd in enumerate(stdio) if fd is not None
    ]
    first_error = 0
    last_error = ENOENT
    for path in _candidates(argv[0], env):
        try:
            os.stat(path)  # a missing file costs a stat, not a process start
            return os.posix_spawn(
                path, argv, env, file_actions=actions, setsid=True, setsigdef=RESTORED_SIGNALS
            ), 0
        except OSError as exc:
            last_error = exc.errno or ENOENT
            if last_error not in (ENOENT, ENOTDIR) and not first_error:
                first_error = last_error
    return 0, first_error or last_error


def _start(request: dict[str, Any], stdio: list[int | None]) -> tuple[int, int]:
    """Start the request's command in its folder, in a session of its own, its standard
    streams those sent (this keeper's own, ``/dev/null``, where none was); returns (pid, 0)
    or (0, errno of a failed chdir or exec).

    ``posix_spawn`` starts it with ``vfork`` and reports a failed exec as :mod:`subprocess`
    does, at a fraction of ``Popen``'s cost per command. It has no working folder of its
    own: the keeper, which serves one command at a time, enters the folder for the start
    and leaves it after, so it holds no workspace open."""
    try:
        os.chdir(request["cwd"])
    except OSError as exc:
        return 0, exc.errno or ENOENT
    except (ValueError, TypeError):
        return 0, EINVAL
    try:
        return _spawn(request["argv"], request["env"], stdio)
    except (ValueError, TypeError, IndexError):
        return 0, EINVAL
    finally:
        os.chdir("/")


def run(request: dict[str, Any], status_fd: int, stdio: list[int | None]) -> None:
    """Run one command below this keeper and report on ``status_fd`` (see the module
    docstring); return once its whole tree is gone."""
    global _grace, _serving
    _grace = float(request["grace"])
    _serving = True
    try:
        command, errno = _start(request, stdio)
        for fd in stdio:
            if fd is not None:
                os.close(fd)
        if errno:
            _say(status_fd, f"noexec {errno}")
            return
        _say(status_fd, f"run {command}")
        while True:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                break
            if pid == command:
                _say(status_fd, _status_line(status))
    finally:
        _serving = False
        _signal.setitimer(_signal.ITIMER_REAL, 0)
        _say(status_fd, "done")
        os.close(status_fd)


MAX_FDS = 4
"""File descriptors one request carries: the status pipe and up to three standard streams."""


def _receive(sock: _socket.socket) -> tuple[bytes, list[int]] | None:
    """One request: its body and the descriptors sent with it (None at end of file).

    A request is a 4-byte big-endian length and that many bytes of a :mod:`marshal`-ed
    dictionary (keeper and vally run one interpreter); the descriptors (status pipe first)
    travel with the length."""
    space = _socket.CMSG_SPACE(MAX_FDS * 4)
    head, ancillary, _, _ = sock.recvmsg(4, space)
    fds: list[int] = []
    for level, kind, data in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            for start in range(0, len(data) - 3, 4):
                fds.append(int.from_bytes(data[start : start + 4], sys.byteorder, signed=True))
    while head and len(head) < 4:
        more = sock.recv(4 - len(head))
        if not more:
            break
        head += more
    if len(head) < 4:
        for fd in fds:
            os.close(fd)
        return None
    size = int.from_bytes(head, "big")
    body = bytearray()
    while len(body) < size:
        chunk = sock.recv(size - len(body))
        if not chunk:
            return None
        body += chunk
    return bytes(body), fds


def serve(sock_fd: int) -> int:
    """Serve the requests read from ``sock_fd``, one at a time, until the socket closes."""
    parent = os.getppid()
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    for sig in (_signal.SIGTERM, _signal.SIGINT):
        _signal.signal(sig, _on_stop)
    _signal.signal(_signal.SIGALRM, _on_alarm)
    _signal.signal(_signal.SIGHUP, _on_hangup)
    _prctl(PR_SET_PDEATHSIG, _signal.SIGHUP)
    if os.getppid() != parent:  # the parent died before the request took effect
        return 1
    os.set_inheritable(sock_fd, False)  # passed to this keeper, but to none of its commands
    sock = _socket.socket(fileno=sock_fd)
    while True:
        received = _receive(sock)
        if received is None:
            return 0
        body, fds = received
        for fd in fds:
            os.set_inheritable(fd, False)
        request: dict[str, Any] = marshal.loads(body)
        sent = iter(fds[1:])
        stdio = [next(sent, None) if given else None for given in request["stdio"]]
        run(request, fds[0], stdio)


if __name__ == "__main__":
    sys.exit(serve(int(sys.argv[1])))
