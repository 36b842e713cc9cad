"""A scripted HTTP server on 127.0.0.1 for the model-API servers of the tests.

Each model server (:mod:`tests.llm.chat_server`, :mod:`tests.agents.anthropic_server`,
:mod:`tests.agents.responses_server`) decides, per request, what to send back (an
:class:`Answer`: JSON, plain text or a server-sent-events stream). This module keeps every
request (method, path, headers, JSON body), counts the requests in flight and the largest
number held at once, and does the HTTP/1.1 plumbing through the standard library's
``ThreadingHTTPServer``.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Generic, Self, TypeVar

DONE = "[DONE]"
"""An SSE data value sent as is (OpenAI's end-of-stream marker), not JSON-encoded."""


@dataclass
class Received:
    """A request the server got."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any

    @property
    def model(self) -> str | None:
        """The request body's ``model``, if any."""
        return self.body.get("model") if isinstance(self.body, dict) else None

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The request body's chat ``messages``."""
        return list(self.body.get("messages", [])) if isinstance(self.body, dict) else []


@dataclass
class Answer:
    """What to send: a body (dict or list as JSON, anything else as text) or, with
    ``events`` set, an SSE stream of ``(event name or None, data)``; ``close`` ends the
    connection after the answer."""

    status: int = 200
    body: Any = None
    events: list[tuple[str | None, Any]] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    close: bool = False


Route = Callable[[Received], Answer]
StepT = TypeVar("StepT")


def _sse(events: list[tuple[str | None, Any]]) -> bytes:
    chunks = []
    for name, data in events:
        head = f"event: {name}\n" if name is not None else ""
        value = data if data == DONE else json.dumps(data)
        chunks.append(f"{head}data: {value}\n\n".encode())
    return b"".join(chunks)


class ScriptedServer:
    """Serves ``route(request)`` for every request on a free loopback port; a context
    manager. ``cond`` guards :attr:`requests` and the in-flight counters; ``stopping`` is set
    when the server stops, so a route that waits can give up."""

    def __init__(self, route: Route, host: str = "127.0.0.1") -> None:
        self.route = route
        self.host = host
        self.requests: list[Received] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.connections: set[tuple[str, int]] = set()
        self.cond = threading.Condition()
        self.stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def origin(self) -> str:
        """``http://127.0.0.1:<port>``."""
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def _receive(self, received: Received, client: tuple[str, int]) -> None:
        with self.cond:
            self.requests.append(received)
            self.connections.add(client)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.cond.notify_all()

    def _done(self) -> None:
        with self.cond:
            self.in_flight -= 1
            self.cond.notify_all()

    def start(self) -> ScriptedServer:
        """Listen in a daemon thread."""
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body: Any = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                headers = {k.lower(): v for k, v in self.headers.items()}
                received = Received(self.command, self.path, headers, body)
                server._receive(received, self.client_address[:2])
                try:
                    try:
                        answer = server.route(received)
                    except Exception as exc:  # a broken script shows in the agent's output
                        answer = Answer(500, {"error": {"message": f"test server: {exc!r}"}})
                    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                        self._send(answer)
                finally:
                    server._done()

            do_GET = do_POST = _handle

            def _send(self, answer: Answer) -> None:
                if answer.events is not None:
                    data, ctype = _sse(answer.events), "text/event-stream"
                elif isinstance(answer.body, (dict, list)):
                    data, ctype = json.dumps(answer.body).encode(), "application/json"
                else:
                    data, ctype = str(answer.body or "").encode(), "text/plain"
                self.send_response(answer.status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                if answer.events is not None:
                    self.send_header("Cache-Control", "no-cache")
                if answer.close:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                for key, value in answer.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()

        class Server(ThreadingHTTPServer):
            request_queue_size = 128
            daemon_threads = True

        self._httpd = Server((self.host, 0), Handler)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and wake routes that wait."""
        self.stopping.set()
        with self.cond:
            self.cond.notify_all()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ScriptedModelServer(Generic[StepT]):
    """A model API whose scripted ``model`` takes the next queued step per request; the
    subclass turns a request into an :class:`Answer` in :meth:`route`. A context manager."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.steps: deque[StepT] = deque()
        self.served: list[Received] = []
        self._lock = threading.Lock()
        self._http: ScriptedServer | None = None

    def script(self, *steps: StepT) -> None:
        """Queue the scripted model's answers, in order."""
        with self._lock:
            self.steps.extend(steps)

    @property
    def origin(self) -> str:
        """``http://127.0.0.1:<port>``."""
        assert self._http is not None, "server not started"
        return self._http.origin

    @property
    def requests(self) -> list[Received]:
        """Every request received (scripted or not)."""
        assert self._http is not None, "server not started"
        return list(self._http.requests)

    def take(self, request: Received, *, exhausted: StepT, other: StepT) -> StepT:
        """The next step for a request to the scripted model (``exhausted`` when none is
        left); ``other`` for a request to any other model (a CLI's helper calls)."""
        if request.model != self.model:
            return other
        with self._lock:
            self.served.append(request)
            return self.steps.popleft() if self.steps else exhausted

    def route(self, request: Received) -> Answer:
        """The answer to ``request``."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._http = ScriptedServer(self.route).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._http is not None:
            self._http.stop()
