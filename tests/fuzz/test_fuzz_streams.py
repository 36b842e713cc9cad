"""Fuzz the readers of what agents and tools print: the event-stream adapters, the program
grader's verdict and the record readers of ``vally grade`` / ``vally compare``. Whatever
the bytes, a reader returns (bad lines become error events) or raises a
:class:`~vally.errors.VallyError`; what it returns always makes a record that serialises
and reads back."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import example, given, settings, strategies as st

from vally.engine.records.run_folder import load_records
from vally.errors import VallyError
from vally.models.spec import GraderConfig, Stimulus
from vally.models.trajectory import Trajectory, compute_metrics
from vally_builtin.executors.streams import STREAM_FORMATS, parse_stream
from vally_builtin.graders.program import parse_program_output
from vally_regrade.saved_trials import read_trials

from . import FUZZ

TYPES = [
    # vally
    "tool_call", "tool_result", "token_usage", "turn_start", "turn_end", "assistant_message",
    "user_message", "reasoning", "error", "skill_activation", "session",
    # claude-code
    "system", "assistant", "user", "result",
    # codex
    "thread.started", "thread.resumed", "turn.started", "turn.completed", "turn.failed",
    "item.started", "item.updated", "item.completed",
]
KEYS = [
    "type", "data", "subtype", "session_id", "sessionId", "message", "content", "text",
    "thinking", "id", "name", "input", "tool_use_id", "is_error", "result", "usage",
    "input_tokens", "output_tokens", "cache_read_input_tokens", "cached_input_tokens",
    "model", "item", "item_type", "command", "aggregated_output", "exit_code", "status",
    "changes", "server", "tool", "arguments", "query", "thread_id", "error", "num_turns",
    "total_cost_usd", "duration_ms", "toolName", "toolCallId", "success", "inputTokens",
    "outputTokens", "skillName", "turnId", "turn", "timestamp", "code", "fatal",
]

JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([*TYPES, "agent_message", "command_execution", "file_change",
                     "mcp_tool_call", "web_search", "tool_use", "mcp__s__t", ""]),
    st.text(max_size=40),
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=6)), children,
                        max_size=5),
    ),
    max_leaves=25,
)


@st.composite
def event_line(draw: st.DrawFn) -> str:
    """One line an agent could print: an event object of a known type with random fields,
    any JSON value, a line nested far too deeply, or plain text."""
    kind = draw(st.sampled_from(["event", "event", "event", "json", "deep", "text"]))
    if kind == "event":
        event: dict[str, Any] = {"type": draw(st.sampled_from(TYPES))}
        event.update(draw(st.dictionaries(st.sampled_from(KEYS), JSON_VALUES, max_size=6)))
        return json.dumps(event, ensure_ascii=draw(st.booleans()))
    if kind == "json":
        return json.dumps(draw(JSON_VALUES))
    if kind == "deep":
        depth = draw(st.integers(min_value=90, max_value=100_000))
        inner = draw(st.sampled_from(["[", '{"a":']))
        closer = "]" if inner == "[" else "}"
        return '{"type": "tool_call", "data": ' + inner * depth + "1" + closer * depth + "}"
    return draw(st.text(max_size=60))


STREAMS = st.lists(event_line(), max_size=12).map("\n".join)


def _serialises(result_events: list[Any], output: str) -> None:
    """The parsed events make a trajectory that serialises and validates back."""
    trajectory = Trajectory(
        stimulus=Stimulus(name="s", prompt="p"),
        events=result_events,
        metrics=compute_metrics(result_events),
        output=output,
    )
    line = trajectory.to_json_line()
    assert Trajectory.model_validate_json(line).events == trajectory.events


@FUZZ
@given(fmt=st.sampled_from(STREAM_FORMATS), text=STREAMS, turn=st.integers(0, 3))
@example(fmt="vally", text='{"type": []}', turn=0)  # an unhashable type stopped the trial
@example(fmt="codex", text='{"type": {}}', turn=0)
@example(
    fmt="codex",
    text='{"type": "item.completed", "item": {"type": "web_search", "status": [1]}}',
    turn=1,
)
def test_stream_adapters_never_raise_and_their_events_serialise(
    fmt: str, text: str, turn: int
) -> None:
    result = parse_stream(fmt, text, turn=turn)
    assert all(event.turn == turn for event in result.events)
    _serialises(result.events, result.output)


@settings(parent=FUZZ, max_examples=50)
@given(text=STREAMS)
def test_a_deep_line_is_one_error_event_and_the_rest_is_read(text: str) -> None:
    deep = '{"type": "assistant_message", "data": {"content": ' + "[" * 5000 + "]" * 5000 + "}}"
    good = '{"type": "assistant_message", "data": {"content": "kept"}}'
    result = parse_stream("vally", "\n".join([text, deep, good]))
    assert result.output == "kept"
    assert any(
        e.type == "error" and "nested deeper than" in e.data.message for e in result.events
    )


@FUZZ
@given(lines=st.lists(event_line(), max_size=8))
def test_grade_input_gives_trials_or_a_vally_error(lines: list[str]) -> None:
    try:
        read_trials([line + "\n" for line in lines])
    except VallyError as exc:
        assert exc.render()


@pytest.fixture(scope="module")
def results_file() -> Any:
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp) / "results.jsonl"


@FUZZ
@given(lines=st.lists(event_line(), max_size=8))
def test_compare_input_gives_records_or_a_vally_error(results_file: Path, lines: list[str]) -> None:
    results_file.write_text("\n".join(lines), encoding="utf-8")
    try:
        load_records(results_file)
    except VallyError as exc:
        assert exc.render()


VERDICTS = st.fixed_dictionaries(
    {"passed": st.one_of(st.booleans(), JSON_SCALARS)},
    optional={
        "score": JSON_SCALARS,
        "evidence": JSON_VALUES,
        "details": st.lists(JSON_VALUES, max_size=3),
        "metadata": JSON_VALUES,
        "kind": JSON_SCALARS,
        "status": JSON_SCALARS,
    },
).map(json.dumps)


@FUZZ
@given(lines=st.lists(st.one_of(VERDICTS, event_line()), min_size=1, max_size=4))
def test_a_program_graders_output_gives_a_result_or_a_grading_error(lines: list[str]) -> None:
    context: Any = SimpleNamespace(grader=GraderConfig(type="program"))
    try:
        result = parse_program_output("\n".join(lines), context)
    except VallyError as exc:
        assert exc.render()
    else:
        assert type(result).model_validate_json(result.to_json_line()) == result
