"""The copilot executor's event mapping, over recorded Copilot session streams (no CLI)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from vally import TrajectoryRecorder
from vally_builtin.executors.copilot.events import CopilotEventMapper, SessionFacts

STREAMS = Path(__file__).resolve().parents[1] / "fixtures" / "streams" / "copilot"


def _stream(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (STREAMS / f"{name}.jsonl").read_text().splitlines()]


def _map(name: str, turns: dict[str, int] | None = None) -> tuple[CopilotEventMapper, list[Any]]:
    """Map a stream; ``turns`` moves the recorder to a prompt index at a user message."""
    recorder = TrajectoryRecorder()
    mapper = CopilotEventMapper(recorder)
    for event in _stream(name):
        if event["type"] == "user.message" and turns:
            recorder.turn = turns.get(event["data"]["content"], recorder.turn)
        mapper.handle(event)
    return mapper, recorder.events


def _of(events: list[Any], kind: str) -> list[Any]:
    return [e.data for e in events if e.type == kind]


def test_every_handled_event_type_occurs_in_the_recorded_streams() -> None:
    seen = {
        e["type"]
        for name in ("tools", "retry", "limit", "error", "synthetic")
        for e in _stream(name)
    }
    mapper = CopilotEventMapper(TrajectoryRecorder())
    assert mapper.handled_types <= seen, sorted(mapper.handled_types - seen)


def test_tools_stream_maps_calls_results_usage_skills_mcp_and_turns() -> None:
    mapper, events = _map(
        "tools",
        {"Greet, look up alpha, then write hello.txt.": 0, "What did you write?": 1},
    )
    calls = _of(events, "tool_call")
    assert [(c.tool_name, c.tool_call_id, c.arguments, c.server) for c in calls] == [
        ("skill", "call_skill", {"skill": "greeter"}, None),
        ("notes-lookup", "call_mcp", {"key": "alpha"}, "notes"),
        ("create", "call_write", {"path": "hello.txt", "file_text": "hello world\n"}, None),
    ]
    assert all(c.batch_id for c in calls)  # the assistant message announced each call
    results = {r.tool_call_id: r for r in _of(events, "tool_result")}
    assert results["call_mcp"].server == "notes"
    assert results["call_mcp"].result.startswith("first letter")
    assert results["call_write"].success is True
    assert "Created file /workspace/hello.txt" in results["call_write"].result
    usage = [(u.input_tokens, u.output_tokens, u.model) for u in _of(events, "token_usage")]
    assert usage == [(101 + i, 11 + i, "test-model") for i in range(5)]
    assert [s.skill_name for s in _of(events, "skill_activation")] == ["greeter"]
    starts = [t.turn_id for t in _of(events, "turn_start")]
    assert starts == ["turn-1", "turn-2", "turn-3", "turn-4", "turn-5"]
    assert [t.turn_id for t in _of(events, "turn_end")] == starts
    assert [m.content for m in _of(events, "assistant_message")] == [
        "Writing it.",
        "Bonjour! I wrote hello.txt.",
        "Bonjour! I wrote hello world.",
    ]
    assert [e.turn for e in events if e.type == "user_message"] == [0, 1]
    assert [e.turn for e in events if e.type == "token_usage"] == [0, 0, 0, 0, 1]
    facts = mapper.facts
    assert facts.session_id and facts.agent_turns == 5 and facts.tool_calls == 3
    assert facts.tokens == sum(101 + i + 11 + i for i in range(5))
    assert facts.fatal_error is None and facts.idle is True
    assert facts.extra["mcp_servers"] == {"notes": "connected"}
    totals = facts.extra["session_totals"]["modelMetrics"]["test-model"]["usage"]
    assert (totals["inputTokens"], totals["outputTokens"]) == (515, 65)
    assert not _of(events, "error")


def test_retry_stream_records_the_failed_call_and_the_retry() -> None:
    mapper, events = _map("retry")
    errors = _of(events, "error")
    assert [(e.code, e.fatal) for e in errors] == [
        ("model_call_failure", False),
        ("turn_retry", False),
    ]
    assert "overloaded, try again" in errors[0].message
    assert "api_error" in errors[1].message
    assert [m.content for m in _of(events, "assistant_message")] == ["Hi after retry."]
    assert mapper.facts.fatal_error is None


def test_error_stream_sets_the_fatal_error_with_the_servers_message() -> None:
    mapper, events = _map("error")
    assert mapper.facts.fatal_error == "400 quota exhausted for key 7Q"
    fatal = [e for e in _of(events, "error") if e.fatal]
    assert [(e.code, e.message) for e in fatal] == [("query", "400 quota exhausted for key 7Q")]
    assert not _of(events, "token_usage")


def test_limit_stream_leaves_the_aborted_call_pending_and_records_the_abort() -> None:
    mapper, events = _map("limit")
    assert [c.tool_call_id for c in _of(events, "tool_call")] == ["c1", "c2"]
    assert [r.tool_call_id for r in _of(events, "tool_result")] == ["c1"]
    assert mapper.pending_calls() == [("c2", "bash", None)]
    assert mapper.facts.extra["abort_reason"] == "user_initiated"


def test_synthetic_stream_covers_reasoning_warnings_failed_servers_and_denials() -> None:
    mapper, events = _map("synthetic")
    assert [r.content for r in _of(events, "reasoning")] == [
        "The user wants a file outside the workspace."
    ]
    [usage] = _of(events, "token_usage")
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (30, 2)
    [call] = _of(events, "tool_call")
    assert call.arguments == {"path": "/etc/shadow"}  # a JSON string is decoded
    [result] = _of(events, "tool_result")
    assert result.success is False and "outside the workspace" in result.result
    codes = [(e.code, e.message) for e in _of(events, "error")]
    assert ("mcp_server_failed", "MCP server 'db' did not connect: spawn db-server ENOENT") in codes
    assert ("warning", "context window is 90% full") in codes
    assert mapper.facts.extra["permission_denials"] == [
        {"tool_call_id": "v1", "result": "denied-interactively-by-user"}
    ]


def test_counters_call_back_as_they_change() -> None:
    seen: list[tuple[int, int, int]] = []

    def on_change(facts: SessionFacts) -> None:
        seen.append((facts.agent_turns, facts.tool_calls, facts.tokens))

    mapper = CopilotEventMapper(TrajectoryRecorder(), on_change=on_change)
    for event in _stream("limit"):
        mapper.handle(event)
    assert seen[0] == (1, 0, 0)
    assert (2, 2, seen[-1][2]) == seen[-1]


@pytest.mark.parametrize("event", [{}, {"type": 3}, {"type": "no.such"}, {"type": "user.message"}])
def test_odd_events_do_not_break_the_mapper(event: dict[str, Any]) -> None:
    mapper = CopilotEventMapper(TrajectoryRecorder())
    mapper.handle(event)
    assert mapper.facts.agent_turns == 0


def test_tool_arguments_nested_too_deep_are_kept_as_their_text() -> None:
    from vally_builtin.executors.copilot.events import _arguments

    deep = "[" * 100_000 + "]" * 100_000
    assert _arguments(deep) == deep  # not a RecursionError
    assert _arguments('{"path": "a.txt"}') == {"path": "a.txt"}
