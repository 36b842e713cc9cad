"""What every event-stream adapter shares: the parse result, line reading and small value
helpers, and how per-turn facts add up over a trial."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from vally import TrajectoryRecorder, loads_bounded

SNIPPET = 200
"""Characters of a bad line quoted in its error event."""

SUMMED_EXTRA = ("costUsd", "agentTurns", "durationMs", "durationApiMs")
"""Per-turn ``extra`` numbers that add up over the turns of a trial."""


@dataclass
class StreamResult:
    """What an adapter read from one stream (one turn of a trial).

    Attributes:
        events: Trajectory events, in stream order, all tagged with the given turn.
        output: The final answer text (the stream's result, else the last assistant text).
        session_id: The agent's session/thread id, when the stream told it.
        is_error: The stream itself reported that the run failed or stopped at a limit.
        end_reason: Why the agent stopped, when the stream says it did not complete:
            ``error`` or ``max_turns``.
        end_detail: The agent's own words about that stop.
        extra: Facts the agent reported for this turn (cost, its own turn count, ...);
            see :func:`merge_extra` for how turns add up.
    """

    events: list[Any] = field(default_factory=list)
    output: str = ""
    session_id: str | None = None
    is_error: bool = False
    end_reason: Literal["error", "max_turns"] | None = None
    end_detail: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def merge_extra(total: dict[str, Any], turn: dict[str, Any]) -> None:
    """Add one turn's ``extra`` to the trial's: :data:`SUMMED_EXTRA` numbers and the
    numbers of ``modelUsage`` (per model) are summed, ``warnings`` lists are joined, other
    keys take the latest turn's value."""
    for key, value in turn.items():
        if key in SUMMED_EXTRA and isinstance(value, (int, float)):
            total[key] = total.get(key, 0) + value
        elif key == "modelUsage" and isinstance(value, dict):
            models = total.setdefault("modelUsage", {})
            for model, usage in value.items():
                into = models.setdefault(model, {})
                for name, number in usage.items():
                    into[name] = into.get(name, 0) + number
        elif key == "warnings" and isinstance(value, list):
            total.setdefault("warnings", []).extend(value)
        else:
            total[key] = value


def lines(text: str) -> Iterable[tuple[int, dict[str, Any] | None, str]]:
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


def objects(text: str, recorder: TrajectoryRecorder) -> Iterable[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) for each JSON-object line; any other line is recorded as
    an ``error`` event."""
    for number, obj, raw in lines(text):
        if obj is None:
            snippet = raw if len(raw) <= SNIPPET else raw[:SNIPPET] + "..."
            recorder.error(
                f"event stream line {number} is not a JSON object: {snippet}",
                code="invalid_stream_line",
            )
            continue
        yield number, obj


def text_of(value: Any) -> str:
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


def as_int(value: Any) -> int:
    """``value`` as an int (0 when missing or not a number)."""
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0
