"""Event-stream adapters on sample streams of each format."""

from __future__ import annotations

from pathlib import Path

import pytest

from vally.models.trajectory import Trajectory, compute_metrics
from vally_builtin.executors.streams import parse_stream

STREAMS = Path(__file__).parent.parent / "fixtures" / "streams"


def _read(name: str) -> str:
    return (STREAMS / name).read_text(encoding="utf-8")


def _types(events: list) -> list[str]:
    return [e.type for e in events]


def test_claude_code_stream() -> None:
    result = parse_stream("claude-code", _read("claude-code.jsonl"), turn=2)
    assert result.session_id == "8c1f5d2e-5b7a-4f5e-9a51-3f2b7f0c9d11"
    assert result.output == "The project has two files: README.md and main.py."
    assert not result.is_error
    assert result.extra["costUsd"] == 0.0123
    assert result.extra["agentTurns"] == 3
    assert result.end_reason is None
    assert all(e.turn == 2 for e in result.events)
    assert _types(result.events) == [
        "reasoning",
        "token_usage",  # msg_01: once, although two lines carry it
        "assistant_message",
        "tool_call",
        "tool_result",
        "tool_call",
        "skill_activation",
        "tool_call",
        "token_usage",
        "tool_result",
        "tool_result",
        "error",  # the line that is not JSON
        "assistant_message",
        "token_usage",
    ]
    calls = [e.data for e in result.events if e.type == "tool_call"]
    assert [(c.tool_name, c.server) for c in calls] == [
        ("Bash", None),
        ("Skill", None),
        ("mcp__github__get_issue", "github"),
    ]
    assert calls[0].arguments == {"command": "ls", "description": "List files"}
    assert calls[1].batch_id == calls[2].batch_id == "msg_02"
    results = [e.data for e in result.events if e.type == "tool_result"]
    assert [(r.tool_name, r.success, r.result) for r in results] == [
        ("Bash", True, "README.md\nmain.py"),
        ("Skill", True, "Skill loaded"),
        ("mcp__github__get_issue", False, "not found"),
    ]
    metrics = compute_metrics(result.events)
    usage = metrics.token_usage
    # One event per message (cached tokens included in input); the result line's totals
    # win (output 90, not 40 + 30 + 15): the last call takes the difference.
    assert usage.input_tokens == (12 + 300 + 1000) + (20 + 1300) + (30 + 1400)
    assert usage.output_tokens == 90
    assert [e.data.output_tokens for e in result.events if e.type == "token_usage"] == [
        40,
        30,
        20,
    ]
    assert usage.cache_read_tokens == 1000 + 1300 + 1400
    assert usage.cache_write_tokens == 300
    assert usage.by_model["claude-sonnet-4-5"]["callCount"] == 3
    assert metrics.skill_activation_breakdown == {"python-style": 1}
    assert metrics.error_count == 1


def test_claude_code_max_turns_result() -> None:
    result = parse_stream("claude-code", _read("claude-code-error.jsonl"))
    assert result.is_error
    assert result.end_reason == "max_turns"
    assert result.session_id == "0b7c9a10-1111-4222-8333-944455556666"
    # No assistant message carried usage: the result's usage is the one call.
    assert _types(result.events) == ["token_usage"]
    assert result.events[0].data.output_tokens == 2
    assert result.output == ""


def test_codex_stream() -> None:
    result = parse_stream("codex", _read("codex.jsonl"))
    assert result.session_id == "0199a213-81c0-7800-8aa1-bbab2a035a53"
    assert result.output == "I updated main.py; the repository has README.md and main.py."
    assert _types(result.events) == [
        "reasoning",
        "tool_call",
        "tool_result",
        "tool_call",
        "tool_result",
        "tool_call",
        "tool_result",
        "tool_call",
        "tool_result",
        "tool_call",
        "tool_result",
        "assistant_message",
        "token_usage",
    ]
    results = [e.data for e in result.events if e.type == "tool_result"]
    assert [(r.tool_name, r.success) for r in results] == [
        ("command_execution", True),
        ("command_execution", False),
        ("file_change", True),
        ("search", True),
        ("web_search", True),
    ]
    assert results[0].result == "README.md\nmain.py\n"
    assert results[3].server == "docs"
    calls = [e.data for e in result.events if e.type == "tool_call"]
    assert calls[0].arguments == {"command": "bash -lc ls"}
    assert calls[3].arguments == {"q": "asyncio"}
    usage = compute_metrics(result.events).token_usage
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (
        24763,
        24448,
        122,
    )


def test_codex_failed_turn() -> None:
    result = parse_stream("codex", _read("codex-failed.jsonl"))
    assert result.is_error
    assert (result.end_reason, result.end_detail) == ("error", "You've hit your usage limit.")
    errors = [e.data for e in result.events if e.type == "error"]
    assert [(e.message, e.fatal) for e in errors] == [
        ("stream disconnected before completion; retrying 1/5", False),
        ("You've hit your usage limit.", True),
    ]


def test_vally_stream() -> None:
    result = parse_stream("vally", _read("vally.jsonl"), turn=1)
    assert result.session_id == "sess-42"
    assert result.output == "Wrote hello.txt"
    assert _types(result.events) == [
        "reasoning",
        "tool_call",
        "tool_result",
        "skill_activation",
        "token_usage",
        "error",  # tool_call without toolName
        "error",  # not JSON
        "assistant_message",
    ]
    assert all(e.turn == 1 for e in result.events)
    assert result.events[1].timestamp == "2026-01-01T00:00:00.000Z"
    assert result.events[4].data.cache_read_tokens == 40
    assert "toolName" in result.events[5].data.message or "tool_name" in (
        result.events[5].data.message
    )
    # The events round-trip through a trajectory.
    from vally.models.spec import Stimulus

    traj = Trajectory(stimulus=Stimulus(name="s", prompt="p"), events=result.events)
    again = Trajectory.model_validate_json(traj.model_dump_json(by_alias=True))
    assert _types(again.events) == _types(result.events)


def test_vally_stream_round_trips_serialised_events() -> None:
    original = parse_stream("vally", _read("vally.jsonl")).events
    text = "\n".join(e.to_json_line() for e in original if e.type != "error")
    again = parse_stream("vally", text).events
    assert [e.to_json_dict() for e in again] == [
        e.to_json_dict() for e in original if e.type != "error"
    ]


def test_unknown_format_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown event stream format"):
        parse_stream("nope", "")


def test_empty_and_blank_streams() -> None:
    for fmt in ("vally", "claude-code", "codex"):
        result = parse_stream(fmt, "\n\n  \n")
        assert result.events == [] and result.output == "" and result.session_id is None
