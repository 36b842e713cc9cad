"""The command channel of a trial's container: its main process runs the sandbox's first
command, read from the container's standard input, instead of a ``docker exec``.

A ``docker exec`` costs the engine a second ``runc`` per command (about 55 ms of engine CPU
on a 2-CPU machine, a sixth of a trial; see ``docs/performance.md``, *Docker backend*),
which a ``docker run --rm`` never pays: there the command is the container's main process.
So the container's main process is a small shell loop, :data:`KEEPER_SCRIPT`, which waits
on its standard input. The sandbox attaches to the container once, sends the first command
as a script (:func:`channel_script`) and reads its output from the attach stream
(:class:`ChannelCommand`); later commands, and any the script cannot carry, go through
``docker exec`` as before. Once the keeper ran its one script it only reads, and drops,
what else arrives, until the sandbox closes the stream: the keeper then exits, and with it
the container, which is then removed without being killed.

What the script does for the command is what an exec does: the command runs in the
workspace (or its own folder) as the sandbox user, with the trial's variables and its own,
in a session of its own (``setsid``, so :data:`~vally_backends.docker.sandbox.STOP_SCRIPT`
stops it like any exec'd command), under the same pid-reporting wrapper, with its input
given exactly (``printf '%b'`` of the escaped bytes) or ``/dev/null``. Its end is marked on
both output streams with a random token, the exit status on standard output. A command the
channel cannot start the same way (no ``setsid`` in the image, a folder that cannot be
entered) is reported as such and runs through ``docker exec`` instead.

Only the first command uses the channel: whatever it leaves running could write to the
attach stream later, which would then mix with the next command's output. What arrives on
the stream after the first command is read and dropped until the sandbox closes.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Mapping, Sequence

from vally_backends.docker.stream import STDERR, STDOUT, ExecStream, take_pid_line

END_LINE = "__vally_run__"
"""The line that ends a script sent to the keeper."""

KEEPER_SCRIPT = (
    's=; while IFS= read -r l; do [ "$l" = ' + END_LINE + ' ] && break; s="$s$l\n"; done; '
    '[ -n "$s" ] && eval "$s"; while IFS= read -r l; do :; done'
)
"""The container's main process (``/bin/sh -c``): read one script up to :data:`END_LINE`,
run it, then read and drop everything else until standard input closes, and exit. With
nothing attached it waits for ever, as the idle process it replaces did."""

SCRIPT_LIMIT = 256 * 1024
"""Scripts longer than this (a long prompt on standard input, say) go through ``docker exec``:
the keeper's shell reads its input a byte at a time."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def quote(word: str) -> str:
    """``word`` as one single-quoted shell word (newlines may stay inside)."""
    return "'" + word.replace("'", "'\\''") + "'"


def escape_bytes(data: bytes) -> bytes:
    """``data`` escaped for ``printf '%b'`` inside single quotes: backslash, newline, single
    quote and NUL become escapes, every other byte stays as it is."""
    return (
        data.replace(b"\\", b"\\\\")
        .replace(b"\n", b"\\n")
        .replace(b"'", b"\\0047")
        .replace(b"\0", b"\\0000")
    )


def new_token() -> str:
    """A random end-of-command mark, different for every command."""
    return "vally-end-" + secrets.token_hex(16)


def channel_script(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    stdin: bytes | None,
    wrapper: str,
    token: str,
) -> bytes | None:
    """The script that runs ``argv`` as an exec would, marks its end with ``token``, and
    ends with :data:`END_LINE`; None when the channel cannot carry it (a variable name the
    shell cannot export, a NUL byte or text that is not UTF-8, a line that is the end
    line, or over :data:`SCRIPT_LIMIT`).

    On standard output the script ends with ``TOKEN STATUS`` (the command's exit status as
    its shell saw it, ``128 + N`` for signal N) or ``TOKEN x`` when the command could not be
    started this way; on standard error with ``TOKEN``."""
    words = [*argv, cwd, *env.values()]
    if any("\0" in word for word in words) or not all(_NAME.fullmatch(k) for k in env):
        return None
    exports = "".join(f"export {name}={quote(value)}; " for name, value in env.items())
    command = f"setsid /bin/sh -c {quote(wrapper)} vally-exec " + " ".join(map(quote, argv))
    start = f"if cd -- {quote(cwd)} 2>/dev/null && command -v setsid >/dev/null 2>&1; then\n("
    end = (
        ")\n"
        f"printf '%s %s\\n' {token} \"$?\"\n"
        f"else printf '%s x\\n' {token}; fi\n"
        f"printf '%s\\n' {token} >&2\n"
    )
    try:
        if stdin is None:
            run = f"{exports}exec {command} </dev/null".encode()
        else:
            run = (
                f"{exports}printf '%b' '".encode() + escape_bytes(stdin) + f"' | {command}".encode()
            )
        encoded = start.encode() + run + end.encode()
    except UnicodeEncodeError:
        return None
    if END_LINE.encode() in encoded.split(b"\n") or len(encoded) > SCRIPT_LIMIT:
        return None
    return encoded + END_LINE.encode() + b"\n"


class ChannelCommand:
    """The output of the command a :func:`channel_script` runs, read from the container's
    attach stream up to the end marks; it reads like an exec's (see ``_pump`` in
    :mod:`vally_backends.docker.sandbox`): :meth:`frame` hands out output with the marks and
    the wrapper's pid line taken out, :attr:`eof` is True once both marks arrived.

    Args:
        stream: The container's attach stream.
        token: The command's end mark.
        kill: Kills the process group of the pid it is given (from a ``docker exec``).
    """

    def __init__(self, stream: ExecStream, token: str, kill: Callable[[int], None]) -> None:
        self._source = stream
        self._token = token.encode()
        self._kill = kill
        self._pending = {STDOUT: bytearray(), STDERR: bytearray()}
        self._ended = {STDOUT: False, STDERR: False}
        self._status: bytes | None = None
        self.pid: int | None = None
        """The command's pid (its session and process group), from the wrapper's first
        standard-error line; -1 when that line was something else."""

    @property
    def eof(self) -> bool:
        """True once both end marks arrived, or the attach stream ended."""
        return (self._ended[STDOUT] and self._ended[STDERR]) or self._source.eof

    @property
    def started(self) -> bool:
        """False when the script said the command could not be started this way (it then
        has to run through ``docker exec``)."""
        return self._status != b"x"

    def kill(self) -> None:
        """Kill the command's whole process group, once its pid is known."""
        if self.pid is not None and self.pid > 0:
            self._kill(self.pid)

    def exit_code(self) -> int | None:
        """The command's exit status once its end mark arrived, else None."""
        status = self._status
        return int(status) if status is not None and status.isdigit() else None

    def frame(self, wait: float) -> tuple[int, bytes] | None:
        """The next piece of output as ``(stream, data)`` (``data`` may be empty), or None
        when nothing arrived within ``wait`` seconds."""
        got = self._source.next_frame(wait)
        if got is None:
            return None
        kind, data = got
        if kind not in self._pending or self._ended[kind]:
            return (kind, b"")  # after the mark: something the command left running
        pending = self._pending[kind]
        pending += data
        if kind == STDERR and self.pid is None and not pending.startswith(self._token):
            # No pid line before the end mark: the command was not started this way.
            self.pid = take_pid_line(pending)
            if self.pid is None:
                return (kind, b"")
        return (kind, self._take(kind, pending))

    def _take(self, kind: int, pending: bytearray) -> bytes:
        """What of ``pending`` is output for sure: up to the end mark once it is complete,
        else all but a tail that could be the start of the mark."""
        at = pending.find(self._token)
        if at < 0:
            keep = len(self._token) - 1
            cut = max(0, len(pending) - keep)
            out = bytes(pending[:cut])
            del pending[:cut]
            return out
        out = bytes(pending[:at])
        tail = bytes(pending[at + len(self._token) :])
        if b"\n" not in tail:
            del pending[:at]  # the mark's line is not complete yet
            return out
        if kind == STDOUT:
            self._status = tail.partition(b"\n")[0].strip()
        self._ended[kind] = True
        pending.clear()
        return out
