"""``vally eval`` with the ``codex`` executor and the real Codex CLI, offline: the CLI runs
in a network namespace with only loopback, against the scripted Responses server (a custom
model provider with ``wire_api = "responses"``). Each case compares vally's record with
what the server scripted."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.agents.clis import EvalRun, by_turn, reap_leftovers, run_cli_case, steps_by_turn
from tests.agents.responses_server import (
    Step,
    failed,
    function_call,
    http_error,
    message,
    reasoning,
)

pytestmark = pytest.mark.slow

MODEL = "gpt-test"


@dataclass
class Case:
    """One scripted trial and what vally must record for it."""

    name: str
    prompts: list[str]
    steps: list[Step]
    turn_steps: list[int]
    commands: list[str] = field(default_factory=list)
    results: list[tuple[str, bool]] = field(default_factory=list)
    skills: list[str] = field(default_factory=list)
    end_reason: str = "completed"
    errors: int = 0
    output: str | None = None
    timeout: str = "2m"


CASES = [
    Case(
        "tools-and-skill",
        ["Greet me."],
        [
            Step(
                [
                    reasoning("Read the skill, and look for notes."),
                    function_call("exec_command", {"cmd": "cat .agents/skills/greet/SKILL.md"}),
                    function_call("exec_command", {"cmd": "cat notes.txt"}),
                ],
                input_tokens=1000,
                output_tokens=30,
                cached_tokens=200,
            ),
            Step([message("Ahoy!")], input_tokens=1200, output_tokens=10),
        ],
        [2],
        commands=["cat .agents/skills/greet/SKILL.md", "cat notes.txt"],
        results=[('Greet with "Ahoy!"', True), ("No such file", False)],
        skills=["greet"],
        output="Ahoy!",
    ),
    Case(
        "resume",
        ["Remember the word kiwi.", "Which word?"],
        [
            Step([message("Noted: kiwi.")], input_tokens=800, output_tokens=9),
            Step([message("kiwi")], input_tokens=900, output_tokens=2, cached_tokens=800),
        ],
        [1, 1],
        output="kiwi",
    ),
    Case(
        "api-error",
        ["Anything."],
        [http_error(400, "bad request from the test server")],
        [1],
        end_reason="error",
        errors=1,
    ),
    Case(
        "stream-failure",
        ["Anything."],
        [failed("model overloaded")],
        [1],
        end_reason="error",
        errors=1,
    ),
]


def _spec(case: Case, program: str, marker: str) -> str:
    if len(case.prompts) == 1:
        prompt = f"    prompt: {case.prompts[0]!r}\n"
    else:
        prompt = "    turns:\n" + "".join(f"      - prompt: {p!r}\n" for p in case.prompts)
    return f"""name: codex-{case.name}
defaults:
  runs: 1
  timeout: {case.timeout}
  model: {MODEL}
  executor:
    name: codex
    config:
      program: {program}
      provider: {{base_url: "${{BASE_URL}}", env_key: LOOPBACK_KEY}}
      config:
        model_providers.vally.request_max_retries: 0
        model_providers.vally.stream_max_retries: 0
environment:
  env: {{LOOPBACK_KEY: sk-test, VALLY_TEST_MARKER: {marker}}}
  skills: [skills/greet]
stimuli:
  - name: {case.name}
{prompt}"""


def _run(case: Case, tmp_path: Path) -> tuple[dict[str, Any], EvalRun, str]:
    return run_cli_case(
        "codex", "responses", case.steps, partial(_spec, case), tmp_path, model=MODEL
    )


def _tokens(steps: list[Step]) -> tuple[int, int, int]:
    ok = [s for s in steps if s.error is None and s.failed is None]
    return (
        sum(s.input_tokens for s in ok),
        sum(s.output_tokens for s in ok),
        sum(s.cached_tokens for s in ok),
    )


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_codex_record_matches_the_script(case: Case, tmp_path: Path) -> None:
    trajectory, run, _ = _run(case, tmp_path)
    events = trajectory["events"]
    assert trajectory["endReason"] == case.end_reason, trajectory["endDetail"]
    assert trajectory["metadata"]["executor"] == "codex"
    # Codex may run a batch of calls in any order: pair them by command.
    calls = [d for turn in by_turn(events, "tool_call").values() for d in turn]
    assert [c["toolName"] for c in calls] == ["command_execution"] * len(case.commands)
    results = {r["toolCallId"]: r for turn in by_turn(events, "tool_result").values() for r in turn}
    assert len(results) == len(case.results)
    for command, (needle, success) in zip(case.commands, case.results, strict=True):
        call = next(c for c in calls if command in c["arguments"]["command"])
        got = results[call["toolCallId"]]
        assert got["success"] is success and needle in str(got["result"]), got
    # Tokens per turn and per trial are the scripted ones (Codex reports one total per run).
    usage = by_turn(events, "token_usage")
    for turn, steps in enumerate(steps_by_turn(case.steps, case.turn_steps)):
        got = usage.get(turn, [])
        seen = (
            sum(u["inputTokens"] for u in got),
            sum(u["outputTokens"] for u in got),
            sum(u["cacheReadTokens"] for u in got),
        )
        assert seen == _tokens(steps), f"turn {turn}"
    metrics = trajectory["metrics"]
    total_in, total_out, _ = _tokens(case.steps)
    assert (metrics["tokenUsage"]["inputTokens"], metrics["tokenUsage"]["outputTokens"]) == (
        total_in,
        total_out,
    )
    assert metrics["turnCount"] == len(case.prompts)
    assert metrics["skillActivationBreakdown"] == dict.fromkeys(case.skills, 1)
    # The model-metadata notice of a custom provider is a warning, not an error.
    assert metrics["errorCount"] == case.errors
    assert any("Model metadata" in w for w in trajectory["metadata"]["extra"]["warnings"])
    if case.output is not None:
        assert trajectory["output"] == case.output
    served = [r for r in run.requests if (r["body"] or {}).get("model") == MODEL]
    assert len(served) == len(case.steps)
    # Codex's own total: the last turn.completed of the session (a running total).
    completed = [e["usage"] for e in run.raw_events if e.get("type") == "turn.completed"]
    if completed:
        assert completed[-1]["input_tokens"] == total_in
        assert completed[-1]["output_tokens"] == total_out
    if case.name == "resume":
        assert "Noted: kiwi." in str(served[1]["body"]["input"])
        assert len(completed) == 2


def test_codex_timeout_leaves_no_process(tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    command = f"sh -c 'while :; do sleep 1; done' tool-{marker}"
    case = Case(
        "timeout",
        ["Wait."],
        [Step([function_call("exec_command", {"cmd": command, "yield_time_ms": 60000})])],
        [1],
        timeout="8s",
    )
    trajectory, _, _ = _run(case, tmp_path)
    assert trajectory["endReason"] == "timeout"
    calls = [e["data"] for e in trajectory["events"] if e["type"] == "tool_call"]
    assert len(calls) == 1 and command in calls[0]["arguments"]["command"]
    assert reap_leftovers(marker) == []
