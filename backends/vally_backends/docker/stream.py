"""A raw, hijacked ``docker exec`` connection: multiplexed stdout/stderr frames over a socket.

Blocking code only: the sandbox calls it from worker threads (``asyncio.to_thread``).
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import threading
import time
from typing import Any

STDIN, STDOUT, STDERR = 0, 1, 2
_HEADER = struct.Struct(">BxxxL")
_CHUNK = 65536


class ExecStream:
    """Reads the frames of one exec's attached socket and writes its stdin.

    Args:
        sock: What ``APIClient.exec_start(..., socket=True)`` returned.
    """

    def __init__(self, sock: Any) -> None:
        self._holder = sock
        raw = getattr(sock, "_sock", sock)
        self._sock: socket.socket = raw
        self._buffer = bytearray()
        self._eof = False
        self._closed = False
        self._lock = threading.Lock()

    @property
    def eof(self) -> bool:
        """True once the daemon closed the output side (the process and its pipes ended)."""
        return self._eof

    def _pending(self) -> bool:
        pending = getattr(self._sock, "pending", None)
        return bool(pending and pending())

    def _fill(self, wait: float) -> bool:
        """Read what is available within ``wait`` seconds; False on timeout."""
        if self._eof or self._closed:
            return False
        if not self._pending():
            try:
                ready, _, _ = select.select([self._sock], [], [], max(wait, 0.0))
            except (OSError, ValueError):
                self._eof = True
                return False
            if not ready:
                return False
        try:
            chunk = self._sock.recv(_CHUNK)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            chunk = b""
        if not chunk:
            self._eof = True
            return False
        self._buffer += chunk
        return True

    def next_frame(self, wait: float) -> tuple[int, bytes] | None:
        """The next ``(stream, data)`` frame, or None when none arrived within ``wait``
        seconds or the stream ended (see :attr:`eof`)."""
        deadline = time.monotonic() + wait
        while True:
            if len(self._buffer) >= _HEADER.size:
                kind, size = _HEADER.unpack_from(self._buffer)
                if len(self._buffer) >= _HEADER.size + size:
                    data = bytes(self._buffer[_HEADER.size : _HEADER.size + size])
                    del self._buffer[: _HEADER.size + size]
                    return kind, data
            remaining = deadline - time.monotonic()
            if self._eof or remaining < 0:
                return None
            self._fill(remaining)

    def send(self, data: bytes) -> None:
        """Write ``data`` to the process's stdin."""
        with self._lock:
            self._sock.sendall(data)

    def close_stdin(self) -> None:
        """Half-close the connection: the process reads end of file on stdin."""
        with self._lock, contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        """Close the connection (idempotent)."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):
            self._sock.close()
        with contextlib.suppress(Exception):
            self._holder.close()
        response = getattr(self._holder, "_response", None)
        if response is not None:
            with contextlib.suppress(Exception):
                response.close()


def take_pid_line(head: bytearray) -> int | None:
    """The pid the exec wrapper writes as the first line of standard error, read from the
    start of ``head`` (the command's standard error so far).

    Returns None while that line is not complete. A pid is taken out of ``head``; a first
    line that is not a pid (the wrapper did not run) is left in place and gives -1, so the
    caller passes everything through as output."""
    line, sep, rest = head.partition(b"\n")
    if not sep:
        return None
    try:
        pid = int(line)
    except ValueError:
        return -1
    head[:] = rest
    return pid
