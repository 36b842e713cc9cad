"""``vally eval`` with the ``claude-code`` executor and the real Claude Code CLI, offline:
the CLI runs in a network namespace with only loopback, against the scripted Anthropic
Messages server. Each case compares vally's record with what the server scripted."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.agents.anthropic_server import Step, api_error, text, thinking, tool_use
from tests.agents.clis import EvalRun, by_turn, reap_leftovers, run_cli_case, steps_by_turn

pytestmark = pytest.mark.slow

MODEL = "claude-test"


@dataclass
class Case:
    """One scripted trial and what vally must record for it."""

    name: str
    prompts: list[str]
    steps: list[Step]
    turn_steps: list[int]
    tools: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    results: list[tuple[str, str, bool]] = field(default_factory=list)
    skills: list[str] = field(default_factory=list)
    end_reason: str = "completed"
    errors: int = 0
    output: str | None = None
    stimulus: str = ""
    timeout: str = "2m"


CASES = [
    Case(
        "parallel-tools",
        ["Make a.txt and look for b.txt."],
        [
            Step(
                [
                    thinking("Two commands at once."),
                    text("Running both."),
                    tool_use("Bash", {"command": "echo hi > a.txt && cat a.txt"}),
                    tool_use("Bash", {"command": "cat b.txt"}),
                ],
                input_tokens=500,
                output_tokens=40,
                cache_read=100,
                cache_write=50,
            ),
            Step([text("a.txt says hi; b.txt is missing.")], input_tokens=700, output_tokens=23),
        ],
        [2],
        tools=[
            ("Bash", {"command": "echo hi > a.txt && cat a.txt"}),
            ("Bash", {"command": "cat b.txt"}),
        ],
        results=[("Bash", "hi", True), ("Bash", "No such file", False)],
        output="a.txt says hi; b.txt is missing.",
    ),
    Case(
        "skill",
        ["Greet me."],
        [
            Step([tool_use("Skill", {"skill": "greet"})], input_tokens=300, output_tokens=12),
            Step([text("Ahoy!")], input_tokens=420, output_tokens=3),
        ],
        [2],
        tools=[("Skill", {"skill": "greet"})],
        results=[("Skill", "", True)],
        skills=["greet"],
        output="Ahoy!",
        stimulus="environment: {skills: [skills/greet]}",
    ),
    Case(
        "resume",
        ["Remember the word kiwi.", "Which word?"],
        [
            Step([text("Noted: kiwi.")], input_tokens=800, output_tokens=9),
            Step([text("kiwi")], input_tokens=900, output_tokens=2, cache_read=800),
        ],
        [1, 1],
        output="kiwi",
    ),
    Case(
        "api-error",
        ["Anything."],
        [api_error(400, "prompt is too long")],
        [1],
        end_reason="error",
        errors=1,
    ),
    Case(
        "max-turns",
        ["Loop."],
        [Step([tool_use("Bash", {"command": "echo a"})], input_tokens=50, output_tokens=5)],
        [1],
        tools=[("Bash", {"command": "echo a"})],
        results=[("Bash", "a", True)],
        end_reason="max_turns",
        stimulus="constraints: {max_turns: 1}",
    ),
]


def _spec(case: Case, program: str, marker: str) -> str:
    if len(case.prompts) == 1:
        prompt = f"    prompt: {case.prompts[0]!r}"
    else:
        prompt = "    turns:\n" + "".join(f"      - prompt: {p!r}\n" for p in case.prompts)
    return f"""name: claude-code-{case.name}
defaults:
  runs: 1
  timeout: {case.timeout}
  model: {MODEL}
  executor:
    name: claude-code
    config:
      program: {program}
      base_url: ${{BASE_URL}}
      permission_mode: acceptEdits
      allowed_tools: [Bash, Skill]
environment:
  env:
    ANTHROPIC_API_KEY: sk-test
    ANTHROPIC_SMALL_FAST_MODEL: claude-helper
    VALLY_TEST_MARKER: {marker}
stimuli:
  - name: {case.name}
{prompt.rstrip()}
    {case.stimulus}
"""


def _run(case: Case, tmp_path: Path) -> tuple[dict[str, Any], EvalRun, str]:
    return run_cli_case(
        "claude", "anthropic", case.steps, partial(_spec, case), tmp_path, model=MODEL
    )


def _tokens(steps: list[Step]) -> tuple[int, int]:
    return (
        sum(s.input_tokens + s.cache_read + s.cache_write for s in steps if s.error is None),
        sum(s.output_tokens for s in steps if s.error is None),
    )


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_claude_code_record_matches_the_script(case: Case, tmp_path: Path) -> None:
    trajectory, run, _ = _run(case, tmp_path)
    events = trajectory["events"]
    assert trajectory["endReason"] == case.end_reason, trajectory["endDetail"]
    assert trajectory["metadata"]["executor"] == "claude-code"
    calls = [d for turn in by_turn(events, "tool_call").values() for d in turn]
    assert [(c["toolName"], c["arguments"]) for c in calls] == case.tools
    results = [d for turn in by_turn(events, "tool_result").values() for d in turn]
    assert len(results) == len(case.results)
    for got, (name, needle, success) in zip(results, case.results, strict=True):
        assert (got["toolName"], got["success"]) == (name, success), got
        assert needle in str(got["result"])
    assert {c["toolCallId"] for c in calls} == {r["toolCallId"] for r in results}
    # Tokens per turn and per trial are the scripted ones, and the CLI's own totals.
    usage = by_turn(events, "token_usage")
    for turn, steps in enumerate(steps_by_turn(case.steps, case.turn_steps)):
        got = usage.get(turn, [])
        assert (sum(u["inputTokens"] for u in got), sum(u["outputTokens"] for u in got)) == (
            _tokens(steps)
        ), f"turn {turn}"
        assert len(got) == sum(1 for s in steps if s.error is None), "one event per model call"
    metrics = trajectory["metrics"]
    total_in, total_out = _tokens(case.steps)
    assert metrics["tokenUsage"]["inputTokens"] == total_in
    assert metrics["tokenUsage"]["outputTokens"] == total_out
    cli_usage = trajectory["metadata"]["extra"].get("modelUsage", {}).get(MODEL, {})
    assert cli_usage.get("outputTokens", 0) == total_out
    assert metrics["turnCount"] == len(case.prompts)
    assert metrics["skillActivationBreakdown"] == dict.fromkeys(case.skills, 1)
    assert metrics["errorCount"] == case.errors
    if case.output is not None:
        assert trajectory["output"] == case.output
    # The CLI's own totals: the usage of each run's result line, summed.
    results_lines = [e for e in run.raw_events if e.get("type") == "result"]
    assert len(results_lines) == len(case.prompts)
    assert sum(r["usage"]["output_tokens"] for r in results_lines) == total_out
    assert (
        sum(
            r["usage"]["input_tokens"]
            + r["usage"]["cache_read_input_tokens"]
            + r["usage"]["cache_creation_input_tokens"]
            for r in results_lines
        )
        == total_in
    )
    served = [r for r in run.requests if (r["body"] or {}).get("model") == MODEL]
    assert len(served) == len(case.steps)
    if case.name == "resume":
        # The second turn resumed the session: the model saw the first answer.
        assert "Noted: kiwi." in str(served[1]["body"]["messages"])
        assert trajectory["metadata"]["extra"]["agentTurns"] == 2
    if case.end_reason == "completed":
        assert trajectory["metadata"]["extra"]["costUsd"] > 0


def test_claude_code_timeout_leaves_no_process(tmp_path: Path) -> None:
    # Claude Code's Bash tool runs the command in a session of its own, out of the CLI's
    # process group: only the CLI can stop it, so it must get the chance to.
    marker = uuid.uuid4().hex
    command = f"sh -c 'while :; do sleep 1; done' tool-{marker}"
    case = Case(
        "timeout",
        ["Wait."],
        [Step([tool_use("Bash", {"command": command})], input_tokens=10, output_tokens=2)],
        [1],
        timeout="8s",
    )
    trajectory, _, _ = _run(case, tmp_path)
    assert trajectory["endReason"] == "timeout"
    calls = [e["data"] for e in trajectory["events"] if e["type"] == "tool_call"]
    assert [c["arguments"]["command"] for c in calls] == [command]
    assert reap_leftovers(marker) == []
