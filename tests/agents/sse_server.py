"""A small scripted HTTP server on 127.0.0.1 that answers with JSON or Server-Sent Events.

The model-API servers of this folder (:mod:`tests.agents.anthropic_server`,
:mod:`tests.agents.responses_server`) build on it: each decides, per request, what to send
back (an :class:`Answer`). Every request is kept (path, headers, JSON body) for the test.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    """A request the server got."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Answer:
    """What to send: a JSON body, or (``events`` set) an SSE stream of ``(name, data)``."""

    status: int = 200
    body: Any = None
    events: list[tuple[str, dict[str, Any]]] | None = None
    headers: dict[str, str] = field(default_factory=dict)


Route = Callable[[Received], Answer]


class SseServer:
    """Serves ``route(request)`` for every request; a context manager."""

    def __init__(self, route: Route) -> None:
        self.route = route
        self.requests: list[Received] = []
        self.lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def origin(self) -> str:
        """``http://127.0.0.1:<port>``."""
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> SseServer:
        """Listen on a free loopback port in a daemon thread."""
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
                received = Received(
                    self.command,
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                )
                with server.lock:
                    server.requests.append(received)
                try:
                    answer = server.route(received)
                except Exception as exc:  # a broken script shows up in the agent's output
                    answer = Answer(500, {"error": {"message": f"test server: {exc!r}"}})
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self._send(answer)

            do_GET = do_POST = _handle

            def _send(self, answer: Answer) -> None:
                if answer.events is None:
                    data = json.dumps(answer.body).encode()
                    self.send_response(answer.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in answer.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                    return
                chunks = [
                    f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
                    for name, data in answer.events
                ]
                payload = b"".join(chunks)
                self.send_response(answer.status)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Content-Length", str(len(payload)))
                for key, value in answer.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)
                self.wfile.flush()

        class Server(ThreadingHTTPServer):
            daemon_threads = True

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> SseServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
