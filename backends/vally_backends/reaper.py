"""The per-command keeper of the ``local`` backend: a child subreaper that owns one command's
whole process tree.

Run as ``python -I -S reaper.py STATUS_FD GRACE PROGRAM [ARGS...]`` (standard library
only). It marks itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``), so every
process the command starts stays below it whatever it does: ``setsid``, double forks,
``nohup`` and ``&`` only move a process into another session or process group, and a
process whose parent dies is re-parented to this keeper instead of to ``init``. Then:

* it starts the command (same session and process group, standard streams inherited) and
  gives its own standard streams up, so the pipes close when the command's tree closes them;
* it writes ``run PID`` to ``STATUS_FD`` once the program started (``noexec ERRNO`` when
  it could not be started), and ``exit N`` or ``signal N`` when the command ended, then
  closes it;
* it keeps reaping adopted orphans and exits once it has no child left;
* ``SIGTERM`` (or ``SIGINT``) stops the tree: SIGTERM to every descendant, SIGKILL to all
  of them after ``GRACE`` seconds, until none is left; ``SIGHUP`` kills at once. The
  keeper asks for ``SIGHUP`` when its parent (vally) dies, so a killed vally leaves nothing.
"""

# Started once per command: it imports as little as it can (no __future__, no typing).
import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36

_grace = 2.0
"""How long descendants get between SIGTERM and SIGKILL when the keeper is asked to stop
(the ``GRACE`` argument, in seconds)."""

_HANDLED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGALRM)
"""Signals the keeper handles (the command gets their default handling back)."""

MAX_KILL_ROUNDS = 10_000
"""Upper bound of kill-and-rescan rounds (each round kills every descendant it finds)."""


def _prctl(option: int, value: int) -> bool:
    """Call ``prctl(option, value)``; False when it is not available or fails."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, value, 0, 0, 0)) == 0
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
        if signal_tree(signal.SIGKILL) == 0:
            return


def _on_stop(signum: int, frame: object) -> None:
    """SIGTERM/SIGINT: pass SIGTERM on, and kill everything after the grace period."""
    signal_tree(signal.SIGTERM)
    signal.setitimer(signal.ITIMER_REAL, max(_grace, 0.001))


def _on_kill(signum: int, frame: object) -> None:
    """SIGHUP (parent died) or the grace timer: kill everything now."""
    kill_tree()


def _say(fd: int, line: str, *, last: bool = False) -> None:
    """Write one status line (and close the pipe after the last one)."""
    try:
        os.write(fd, line.encode("ascii") + b"\n")
        if last:
            os.close(fd)
    except OSError:
        pass


def _status_line(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return f"exit {os.waitstatus_to_exitcode(status)}"


def _start(argv: list[str]) -> tuple[int, int]:
    """Fork and exec ``argv``; returns (pid, errno of a failed exec or 0)."""
    check_r, check_w = os.pipe()  # not inheritable (PEP 446)
    pid = os.fork()
    if pid == 0:  # the command
        os.close(check_r)
        # Python ignores SIGPIPE and SIGXFSZ; the command gets the defaults, as from a shell.
        for sig in (*_HANDLED, signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
        try:
            os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(check_w, str(exc.errno or 2).encode("ascii"))
        os._exit(127)
    os.close(check_w)
    with os.fdopen(check_r, "rb") as check:
        failed = check.read()
    return pid, int(failed or b"0")


def _release_stdio() -> None:
    """Give up the standard streams so only the command's tree holds the pipes."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def main(argv: list[str]) -> int:
    """Run the command below this keeper (see the module docstring); the exit status is
    the command's (128 + N for a signal)."""
    global _grace
    status_fd, _grace = int(argv[1]), float(argv[2])
    os.set_inheritable(status_fd, False)
    parent = os.getppid()
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _on_stop)
    signal.signal(signal.SIGHUP, _on_kill)
    signal.signal(signal.SIGALRM, _on_kill)
    _prctl(PR_SET_PDEATHSIG, signal.SIGHUP)
    if os.getppid() != parent:  # the parent died before the request took effect
        return 1
    command, errno = _start(argv[3:])
    if errno:
        os.waitpid(command, 0)
        _say(status_fd, f"noexec {errno}", last=True)
        return 127
    _say(status_fd, f"run {command}")
    _release_stdio()
    code = 0
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        if pid == command:
            _say(status_fd, _status_line(status), last=True)
            code = 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
