"""Adapters from agent CLIs' JSONL event streams to trajectory events.

Three formats are understood (the ``events:`` option of the ``command`` executor):

``vally``
    One trajectory event per line, exactly as :mod:`vally.models.trajectory` serialises
    them: ``{"type": "tool_call", "data": {"toolName": "...", ...}, "timestamp": "..."}``
    (camelCase keys; ``timestamp`` and ``turn`` optional). One extra line type sets the
    session id: ``{"type": "session", "data": {"sessionId": "..."}}``.
``claude-code``
    ``claude -p --output-format stream-json --verbose``: ``system`` (``init`` carries the
    ``session_id``), ``assistant`` (``message.content`` blocks ``text``, ``thinking``,
    ``tool_use``; ``message.usage``), ``user`` (``tool_result`` blocks) and the final
    ``result`` line (``result``, ``usage``, ``session_id``, ``is_error``).
``codex``
    ``codex exec --json``: ``thread.started`` (``thread_id``), ``turn.started``,
    ``item.started``/``item.updated``/``item.completed`` (items ``agent_message``,
    ``reasoning``, ``command_execution``, ``file_change``, ``mcp_tool_call``, ``web_search``,
    ``error``), ``turn.completed`` (``usage``), ``turn.failed`` and ``error``.

Unknown line types are skipped. A line that is not valid JSON becomes one ``error`` event
(never fatal), so a stray print of the agent does not lose the run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter, ValidationError

from vally import (
    TokenUsageData,
    TokenUsageEvent,
    ToolCallEvent,
    TrajectoryEvent,
    TrajectoryRecorder,
    last_assistant_text,
    loads_bounded,
)

STREAM_FORMATS = ("vally", "claude-code", "codex")
"""The names accepted by :func:`parse_stream`."""

_EVENT_ADAPTER: TypeAdapter[Any] = TypeAdapter(TrajectoryEvent)
_EVENT_TYPES = frozenset(
    {
        "tool_call",
        "tool_result",
        "token_usage",
        "turn_start",
        "turn_end",
        "assistant_message",
        "user_message",
        "reasoning",
        "error",
        "skill_activation",
    }
)
_SNIPPET = 200


@dataclass
class StreamResult:
    """What an adapter read from one stream.

    Attributes:
        events: Trajectory events, in stream order, all tagged with the given turn.
        output: The final answer text (the stream's result, else the last assistant text).
        session_id: The agent's session/thread id, when the stream told it.
        is_error: The stream itself reported that the run failed.
        extra: Other facts worth keeping (cost, the agent's own turn count, ...).
    """

    events: list[Any] = field(default_factory=list)
    output: str = ""
    session_id: str | None = None
    is_error: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def _lines(text: str) -> Iterable[tuple[int, dict[str, Any] | None, str]]:
    """Yield (line number, parsed object or None, raw line) for each non-blank line."""
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        try:
            value = loads_bounded(line)
        except ValueError as exc:  # not JSON, or nested deeper than VALLY_MAX_JSON_DEPTH
            yield number, None, line if isinstance(exc, json.JSONDecodeError) else f"{exc}"
            continue
        yield number, value if isinstance(value, dict) else None, line


def _objects(text: str, recorder: TrajectoryRecorder) -> Iterable[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) for each JSON-object line; any other line is recorded as
    an ``error`` event."""
    for number, obj, raw in _lines(text):
        if obj is None:
            snippet = raw if len(raw) <= _SNIPPET else raw[:_SNIPPET] + "..."
            recorder.error(
                f"event stream line {number} is not a JSON object: {snippet}",
                code="invalid_stream_line",
            )
            continue
        yield number, obj


def _text_of(value: Any) -> str:
    """Flatten tool-result content (a string or a list of ``{type: text, text}`` blocks)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for block in value:
            if isinstance(block, dict):
                if isinstance(block.get("text"), str):
                    parts.append(block["text"])
                else:
                    parts.append(json.dumps(block, ensure_ascii=False))
            else:
                parts.append(str(block))
        return "\n".join(parts)
    return json.dumps(value, ensure_ascii=False)


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


# --------------------------------------------------------------------------- vally


def parse_vally_stream(text: str, *, turn: int = 0) -> StreamResult:
    """Parse vally's own JSONL format (one serialised trajectory event per line).

    Every event is tagged with ``turn`` (one stream is one turn of the trial). A line of a
    known event type whose ``data`` does not validate becomes an ``error`` event.
    """
    result = StreamResult()
    recorder = TrajectoryRecorder(turn=turn)
    for number, obj in _objects(text, recorder):
        kind = obj.get("type")
        if kind == "session":
            data = obj.get("data")
            sid = (
                (data.get("sessionId") or data.get("session_id"))
                if isinstance(data, dict)
                else None
            )
            if sid:
                result.session_id = str(sid)
            continue
        if not isinstance(kind, str) or kind not in _EVENT_TYPES:
            continue
        try:
            recorder.add(_EVENT_ADAPTER.validate_python({**obj, "turn": turn}))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ()))
            recorder.error(
                f"event stream line {number}: invalid {kind!r} event ({where}: {first.get('msg')})",
                code="invalid_stream_event",
            )
    result.events = recorder.events
    result.output = last_assistant_text(result.events)
    return result


# --------------------------------------------------------------------------- claude code


def _claude_usage(usage: dict[str, Any], model: str | None) -> TokenUsageData:
    cache_read = _int(usage.get("cache_read_input_tokens"))
    cache_write = _int(usage.get("cache_creation_input_tokens"))
    # Claude's input_tokens excludes cached tokens; ours includes them.
    return TokenUsageData(
        input_tokens=_int(usage.get("input_tokens")) + cache_read + cache_write,
        output_tokens=_int(usage.get("output_tokens")),
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        model=model,
    )


class _ClaudeStream:
    """The state of one Claude Code stream while its lines are read."""

    def __init__(self, turn: int) -> None:
        self.result = StreamResult()
        self.recorder = TrajectoryRecorder(turn=turn)
        self.model: str | None = None
        self.tool_names: dict[str, str] = {}
        self.usage_by_message: dict[str, TokenUsageEvent] = {}
        self.final_text: str | None = None

    def line(self, number: int, obj: dict[str, Any]) -> None:
        """Read one line of the stream."""
        kind = obj.get("type")
        if obj.get("session_id") and isinstance(obj.get("session_id"), str):
            self.result.session_id = obj["session_id"]
        if kind == "system":
            if obj.get("subtype") == "init" and obj.get("model"):
                self.model = str(obj["model"])
        elif kind == "assistant":
            self.assistant(number, obj.get("message") or {})
        elif kind == "user":
            content = (obj.get("message") or {}).get("content")
            if isinstance(content, list):
                self.tool_results(content)
        elif kind == "result":
            self.final(obj)

    def assistant(self, number: int, message: dict[str, Any]) -> None:
        """An assistant message: its content blocks, then its usage (once per message id)."""
        msg_id = str(message.get("id") or f"line-{number}")
        for block in message.get("content") or []:
            if isinstance(block, dict):
                self.content_block(number, msg_id, block)
        usage = message.get("usage")
        if isinstance(usage, dict):
            data = _claude_usage(usage, message.get("model") or self.model)
            if msg_id in self.usage_by_message:
                self.usage_by_message[msg_id].data = data
            else:
                self.usage_by_message[msg_id] = self.recorder.add(TokenUsageEvent(data=data))

    def content_block(self, number: int, msg_id: str, block: dict[str, Any]) -> None:
        """One ``text``, ``thinking`` or ``tool_use`` block of an assistant message."""
        btype = block.get("type")
        if btype == "text" and block.get("text"):
            self.recorder.assistant_message(block["text"])
        elif btype == "thinking" and block.get("thinking"):
            self.recorder.reasoning(block["thinking"])
        elif btype == "tool_use":
            name = str(block.get("name") or "unknown")
            call_id = str(block.get("id") or f"call-{number}")
            self.tool_names[call_id] = name
            args = block.get("input")
            server = None
            if name.startswith("mcp__") and name.count("__") >= 2:
                server = name.split("__")[1]
            arguments = args if isinstance(args, (dict, str)) else {}
            self.recorder.tool_call(name, call_id, arguments, server=server, batch_id=msg_id)
            if name == "Skill" and isinstance(args, dict):
                skill = args.get("skill") or args.get("command") or args.get("name")
                if skill:
                    self.recorder.skill_activation(str(skill))

    def tool_results(self, content: list[Any]) -> None:
        """The ``tool_result`` blocks of a user message."""
        for block in content:
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            call_id = str(block.get("tool_use_id") or "")
            self.recorder.tool_result(
                self.tool_names.get(call_id, "unknown"),
                call_id,
                _text_of(block.get("content")),
                success=not bool(block.get("is_error")),
            )

    def final(self, obj: dict[str, Any]) -> None:
        """The ``result`` line: the answer, cost facts, usage (when no message had any) and
        a fatal error when the run failed."""
        if isinstance(obj.get("result"), str):
            self.final_text = obj["result"]
        for key in ("total_cost_usd", "num_turns", "duration_ms", "subtype"):
            if key in obj:
                self.result.extra[key] = obj[key]
        if not self.usage_by_message and isinstance(obj.get("usage"), dict):
            self.recorder.add(TokenUsageEvent(data=_claude_usage(obj["usage"], self.model)))
        if obj.get("is_error"):
            self.result.is_error = True
            detail = self.final_text or str(obj.get("subtype") or "unknown error")
            self.recorder.error(f"agent reported an error: {detail}", fatal=True)

    def finish(self) -> StreamResult:
        """The result of the whole stream."""
        self.result.events = self.recorder.events
        final = self.final_text
        self.result.output = final if final is not None else last_assistant_text(self.result.events)
        return self.result


def parse_claude_code_stream(text: str, *, turn: int = 0) -> StreamResult:
    """Parse ``claude -p --output-format stream-json`` output.

    Token usage is taken once per assistant message id (Claude Code repeats a message's
    usage on each of its content-block lines; the last one wins); the final ``result``
    line's usage is used only when no assistant message carried any. A ``Skill`` tool call
    also records a ``skill_activation``; ``mcp__server__tool`` calls get their ``server``.
    """
    stream = _ClaudeStream(turn)
    for number, obj in _objects(text, stream.recorder):
        stream.line(number, obj)
    return stream.finish()


# --------------------------------------------------------------------------- codex

_CODEX_TOOL_ITEMS = frozenset({"command_execution", "file_change", "mcp_tool_call", "web_search"})


def _codex_call(
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
    return recorder.tool_call(name, call_id, args, server=server)


def _codex_result(
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


def _codex_error_message(obj: dict[str, Any]) -> str:
    err = obj.get("error")
    if isinstance(err, dict) and err.get("message"):
        return str(err["message"])
    if obj.get("message"):
        return str(obj["message"])
    return json.dumps(obj, ensure_ascii=False)[:_SNIPPET]


def _codex_item(
    recorder: TrajectoryRecorder,
    calls: dict[str, ToolCallEvent],
    number: int,
    kind: str,
    item: dict[str, Any],
) -> None:
    """One ``item.*`` line: a tool call when first seen (its result when completed), or a
    completed message, reasoning or error item."""
    itype = str(item.get("type") or item.get("item_type") or "")
    item_id = str(item.get("id") or f"item-{number}")
    if itype in _CODEX_TOOL_ITEMS:
        if item_id not in calls:
            calls[item_id] = _codex_call(recorder, item, itype, item_id)
        if kind == "item.completed":
            _codex_result(recorder, item, itype, calls[item_id])
    elif kind != "item.completed":
        return
    elif itype == "agent_message" and item.get("text"):
        recorder.assistant_message(str(item["text"]))
    elif itype == "reasoning" and item.get("text"):
        recorder.reasoning(str(item["text"]))
    elif itype == "error":
        recorder.error(_codex_error_message(item))


def parse_codex_stream(text: str, *, turn: int = 0) -> StreamResult:
    """Parse ``codex exec --json`` output.

    Tool-like items (``command_execution``, ``file_change``, ``mcp_tool_call``,
    ``web_search``) give a ``tool_call`` when first seen and a ``tool_result`` when
    completed. ``turn.completed`` usage gives one ``token_usage`` (Codex's ``input_tokens``
    already includes ``cached_input_tokens``).
    """
    result = StreamResult()
    recorder = TrajectoryRecorder(turn=turn)
    calls: dict[str, ToolCallEvent] = {}
    for number, obj in _objects(text, recorder):
        kind = obj.get("type")
        if not isinstance(kind, str):
            continue
        if kind in {"thread.started", "thread.resumed"}:
            if obj.get("thread_id"):
                result.session_id = str(obj["thread_id"])
        elif kind in {"item.started", "item.updated", "item.completed"}:
            item = obj.get("item")
            if isinstance(item, dict):
                _codex_item(recorder, calls, number, kind, item)
        elif kind == "turn.completed":
            usage = obj.get("usage")
            if isinstance(usage, dict):
                recorder.token_usage(
                    _int(usage.get("input_tokens")),
                    _int(usage.get("output_tokens")),
                    cache_read_tokens=_int(usage.get("cached_input_tokens")),
                )
        elif kind in {"turn.failed", "error"}:
            fatal = kind == "turn.failed"
            result.is_error = result.is_error or fatal
            recorder.error(_codex_error_message(obj), fatal=fatal)
    result.events = recorder.events
    result.output = last_assistant_text(result.events)
    return result


# --------------------------------------------------------------------------- registry

StreamParser = Callable[..., StreamResult]

PARSERS: dict[str, StreamParser] = {
    "vally": parse_vally_stream,
    "claude-code": parse_claude_code_stream,
    "codex": parse_codex_stream,
}


def parse_stream(fmt: str, text: str, *, turn: int = 0) -> StreamResult:
    """Parse ``text`` with the adapter named ``fmt`` (one of :data:`STREAM_FORMATS`).

    Raises:
        ValueError: ``fmt`` is not a known format.
    """
    try:
        parser = PARSERS[fmt]
    except KeyError:
        raise ValueError(
            f"unknown event stream format {fmt!r}; use one of {', '.join(STREAM_FORMATS)}"
        ) from None
    return parser(text, turn=turn)


__all__ = [
    "PARSERS",
    "STREAM_FORMATS",
    "StreamResult",
    "TrajectoryEvent",
    "parse_claude_code_stream",
    "parse_codex_stream",
    "parse_stream",
    "parse_vally_stream",
]
