"""Deadlines on every phase of an HTTP connection, so a client that sends half a request
(or reads nothing of the answer) cannot hold a connection of ``vally serve`` for ever.

uvicorn closes a connection that stays idle after a response (``timeout_keep_alive``) and
refuses a request head larger than ``h11_max_incomplete_event_size``, but it waits without
end for the rest of a request head, for a request body, and for a client that stopped
reading. :class:`DeadlineProtocol` is uvicorn's h11 protocol with those three deadlines:

* **head**: from the connection (or the first byte of the next request on it) to the end
  of the request head, :attr:`Deadlines.head` seconds;
* **body**: from the end of the head to the end of the body, :attr:`Deadlines.body`;
* **send**: while the client reads nothing of a response the server is writing,
  :attr:`Deadlines.send`.

When one passes, the connection is answered ``408 Request Timeout`` (if no response was
started) and closed. Trickling one byte at a time does not extend a deadline: it is set
once per phase.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

MAX_HEAD_BYTES = 16 * 1024
"""The largest request head accepted (uvicorn's ``h11_max_incomplete_event_size``); a
larger one is a 400."""


@dataclass(frozen=True)
class Deadlines:
    """Seconds allowed for each phase of a connection (see the module)."""

    head: float = 10.0
    body: float = 10.0
    send: float = 30.0
    keep_alive: int = 5


_TIMEOUT_BODY = json.dumps(
    {"error": {"code": "request_timeout", "message": "the request was not sent in time"}}
).encode()
_TIMEOUT_RESPONSE = (
    b"HTTP/1.1 408 Request Timeout\r\n"
    b"content-type: application/json\r\n"
    b"connection: close\r\n"
    b"content-length: " + str(len(_TIMEOUT_BODY)).encode() + b"\r\n\r\n" + _TIMEOUT_BODY
)


class DeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol with deadlines on the request head, the request body and
    a client that reads nothing (:func:`protocol_with` sets them)."""

    deadlines = Deadlines()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._timer: asyncio.TimerHandle | None = None
        self._phase: str | None = None
        self._send_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Start the head deadline as soon as the connection is open."""
        super().connection_made(transport)  # type: ignore[arg-type]
        self._follow()

    def data_received(self, data: bytes) -> None:
        """Start the head deadline at the first byte of a request, then follow the phase."""
        if self._phase is None and self.conn.their_state is h11.IDLE:
            self._arm("head", self.deadlines.head)
        super().data_received(data)
        self._follow()

    def connection_lost(self, exc: Exception | None) -> None:
        """Drop the timers with the connection."""
        self._disarm()
        self._stop_send_timer()
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        """The client stopped reading: it has :attr:`Deadlines.send` seconds to go on."""
        super().pause_writing()
        if self._send_timer is None:
            self._send_timer = self.loop.call_later(self.deadlines.send, self._expired)

    def resume_writing(self) -> None:
        """The client reads again."""
        self._stop_send_timer()
        super().resume_writing()

    def _follow(self) -> None:
        """Set the deadline of the phase the client is in (none once its request is in)."""
        state = self.conn.their_state
        if state is h11.IDLE:
            if self._phase != "head":
                self._arm("head", self.deadlines.head)
        elif state is h11.SEND_BODY:
            if self._phase != "body":
                self._arm("body", self.deadlines.body)
        else:
            self._disarm()

    def _arm(self, phase: str, seconds: float) -> None:
        self._disarm()
        self._phase = phase
        self._timer = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self._phase = None

    def _stop_send_timer(self) -> None:
        if self._send_timer is not None:
            self._send_timer.cancel()
        self._send_timer = None

    def _expired(self) -> None:
        """A deadline passed: answer 408 when nothing was answered yet, and close."""
        self._timer = self._send_timer = None
        self._phase = None
        if self.transport.is_closing():
            return
        state = self.conn.our_state
        unanswered = self.cycle is None or not self.cycle.response_started
        if state is h11.IDLE or (state is h11.SEND_RESPONSE and unanswered):
            self.transport.write(_TIMEOUT_RESPONSE)
        if self.cycle is not None:
            self.cycle.disconnected = True  # the application's next send is dropped
        self.transport.close()


def protocol_with(deadlines: Deadlines) -> type[DeadlineProtocol]:
    """A :class:`DeadlineProtocol` class with ``deadlines`` (uvicorn's ``http=``)."""
    return type("DeadlineProtocol", (DeadlineProtocol,), {"deadlines": deadlines})
