"""The adapter for Codex's ``codex exec --json``.

Lines: ``thread.started`` (``thread_id``), ``turn.started``, ``item.started`` /
``item.updated`` / ``item.completed`` (items ``agent_message``, ``reasoning``,
``command_execution``, ``file_change``, ``mcp_tool_call``, ``web_search``, ``error``),
``turn.completed`` (``usage``), ``turn.failed`` and ``error``.

What the stream allows, and its limits:

* Tool-like items give a ``tool_call`` when first seen and a ``tool_result`` when completed.
  A shell command is named ``command_execution`` (the item type; the stream does not say
  which model tool ran it) with ``{"command": ...}`` as its arguments.
* Codex has no skill tool: the model reads ``<skill>/SKILL.md`` with a command. A command
  that names a ``SKILL.md`` file records a ``skill_activation`` of the folder's name.
* ``turn.completed`` carries one usage for the whole CLI run (not per model call), so a turn
  has one ``token_usage`` event. On ``codex exec resume`` that usage is the session's running
  total; ``session`` remembers the previous total so each turn records only its own tokens.
  Codex's ``input_tokens`` already includes ``cached_input_tokens``.
* ``item.completed`` of type ``error`` is a notice that does not stop the run (every run
  with a custom provider gets "Model metadata ... not found"); it goes to the turn's
  ``extra["warnings"]``, not into the events. A top-level ``error`` is an error event;
  ``turn.failed`` makes it fatal and the end reason ``error``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from vally import ToolCallEvent, TrajectoryRecorder, last_assistant_text

from .stream_base import SNIPPET, StreamResult, objects

_TOOL_ITEMS = frozenset({"command_execution", "file_change", "mcp_tool_call", "web_search"})
_SKILL_FILE = re.compile(r"([^/\s'\"`]+)/SKILL\.md\b")
_USAGE_KEYS = ("input_tokens", "cached_input_tokens", "output_tokens")


def _call(
    recorder: TrajectoryRecorder, item: dict[str, Any], kind: str, call_id: str
) -> ToolCallEvent:
    server = None
    if kind == "command_execution":
        name, args = "command_execution", {"command": item.get("command")}
    elif kind == "file_change":
        name, args = "file_change", {"changes": item.get("changes") or []}
    elif kind == "mcp_tool_call":
        name = str(item.get("tool") or "mcp_tool_call")
        server = str(item["server"]) if item.get("server") else None
        raw_args = item.get("arguments")
        args = raw_args if isinstance(raw_args, dict) else {"arguments": raw_args}
    else:
        name, args = "web_search", {"query": item.get("query")}
    call = recorder.tool_call(name, call_id, args, server=server)
    if kind == "command_execution":
        for skill in dict.fromkeys(_SKILL_FILE.findall(str(item.get("command") or ""))):
            recorder.skill_activation(skill)
    return call


def _result(
    recorder: TrajectoryRecorder, item: dict[str, Any], kind: str, call: ToolCallEvent
) -> None:
    status = item.get("status")
    success = status not in ("failed", "declined")  # a tuple: status may be unhashable
    value: Any
    if kind == "command_execution":
        exit_code = item.get("exit_code")
        success = success and (exit_code in (None, 0))
        value = item.get("aggregated_output", "")
    elif kind == "mcp_tool_call":
        if item.get("error"):
            success = False
            value = item["error"]
        else:
            value = item.get("result")
    elif kind == "file_change":
        value = item.get("changes") or []
    else:
        value = item.get("query")
    recorder.tool_result(
        call.data.tool_name,
        call.data.tool_call_id,
        value,
        success=success,
        server=call.data.server,
    )


def _error_message(obj: dict[str, Any]) -> str:
    err = obj.get("error")
    if isinstance(err, dict) and err.get("message"):
        return str(err["message"])
    if obj.get("message"):
        return str(obj["message"])
    return json.dumps(obj, ensure_ascii=False)[:SNIPPET]


class _CodexStream:
    """The state of one Codex stream while its lines are read."""

    def __init__(self, turn: int, session: dict[str, Any]) -> None:
        self.result = StreamResult()
        self.recorder = TrajectoryRecorder(turn=turn)
        self.session = session
        self.calls: dict[str, ToolCallEvent] = {}

    def line(self, number: int, obj: dict[str, Any]) -> None:
        """Read one line of the stream."""
        kind = obj.get("type")
        if not isinstance(kind, str):
            return
        if kind in {"thread.started", "thread.resumed"}:
            if obj.get("thread_id"):
                self.result.session_id = str(obj["thread_id"])
        elif kind in {"item.started", "item.updated", "item.completed"}:
            item = obj.get("item")
            if isinstance(item, dict):
                self.item(number, str(kind), item)
        elif kind == "turn.completed":
            usage = obj.get("usage")
            if isinstance(usage, dict):
                self.usage(usage)
        elif kind == "error":
            self.recorder.error(_error_message(obj))
        elif kind == "turn.failed":
            self.failed(_error_message(obj))

    def item(self, number: int, kind: str, item: dict[str, Any]) -> None:
        """A tool call when first seen (its result when completed), or a completed message,
        reasoning or notice."""
        itype = str(item.get("type") or item.get("item_type") or "")
        item_id = str(item.get("id") or f"item-{number}")
        if itype in _TOOL_ITEMS:
            if item_id not in self.calls:
                self.calls[item_id] = _call(self.recorder, item, itype, item_id)
            if kind == "item.completed":
                _result(self.recorder, item, itype, self.calls[item_id])
        elif kind != "item.completed":
            return
        elif itype == "agent_message" and item.get("text"):
            self.recorder.assistant_message(str(item["text"]))
        elif itype == "reasoning" and item.get("text"):
            self.recorder.reasoning(str(item["text"]))
        elif itype == "error":
            self.result.extra.setdefault("warnings", []).append(_error_message(item))

    def usage(self, usage: dict[str, Any]) -> None:
        """The run's usage, less what earlier runs of the same session already counted."""
        seen = self.session.get("codexUsage") or {}
        now = self.recorder.checked_token_counts(
            {k: usage.get(k) for k in _USAGE_KEYS}, source="the run's usage"
        )
        if any(now[k] < seen.get(k, 0) for k in _USAGE_KEYS):
            seen = {}  # a new session: the totals started again
        self.session["codexUsage"] = now
        own = {k: now[k] - seen.get(k, 0) for k in _USAGE_KEYS}
        self.recorder.token_usage(
            own["input_tokens"], own["output_tokens"], cache_read_tokens=own["cached_input_tokens"]
        )

    def failed(self, message: str) -> None:
        """``turn.failed``: the run ended in error (its ``error`` line, when the same, becomes
        fatal instead of being recorded twice)."""
        self.result.is_error = True
        self.result.end_reason = "error"
        self.result.end_detail = message
        last = self.recorder.events[-1] if self.recorder.events else None
        if last is not None and last.type == "error" and last.data.message == message:
            last.data = last.data.model_copy(update={"fatal": True})
        else:
            self.recorder.error(message, fatal=True)

    def finish(self) -> StreamResult:
        """The result of the whole stream."""
        self.result.events = self.recorder.events
        self.result.output = last_assistant_text(self.result.events)
        return self.result


def parse_codex_stream(
    text: str, *, turn: int = 0, session: dict[str, Any] | None = None
) -> StreamResult:
    """Parse ``codex exec --json`` output (see the module docs for its limits).

    ``session`` carries the session's running token totals between the turns of one trial.
    """
    stream = _CodexStream(turn, session if session is not None else {})
    for number, obj in objects(text, stream.recorder):
        stream.line(number, obj)
    return stream.finish()
