"""Map GitHub Copilot session events to vally trajectory events.

The Copilot SDK delivers every session event as an object whose ``to_dict()`` is the wire
form ``{"type": ..., "data": {...}, "id": ..., "timestamp": ..., "ephemeral": ...}`` (the
same lines ``copilot -p ... --output-format json`` prints). :class:`CopilotEventMapper`
reads those dicts one at a time and records what they mean:

=============================== ===========================================================
Copilot event                   vally
=============================== ===========================================================
``session.start``               the session id (``metadata.session_id``)
``user.message``                ``user_message``
``assistant.turn_start/_end``   ``turn_start`` / ``turn_end`` (``turn-1``, ``turn-2``, ...
                                numbered over the whole trial)
``assistant.message``           ``assistant_message`` (non-empty text) and a ``tool_call``
                                per ``toolRequests`` item (calls of one message share a
                                ``batch_id``; MCP calls carry ``server``)
``tool.execution_start``        a ``tool_call`` when the message did not announce it
``tool.execution_complete``     ``tool_result`` (``success``, false for a shell command that
                                exited non-zero; the result text or the error message)
``skill.invoked``               ``skill_activation``
``assistant.usage``             ``token_usage`` (one per model call)
``assistant.reasoning``         ``reasoning``
``model.call_failure``          ``error`` (code ``model_call_failure``)
``assistant.turn_retry``        ``error`` (code ``turn_retry``)
``session.error``               ``error`` (``fatal``; the session failed)
``session.warning``             ``error`` (code ``warning``)
``session.mcp_servers_loaded``  ``error`` for each server that did not connect
``permission.completed``        denied requests are listed in ``extra["permission_denials"]``
``session.shutdown``            totals in ``extra["session_totals"]``
``abort``                       the reason in ``extra["abort_reason"]``
=============================== ===========================================================

Everything else (deltas, ``model.*`` diagnostics, ``session.usage_info``, idle markers) is
kept in the raw session log only.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from vally import TrajectoryRecorder, loads_bounded

_RESULT_LIMIT = 100_000
"""Characters of a tool result kept in the trajectory."""


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _arguments(value: Any) -> dict[str, Any] | str:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = loads_bounded(value)
        except ValueError:  # not JSON, or nested too deep
            return value
        return parsed if isinstance(parsed, dict) else value
    return {} if value is None else json.dumps(value, ensure_ascii=False)


def _result_text(data: Mapping[str, Any]) -> str:
    """The text a tool gave back (or its error message)."""
    error = data.get("error")
    if isinstance(error, dict) and _str(error.get("message")):
        return str(error["message"])
    result = data.get("result")
    if isinstance(result, dict):
        text = _str(result.get("content")) or _str(result.get("detailedContent"))
        if text is None:
            text = json.dumps(result, ensure_ascii=False)
    elif result is None:
        text = ""
    else:
        text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
    return text if len(text) <= _RESULT_LIMIT else text[:_RESULT_LIMIT] + "\n[... cut]"


def _exit_codes(data: Mapping[str, Any]) -> list[Any]:
    """The exit codes a shell tool's completion reports (``shellExecution.exitCode``, and
    each ``shell_exit`` part of the result)."""
    shell = data.get("shellExecution")
    codes = [shell.get("exitCode")] if isinstance(shell, dict) else []
    result = data.get("result")
    parts = result.get("contents") if isinstance(result, dict) else None
    for part in parts if isinstance(parts, list) else []:
        if isinstance(part, dict) and part.get("type") == "shell_exit":
            codes.append(part.get("exitCode"))
    return codes


def _succeeded(data: Mapping[str, Any]) -> bool:
    """Whether a tool call succeeded: Copilot reports a shell command that exited non-zero
    as a success with the exit code beside it, which is a failure as Claude Code and Codex
    report it."""
    codes = _exit_codes(data)
    return bool(data.get("success")) and all(code in (0, None) for code in codes)


@dataclass
class SessionFacts:
    """What the mapper learned about the session besides the trajectory events.

    Attributes:
        session_id: The Copilot session id.
        agent_turns: ``assistant.turn_start`` events seen (model calls of the agent loop).
        tool_calls: Tool calls seen.
        tokens: Input plus output tokens over all model calls.
        fatal_error: The message of the first ``session.error``, if any.
        idle: Set when the session went idle (the prompt is done).
        extra: Facts for ``metadata.extra``.
    """

    session_id: str | None = None
    agent_turns: int = 0
    tool_calls: int = 0
    tokens: int = 0
    fatal_error: str | None = None
    idle: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


class CopilotEventMapper:
    """Turns Copilot session events (wire dicts) into trajectory events.

    Args:
        recorder: Where events are recorded; its ``turn`` is the authored prompt's index.
        on_change: Called after each event that changed :attr:`facts` counters (the
            executor checks its limits there).
    """

    def __init__(
        self,
        recorder: TrajectoryRecorder,
        on_change: Callable[[SessionFacts], None] | None = None,
    ) -> None:
        self.recorder = recorder
        self.facts = SessionFacts()
        self._on_change = on_change
        self._calls: dict[str, tuple[str, str | None]] = {}
        self._open_turn: str | None = None
        self._handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            "session.start": self._session_start,
            "user.message": self._user_message,
            "assistant.turn_start": self._turn_start,
            "assistant.turn_end": self._turn_end,
            "assistant.message": self._assistant_message,
            "assistant.reasoning": self._reasoning,
            "assistant.usage": self._usage,
            "tool.execution_start": self._tool_start,
            "tool.execution_complete": self._tool_complete,
            "skill.invoked": self._skill,
            "model.call_failure": self._call_failure,
            "assistant.turn_retry": self._retry,
            "session.error": self._session_error,
            "session.warning": self._warning,
            "session.mcp_servers_loaded": self._mcp_servers,
            "permission.completed": self._permission,
            "session.shutdown": self._shutdown,
            "session.idle": self._idle,
            "abort": self._abort,
        }

    @property
    def handled_types(self) -> frozenset[str]:
        """The Copilot event types this mapper reads."""
        return frozenset(self._handlers)

    def handle(self, event: Mapping[str, Any]) -> None:
        """Read one event (its wire dict); unknown types are ignored."""
        kind = event.get("type")
        handler = self._handlers.get(kind) if isinstance(kind, str) else None
        data = event.get("data")
        if handler is not None:
            handler(data if isinstance(data, dict) else {})

    def close_turn(self) -> None:
        """Record the end of an agent turn left open (the session was stopped mid-turn)."""
        if self._open_turn is not None:
            self.recorder.turn_end(self._open_turn)
            self._open_turn = None

    def pending_calls(self) -> list[tuple[str, str, str | None]]:
        """(call id, tool name, server) of tool calls that never got a result."""
        return [(cid, name, server) for cid, (name, server) in self._calls.items()]

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change(self.facts)

    # ------------------------------------------------------------------ session

    def _session_start(self, data: dict[str, Any]) -> None:
        self.facts.session_id = _str(data.get("sessionId")) or self.facts.session_id
        for key in ("copilotVersion", "selectedModel"):
            if data.get(key):
                self.facts.extra[key] = data[key]

    def _user_message(self, data: dict[str, Any]) -> None:
        self.facts.idle = False
        self.recorder.user_message(str(data.get("content") or ""))

    def _idle(self, data: dict[str, Any]) -> None:
        self.close_turn()
        self.facts.idle = True

    def _turn_start(self, data: dict[str, Any]) -> None:
        self.close_turn()
        self.facts.agent_turns += 1
        self._open_turn = f"turn-{self.facts.agent_turns}"
        self.recorder.turn_start(self._open_turn)
        self._changed()

    def _turn_end(self, data: dict[str, Any]) -> None:
        self.close_turn()

    # ------------------------------------------------------------------ messages

    def _assistant_message(self, data: dict[str, Any]) -> None:
        content = _str(data.get("content"))
        if content is not None:
            self.recorder.assistant_message(content)
        batch = _str(data.get("messageId"))
        for request in data.get("toolRequests") or []:
            if isinstance(request, dict):
                self._call(request, batch)

    def _reasoning(self, data: dict[str, Any]) -> None:
        content = _str(data.get("content"))
        if content is not None:
            self.recorder.reasoning(content)

    def _usage(self, data: dict[str, Any]) -> None:
        event = self.recorder.token_usage(
            data.get("inputTokens"),
            data.get("outputTokens"),
            model=_str(data.get("model")),
            cache_read_tokens=data.get("cacheReadTokens"),
            cache_write_tokens=data.get("cacheWriteTokens"),
        )
        self.facts.tokens += event.data.input_tokens + event.data.output_tokens
        self._changed()

    # ------------------------------------------------------------------ tools

    def _call(self, request: dict[str, Any], batch: str | None) -> None:
        call_id = _str(request.get("toolCallId"))
        if call_id is None or call_id in self._calls:
            return
        name = _str(request.get("toolName")) or _str(request.get("name")) or "unknown"
        server = _str(request.get("mcpServerName"))
        self._calls[call_id] = (name, server)
        self.recorder.tool_call(
            name, call_id, _arguments(request.get("arguments")), server=server, batch_id=batch
        )
        self.facts.tool_calls += 1
        self._changed()

    def _tool_start(self, data: dict[str, Any]) -> None:
        self._call(data, None)

    def _tool_complete(self, data: dict[str, Any]) -> None:
        call_id = _str(data.get("toolCallId")) or "unknown"
        name, server = self._calls.pop(call_id, ("unknown", None))
        self.recorder.tool_result(
            name,
            call_id,
            _result_text(data),
            success=_succeeded(data),
            server=server,
        )

    def _skill(self, data: dict[str, Any]) -> None:
        name = _str(data.get("name"))
        if name is not None:
            self.recorder.skill_activation(name)

    # ------------------------------------------------------------------ failures

    def _call_failure(self, data: dict[str, Any]) -> None:
        message = _str(data.get("errorMessage")) or "the model call failed"
        try:
            parsed = loads_bounded(message)
        except ValueError:  # not JSON, or nested too deep
            parsed = None
        if isinstance(parsed, dict) and _str(parsed.get("message")):
            message = str(parsed["message"])
        status = data.get("statusCode")
        prefix = f"model call failed (HTTP {status}): " if status else "model call failed: "
        self.recorder.error(prefix + message, code="model_call_failure")

    def _retry(self, data: dict[str, Any]) -> None:
        reason = _str(data.get("reason")) or "no reason given"
        self.recorder.error(f"the agent retried its model call: {reason}", code="turn_retry")

    def _session_error(self, data: dict[str, Any]) -> None:
        message = _str(data.get("message")) or "the Copilot session failed"
        if self.facts.fatal_error is None:
            self.facts.fatal_error = message
        self.recorder.error(
            message, code=_str(data.get("errorType")) or "session_error", fatal=True
        )
        self._changed()

    def _warning(self, data: dict[str, Any]) -> None:
        message = _str(data.get("message")) or "warning"
        self.recorder.error(message, code="warning")

    def _mcp_servers(self, data: dict[str, Any]) -> None:
        servers = [s for s in data.get("servers") or [] if isinstance(s, dict)]
        status = {str(s.get("name")): str(s.get("status")) for s in servers}
        self.facts.extra["mcp_servers"] = status
        for server in servers:
            if server.get("status") not in {"connected", "disabled"}:
                detail = _str(server.get("error")) or f"status {server.get('status')}"
                self.recorder.error(
                    f"MCP server {server.get('name')!r} did not connect: {detail}",
                    code="mcp_server_failed",
                )

    def _permission(self, data: dict[str, Any]) -> None:
        result = data.get("result")
        kind = result.get("kind") if isinstance(result, dict) else None
        if isinstance(kind, str) and not kind.startswith("approved"):
            denials = self.facts.extra.setdefault("permission_denials", [])
            denials.append({"tool_call_id": data.get("toolCallId"), "result": kind})

    def _shutdown(self, data: dict[str, Any]) -> None:
        totals = {
            key: data[key]
            for key in ("modelMetrics", "codeChanges", "totalApiDurationMs", "shutdownType")
            if key in data
        }
        self.facts.extra["session_totals"] = totals

    def _abort(self, data: dict[str, Any]) -> None:
        self.facts.extra["abort_reason"] = data.get("reason")
