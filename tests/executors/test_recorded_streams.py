"""The Claude Code and Codex adapters on streams recorded from the real CLIs
(``@anthropic-ai/claude-code`` 2.1.332, ``@openai/codex`` 0.171.0) run against the scripted
loopback servers of ``tests/agents``. The scripted usage of each model call is stated next
to each test, so the expected totals are the server's, not the adapter's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vally.models.trajectory import compute_metrics
from vally_builtin.executors.streams import StreamResult, merge_extra, parse_stream

RECORDED = Path(__file__).parent.parent / "fixtures" / "streams" / "recorded"


def _parse(
    fmt: str, name: str, *, turn: int = 0, session: dict[str, Any] | None = None
) -> StreamResult:
    return parse_stream(
        fmt, (RECORDED / name).read_text(encoding="utf-8"), turn=turn, session=session
    )


def _usage(result: StreamResult) -> tuple[int, int, int, int]:
    usage = compute_metrics(result.events).token_usage
    return usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.call_count


def test_claude_output_tokens_are_the_cli_totals() -> None:
    # Scripted: call 1 in 500 / out 40 (text + Bash), call 2 in 700 / out 23.
    result = _parse("claude-code", "claude-code-turn1.jsonl")
    assert _usage(result) == (1200, 63, 0, 2)
    assert [e.data.input_tokens for e in result.events if e.type == "token_usage"] == [500, 700]
    calls = [e.data for e in result.events if e.type == "tool_call"]
    assert [(c.tool_name, c.arguments) for c in calls] == [("Bash", {"command": "echo one"})]
    results = [e.data for e in result.events if e.type == "tool_result"]
    assert [(r.tool_name, r.result, r.success) for r in results] == [("Bash", "one", True)]
    assert result.output == "first answer"
    assert result.extra["agentTurns"] == 2
    assert result.extra["modelUsage"]["claude-test"]["outputTokens"] == 63
    assert result.end_reason is None


def test_claude_resume_counts_only_its_own_run() -> None:
    # Scripted: the resumed run is one call, in 900 (300 of them cached) / out 11. Claude
    # Code's modelUsage and total_cost_usd on that line are the session's (2100 / 74).
    session: dict[str, Any] = {}
    first = _parse("claude-code", "claude-code-turn1.jsonl", session=session)
    second = _parse("claude-code", "claude-code-resume.jsonl", turn=1, session=session)
    assert second.session_id == first.session_id
    assert _usage(second) == (1200, 11, 300, 1)
    total: dict[str, Any] = {}
    merge_extra(total, first.extra)
    merge_extra(total, second.extra)
    assert total["agentTurns"] == 3
    assert total["modelUsage"]["claude-test"]["inputTokens"] == 1200 + 900
    assert total["modelUsage"]["claude-test"]["outputTokens"] == 63 + 11
    # The trial's cost is the session's final total_cost_usd, summed from per-run costs.
    assert abs(total["costUsd"] - 0.00994) < 1e-9


def test_claude_api_error_is_an_error_end_without_a_model_call() -> None:
    result = _parse("claude-code", "claude-code-api-error.jsonl")
    assert result.end_reason == "error"
    assert "Prompt is too long" in (result.end_detail or "")
    assert _usage(result) == (0, 0, 0, 0)  # the <synthetic> message is not a model call
    errors = [e.data for e in result.events if e.type == "error"]
    assert len(errors) == 1 and errors[0].fatal
    assert result.extra["apiErrorStatus"] == 400


def test_claude_max_turns_is_a_max_turns_end() -> None:
    # Scripted: one call, in 50 / out 5, then --max-turns 1 stops the run.
    result = _parse("claude-code", "claude-code-max-turns.jsonl")
    assert result.end_reason == "max_turns"
    assert result.end_detail == "Reached maximum number of turns (1)"
    assert _usage(result) == (50, 5, 0, 1)
    assert not [e for e in result.events if e.type == "error"]


def test_codex_resume_usage_is_not_counted_twice() -> None:
    # Scripted: turn 1 = calls (in 1000, 200 cached, out 30) + (in 1200, out 10);
    # turn 2 = one call in 1500 (1000 cached) / out 8. Codex reports turn 2 as the
    # session total (3700 / 48).
    session: dict[str, Any] = {}
    first = _parse("codex", "codex-turn1.jsonl", session=session)
    second = _parse("codex", "codex-resume.jsonl", turn=1, session=session)
    assert _usage(first) == (2200, 40, 200, 1)
    assert _usage(second) == (1500, 8, 1000, 1)
    assert second.session_id == first.session_id


def test_codex_metadata_notice_is_a_warning_not_an_error() -> None:
    result = _parse("codex", "codex-turn1.jsonl")
    assert not [e for e in result.events if e.type == "error"]
    assert len(result.extra["warnings"]) == 1
    assert "Model metadata for `gpt-test` not found" in result.extra["warnings"][0]
    assert [e.data.content for e in result.events if e.type == "reasoning"] == ["think"]


def test_codex_reading_skill_md_is_a_skill_activation() -> None:
    result = _parse("codex", "codex-skill.jsonl")
    metrics = compute_metrics(result.events)
    assert metrics.skill_activation_breakdown == {"greet": 1}
    results = [e.data for e in result.events if e.type == "tool_result"]
    assert [(r.tool_name, r.success) for r in results] == [
        ("command_execution", True),
        ("command_execution", False),  # exit 3
    ]
    assert result.output == "Ahoy!"


def test_codex_failed_turns_end_in_error_once() -> None:
    for name, detail in (
        ("codex-http-error.jsonl", "bad request from test"),
        ("codex-stream-failed.jsonl", "model overloaded"),
    ):
        result = _parse("codex", name)
        assert result.end_reason == "error"
        assert detail in (result.end_detail or "")
        errors = [e.data for e in result.events if e.type == "error"]
        assert len(errors) == 1 and errors[0].fatal, name


def test_claude_api_retries_are_warnings() -> None:
    retry = (
        '{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,'
        '"retry_delay_ms":589,"error_status":500,"error":"server_error","session_id":"s"}\n'
        '{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,'
        '"retry_delay_ms":1090,"error_status":null,"error":"unknown","session_id":"s"}\n'
    )
    result = parse_stream("claude-code", retry)
    assert result.extra["warnings"] == [
        "model request failed (status 500); retry 1 of 10",
        "model request failed (unknown); retry 2 of 10",
    ]
    assert result.events == []
