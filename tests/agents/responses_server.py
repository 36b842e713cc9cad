"""A scripted OpenAI Responses API server (``POST /v1/responses``, streamed as SSE) for
running Codex against loopback through a custom model provider (``wire_api =
"responses"``).

Requests for the scripted model take the next :class:`Step`; other requests get a short
fixed answer. ``GET /v1/models`` answers an empty list.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from tests.llm.http_server import Answer, Received, ScriptedModelServer


@dataclass
class Step:
    """One model answer: output items and the usage reported for it."""

    items: list[dict[str, Any]]
    input_tokens: int = 100
    output_tokens: int = 20
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    error: tuple[int, str, str] | None = None
    failed: str | None = None


def message(value: str) -> dict[str, Any]:
    """An assistant message item."""
    return {
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": value, "annotations": []}],
    }


def reasoning(summary: str) -> dict[str, Any]:
    """A reasoning item with one summary text."""
    return {"type": "reasoning", "summary": [{"type": "summary_text", "text": summary}]}


def function_call(
    name: str, arguments: dict[str, Any], call_id: str | None = None
) -> dict[str, Any]:
    """A function call item (``arguments`` JSON-encoded)."""
    return {
        "type": "function_call",
        "name": name,
        "arguments": json.dumps(arguments),
        "call_id": call_id or f"call_{uuid.uuid4().hex[:12]}",
        "status": "completed",
    }


def http_error(status: int, message_text: str, code: str = "invalid_request_error") -> Step:
    """A step answered with an HTTP error (OpenAI's error format)."""
    return Step([], error=(status, code, message_text))


def failed(message_text: str) -> Step:
    """A step whose stream ends with ``response.failed``."""
    return Step([], failed=message_text)


def _stream(step: Step, model: str) -> list[tuple[str, dict[str, Any]]]:
    rid = f"resp_{uuid.uuid4().hex[:16]}"
    base = {"id": rid, "object": "response", "model": model, "output": []}
    events: list[tuple[str, dict[str, Any]]] = [
        (
            "response.created",
            {"type": "response.created", "response": {**base, "status": "in_progress"}},
        )
    ]
    if step.failed is not None:
        events.append(
            (
                "response.failed",
                {
                    "type": "response.failed",
                    "response": {
                        **base,
                        "status": "failed",
                        "error": {"code": "server_error", "message": step.failed},
                    },
                },
            )
        )
        return events
    done = []
    for index, item in enumerate(step.items):
        full = {"id": f"item_{uuid.uuid4().hex[:12]}", **item}
        done.append(full)
        events.append(
            (
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": index, "item": full},
            )
        )
        events.append(
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": index, "item": full},
            )
        )
    usage = {
        "input_tokens": step.input_tokens,
        "input_tokens_details": {"cached_tokens": step.cached_tokens},
        "output_tokens": step.output_tokens,
        "output_tokens_details": {"reasoning_tokens": step.reasoning_tokens},
        "total_tokens": step.input_tokens + step.output_tokens,
    }
    events.append(
        (
            "response.completed",
            {
                "type": "response.completed",
                "response": {**base, "status": "completed", "output": done, "usage": usage},
            },
        )
    )
    return events


class ResponsesServer(ScriptedModelServer[Step]):
    """The scripted Responses API; ``model`` names the agent's model."""

    def __init__(self, model: str = "gpt-test") -> None:
        super().__init__(model)

    @property
    def base_url(self) -> str:
        """The provider's ``base_url`` (ends in ``/v1``)."""
        return self.origin + "/v1"

    def route(self, request: Received) -> Answer:
        """The model list, or the next step as a streamed response."""
        path = request.path.split("?")[0].rstrip("/")
        body = request.body if isinstance(request.body, dict) else {}
        if request.method == "GET" and path.endswith("/models"):
            return Answer(body={"object": "list", "data": [], "models": []})
        if not path.endswith("/responses"):
            return Answer(404, {"error": {"message": f"unknown path {path}"}})
        model = str(body.get("model") or "")
        step = self.take(
            request,
            exhausted=http_error(400, "no scripted answer left in the test server"),
            other=Step([message("ok")], input_tokens=10, output_tokens=1),
        )
        if step.error is not None:
            status, code, text = step.error
            return Answer(status, {"error": {"message": text, "type": code, "code": code}})
        return Answer(events=_stream(step, model))
