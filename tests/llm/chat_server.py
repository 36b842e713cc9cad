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
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.llm.http_server import DONE, Answer, Received, ScriptedServer

__all__ = ["ChatServer", "Received", "Reply", "completion", "error", "stream_chunks", "tool_call"]


@dataclass
class Reply:
    """One scripted answer: status, body (dict -> JSON, str -> raw text), headers, delay."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


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
        self.default: Reply | Responder | None = None
        self.gate: int | None = None
        self.gate_open = False
        self.gate_timeout = 5.0
        self.hold = 0.0
        self._queues: dict[str | None, deque[Reply]] = {}
        self._http = ScriptedServer(self._route, host)

    # ------------------------------------------------------------------ what it saw

    @property
    def requests(self) -> list[Received]:
        """Every request received, in order."""
        return self._http.requests

    @property
    def max_in_flight(self) -> int:
        """The largest number of requests held at once."""
        return self._http.max_in_flight

    @property
    def in_flight(self) -> int:
        """The requests held now."""
        return self._http.in_flight

    @property
    def connections(self) -> set[tuple[str, int]]:
        """The client (address, port) pairs that sent requests."""
        return self._http.connections

    # ------------------------------------------------------------------ scripting

    def enqueue(self, *replies: Reply, model: str | None = None) -> None:
        """Queue replies, for one model or (``model=None``) for any request."""
        with self._http.cond:
            self._queues.setdefault(model, deque()).extend(replies)

    def requests_for(self, model: str) -> list[Received]:
        """The requests received for ``model``."""
        with self._http.cond:
            return [r for r in self.requests if r.model == model]

    def _next_reply(self, request: Received) -> Reply:
        with self._http.cond:
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

    def _wait_at_gate(self) -> None:
        http = self._http
        with http.cond:
            if http.in_flight >= (self.gate or 0):
                self.gate_open = True  # a latch: stays open for later requests
                http.cond.notify_all()
            http.cond.wait_for(
                lambda: self.gate_open or http.stopping.is_set(), timeout=self.gate_timeout
            )
        if self.hold:
            http.stopping.wait(self.hold)

    def _route(self, request: Received) -> Answer:
        if self.gate is not None:
            self._wait_at_gate()
        if request.path.rstrip("/") != "/v1/chat/completions":
            reply = error(404, f"unknown path {request.path}")
        else:
            reply = self._next_reply(request)
        if reply.delay:
            self._http.stopping.wait(reply.delay)
        body = request.body if isinstance(request.body, dict) else {}
        if not (body.get("stream") and reply.status == 200):
            return Answer(reply.status, reply.body, headers=reply.headers)
        options = body.get("stream_options") or {}
        chunks = stream_chunks(reply.body, include_usage=bool(options.get("include_usage")))
        events: list[tuple[str | None, Any]] = [(None, c) for c in chunks]
        return Answer(events=[*events, (None, DONE)], headers=reply.headers, close=True)

    # ------------------------------------------------------------------ lifecycle

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (``.../v1``)."""
        return f"{self._http.origin}/v1"

    def start(self) -> ChatServer:
        """Listen on a free loopback port."""
        self._http.start()
        return self

    def stop(self) -> None:
        """Stop listening."""
        self._http.stop()

    def __enter__(self) -> ChatServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
