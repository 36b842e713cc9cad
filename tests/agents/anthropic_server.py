"""A scripted Anthropic Messages API server (``POST /v1/messages``, streamed as SSE) for
running Claude Code against loopback.

Requests for the scripted model take the next :class:`Step` of the script; any other
request (Claude Code's small helper calls on its fast model, token counting) gets a short
fixed answer, so the script holds only the agent's own model calls. Each step streams like
the real API: ``message_start`` carries the input usage with ``output_tokens: 1`` and the
final ``message_delta`` the true output count.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from tests.llm.http_server import Answer, Received, ScriptedModelServer


@dataclass
class Step:
    """One model answer: content blocks and the usage the server reports for it."""

    blocks: list[dict[str, Any]]
    input_tokens: int = 100
    output_tokens: int = 20
    cache_read: int = 0
    cache_write: int = 0
    error: tuple[int, str, str] | None = None

    @property
    def stop_reason(self) -> str:
        """``tool_use`` when the answer calls a tool, else ``end_turn``."""
        return "tool_use" if any(b["type"] == "tool_use" for b in self.blocks) else "end_turn"


def text(value: str) -> dict[str, Any]:
    """A text block."""
    return {"type": "text", "text": value}


def thinking(value: str) -> dict[str, Any]:
    """A thinking block."""
    return {"type": "thinking", "thinking": value}


def tool_use(name: str, arguments: dict[str, Any], call_id: str | None = None) -> dict[str, Any]:
    """A tool_use block."""
    return {
        "type": "tool_use",
        "id": call_id or f"toolu_{uuid.uuid4().hex[:12]}",
        "name": name,
        "input": arguments,
    }


def api_error(status: int, message: str, kind: str = "invalid_request_error") -> Step:
    """A step answered with an HTTP error in the API's error format."""
    return Step([], error=(status, kind, message))


def _stream(step: Step, model: str) -> list[tuple[str, dict[str, Any]]]:
    usage = {
        "input_tokens": step.input_tokens,
        "cache_creation_input_tokens": step.cache_write,
        "cache_read_input_tokens": step.cache_read,
        "output_tokens": 1,
    }
    message = {
        "id": f"msg_{uuid.uuid4().hex[:16]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": message})
    ]
    for index, block in enumerate(step.blocks):
        events += _block_events(index, block)
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": step.stop_reason, "stop_sequence": None},
                "usage": {**usage, "output_tokens": step.output_tokens},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def _block_events(index: int, block: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    kind = block["type"]
    if kind == "text":
        start, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        delta = {"type": "thinking_delta", "thinking": block["thinking"]}
    else:
        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
    events = [
        (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        ),
        ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}),
    ]
    if kind == "thinking":
        events.append(
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "signature_delta", "signature": "c2lnbmF0dXJl"},
                },
            )
        )
    events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    return events


class AnthropicServer(ScriptedModelServer[Step]):
    """The scripted Messages API; ``model`` names the agent's model (the one the script
    serves)."""

    def __init__(self, model: str = "claude-test") -> None:
        super().__init__(model)

    @property
    def base_url(self) -> str:
        """The value for ``ANTHROPIC_BASE_URL``."""
        return self.origin

    def route(self, request: Received) -> Answer:
        """Token counts, or the next step as a message (streamed when asked)."""
        path = request.path.split("?")[0]
        body = request.body if isinstance(request.body, dict) else {}
        if path.endswith("/count_tokens"):
            return Answer(body={"input_tokens": 100})
        if not path.endswith("/v1/messages"):
            return Answer(
                404, {"type": "error", "error": {"type": "not_found_error", "message": path}}
            )
        model = str(body.get("model") or "")
        step = self.take(
            request,
            exhausted=api_error(500, "no scripted answer left in the test server", "api_error"),
            other=Step([text("ok")], input_tokens=10, output_tokens=1),
        )
        if step.error is not None:
            status, kind, message = step.error
            return Answer(status, {"type": "error", "error": {"type": kind, "message": message}})
        if not body.get("stream"):
            content = [
                {**b, "signature": "c2lnbmF0dXJl"} if b["type"] == "thinking" else b
                for b in step.blocks
            ]
            return Answer(
                body={
                    "id": f"msg_{uuid.uuid4().hex[:16]}",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": content,
                    "stop_reason": step.stop_reason,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": step.input_tokens,
                        "output_tokens": step.output_tokens,
                        "cache_creation_input_tokens": step.cache_write,
                        "cache_read_input_tokens": step.cache_read,
                    },
                }
            )
        return Answer(events=_stream(step, model))
