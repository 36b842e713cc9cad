"""A scripted OpenAI Chat Completions server on 127.0.0.1 for tests.

It speaks HTTP/1.1 (keep-alive) through the standard library's ``ThreadingHTTPServer``.
Tests queue replies (globally or per model) and read back the requests it received and the
largest number of requests it held at once.

A request with ``"stream": true`` gets its scripted completion as server-sent events, the
way OpenAI streams: a role chunk, the content in pieces, each tool call as deltas (id and
name first, then the arguments in pieces), a chunk with the finish reason and, when the
request asked for it (``stream_options.include_usage``), a last chunk with the usage and no
choices, then ``data: [DONE]``. Error replies stay plain JSON with their status.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer: status, body (dict -> JSON, str -> raw text), headers, delay."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Received:
    """A request the server got."""

    path: str
    headers: dict[str, str]
    body: Any

    @property
    def model(self) -> str | None:
        return self.body.get("model") if isinstance(self.body, dict) else None

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", [])) if isinstance(self.body, dict) else []


def tool_call(
    name: str, arguments: dict[str, Any] | str, call_id: str | None = None
) -> dict[str, Any]:
    """A ``tool_calls[]`` item; ``arguments`` given as a dict is JSON-encoded."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {
        "id": call_id or f"call_{uuid.uuid4().hex[:8]}",
        "type": "function",
        "function": {"name": name, "arguments": args},
    }


def completion(
    content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    *,
    model: str = "test-model",
    prompt_tokens: int = 10,
    completion_tokens: int = 5,
    cached_tokens: int = 0,
    headers: dict[str, str] | None = None,
) -> Reply:
    """A 200 reply holding one assistant message with usage."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    body = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:8]}",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if tool_calls else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached_tokens},
        },
    }
    return Reply(body=body, headers=headers or {})


def error(status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
    """An error reply with an OpenAI-style ``{"error": {"message": ...}}`` body."""
    return Reply(
        status=status,
        body={"error": {"message": message, "type": "test_error", "code": None}},
        headers=headers or {},
    )


def _pieces(text: str, size: int = 8) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def stream_chunks(body: dict[str, Any], *, include_usage: bool) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects that stream the completion ``body``."""
    choice = body["choices"][0]
    message = choice["message"]
    base = {
        "id": body["id"],
        "object": "chat.completion.chunk",
        "created": 0,
        "model": body["model"],
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [
        chunk({"content": piece}) for piece in _pieces(message.get("content") or "") if piece
    ]
    for index, call in enumerate(message.get("tool_calls") or []):
        head = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""},
        }
        chunks.append(chunk({"tool_calls": [head]}))
        for piece in _pieces(call["function"]["arguments"]):
            chunks.append(
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            )
    chunks.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        chunks.append({**base, "choices": [], "usage": body["usage"]})
    return chunks


Responder = Callable[[Received], Reply]


class ChatServer:
    """The scripted server. Use as a context manager or call :meth:`start`/:meth:`stop`.

    Replies are taken, for each request, from the queue of the request's model, then from the
    shared queue, then from :attr:`default` (a Reply or a function of the request); with
    none of them the server answers 500 ``no scripted reply``.

    ``gate``: when set, each request waits (up to ``gate_timeout`` seconds) until that many
    requests have been in flight at once (after that the gate stays open), then ``hold``
    seconds more, so overlapping requests are seen.
    """

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.requests: list[Received] = []
        self.default: Reply | Responder | None = None
        self.gate: int | None = None
        self.gate_open = False
        self.gate_timeout = 5.0
        self.hold = 0.0
        self.in_flight = 0
        self.max_in_flight = 0
        self.connections: set[tuple[str, int]] = set()
        self._queues: dict[str | None, deque[Reply]] = {}
        self._cond = threading.Condition()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ scripting

    def enqueue(self, *replies: Reply, model: str | None = None) -> None:
        """Queue replies, for one model or (``model=None``) for any request."""
        with self._cond:
            self._queues.setdefault(model, deque()).extend(replies)

    def requests_for(self, model: str) -> list[Received]:
        """The requests received for ``model``."""
        with self._cond:
            return [r for r in self.requests if r.model == model]

    def _next_reply(self, request: Received) -> Reply:
        with self._cond:
            for key in (request.model, None):
                queue = self._queues.get(key)
                if queue:
                    return queue.popleft()
        default = self.default
        if isinstance(default, Reply):
            return default
        if default is not None:
            return default(request)
        return error(500, "no scripted reply left in the test server")

    # ------------------------------------------------------------------ lifecycle

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> ChatServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # silence
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body: Any = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                received = Received(
                    self.path, {k.lower(): v for k, v in self.headers.items()}, body
                )
                with server._cond:
                    server.requests.append(received)
                    server.connections.add(self.client_address[:2])
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    if server.gate is not None and server.in_flight >= server.gate:
                        server.gate_open = True  # a latch: stays open for later requests
                    server._cond.notify_all()
                try:
                    if server.gate is not None:
                        with server._cond:
                            server._cond.wait_for(
                                lambda: server.gate_open or server._stopping.is_set(),
                                timeout=server.gate_timeout,
                            )
                        if server.hold:
                            server._stopping.wait(server.hold)
                    if self.path.rstrip("/") != "/v1/chat/completions":
                        reply = error(404, f"unknown path {self.path}")
                    else:
                        reply = server._next_reply(received)
                    if reply.delay:
                        server._stopping.wait(reply.delay)
                    if isinstance(body, dict) and body.get("stream") and reply.status == 200:
                        self._send_stream(reply, body)
                    else:
                        self._send(reply)
                finally:
                    with server._cond:
                        server.in_flight -= 1
                        server._cond.notify_all()

            def _send(self, reply: Reply) -> None:
                if isinstance(reply.body, (dict, list)):
                    data = json.dumps(reply.body).encode()
                    ctype = "application/json"
                else:
                    data = str(reply.body or "").encode()
                    ctype = "text/plain"
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _send_stream(self, reply: Reply, request: dict[str, Any]) -> None:
                options = request.get("stream_options") or {}
                chunks = stream_chunks(reply.body, include_usage=bool(options.get("include_usage")))
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Cache-Control", "no-cache")
                    self.send_header("Connection", "close")
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    for chunk in chunks:
                        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                        self.wfile.flush()
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass
                self.close_connection = True

        class Server(ThreadingHTTPServer):
            request_queue_size = 128
            daemon_threads = True

        httpd = Server((self.host, 0), Handler)
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
        self._thread.daemon = True
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ChatServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
