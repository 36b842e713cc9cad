"""Adapters from agent CLIs' JSONL event streams to trajectory events.

Three formats are understood (the ``events:`` option of the ``command`` executor):

``vally``
    One trajectory event per line, exactly as :mod:`vally.models.trajectory` serialises
    them: ``{"type": "tool_call", "data": {"toolName": "...", ...}, "timestamp": "..."}``
    (camelCase keys; ``timestamp`` and ``turn`` optional). One extra line type sets the
    session id: ``{"type": "session", "data": {"sessionId": "..."}}``.
``claude-code``
    ``claude -p --output-format stream-json --verbose``
    (:mod:`vally_builtin.executors.claude_stream`).
``codex``
    ``codex exec --json`` (:mod:`vally_builtin.executors.codex_stream`).

Unknown line types are skipped. A line that is not valid JSON becomes one ``error`` event
(never fatal), so a stray print of the agent does not lose the run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter, ValidationError

from vally import TrajectoryEvent, TrajectoryRecorder, last_assistant_text

from .claude_stream import parse_claude_code_stream
from .codex_stream import parse_codex_stream
from .stream_base import StreamResult, merge_extra, objects

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


# --------------------------------------------------------------------------- vally


def parse_vally_stream(
    text: str, *, turn: int = 0, session: dict[str, Any] | None = None
) -> StreamResult:
    """Parse vally's own JSONL format (one serialised trajectory event per line).

    Every event is tagged with ``turn`` (one stream is one turn of the trial). A line of a
    known event type whose ``data`` does not validate becomes an ``error`` event.
    ``session`` is accepted for symmetry with the other adapters and not used.
    """
    result = StreamResult()
    recorder = TrajectoryRecorder(turn=turn)
    for number, obj in objects(text, recorder):
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


# --------------------------------------------------------------------------- registry

StreamParser = Callable[..., StreamResult]

PARSERS: dict[str, StreamParser] = {
    "vally": parse_vally_stream,
    "claude-code": parse_claude_code_stream,
    "codex": parse_codex_stream,
}


def parse_stream(
    fmt: str, text: str, *, turn: int = 0, session: dict[str, Any] | None = None
) -> StreamResult:
    """Parse ``text`` with the adapter named ``fmt`` (one of :data:`STREAM_FORMATS`).

    ``session``: a dict the caller keeps for all turns of one trial, in which adapters
    remember what they need across turns (e.g. session running totals to subtract).

    Raises:
        ValueError: ``fmt`` is not a known format.
    """
    try:
        parser = PARSERS[fmt]
    except KeyError:
        raise ValueError(
            f"unknown event stream format {fmt!r}; use one of {', '.join(STREAM_FORMATS)}"
        ) from None
    return parser(text, turn=turn, session=session)


__all__ = [
    "PARSERS",
    "STREAM_FORMATS",
    "StreamResult",
    "TrajectoryEvent",
    "merge_extra",
    "parse_claude_code_stream",
    "parse_codex_stream",
    "parse_stream",
    "parse_vally_stream",
]
