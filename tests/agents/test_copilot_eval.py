"""``vally eval`` with the real GitHub Copilot CLI (through the SDK), offline: the model is a
scripted OpenAI Chat Completions server on 127.0.0.1 inside a network namespace with only
loopback, so the CLI cannot reach anything else."""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.agents.copilot_cli import copilot_cli
from tests.agents.harness import AgentRun, reply, run_agent_eval

pytestmark = pytest.mark.slow

NOTES = Path(__file__).resolve().parents[1] / "mcp" / "servers" / "notes_server.py"

SETTINGS = "llm:\n  base_url: __BASE_URL__\n  api_key_env: COPILOT_TEST_KEY\n"

SKILL = """\
---
name: greeter
description: Greets people warmly in French.
---
Always answer with "Bonjour".
"""

EVAL = f"""\
name: copilot-offline
defaults:
  timeout: 120s
  model: test-model
  executor: copilot
environment:
  skills: [./skills/greeter]
  env: {{VALLY_TEST_MARKER: "__MARKER__"}}
  mcpServers:
    notes: {{type: stdio, command: {json.dumps(sys.executable)}, args: [{json.dumps(str(NOTES))}]}}
stimuli:
  - name: greet-and-write
    turns:
      - prompt: Greet, look up alpha, then write hello.txt.
      - prompt: What did you write?
    graders:
      - {{type: file-contains, config: {{path: hello.txt, value: hello world}}}}
      - {{type: tool-calls, config: {{required: [create, notes-lookup]}}}}
      - {{type: skill-invocation, config: {{required: [greeter]}}}}
      - {{type: file-contains, config: {{path: env.txt, value: "__MARKER__"}}}}
"""

SCRIPT = [
    reply(
        None,
        [("call_skill", "skill", {"skill": "greeter"})],
        prompt_tokens=101,
        completion_tokens=11,
    ),
    reply(
        None,
        [("call_mcp", "notes-lookup", {"key": "alpha"})],
        prompt_tokens=102,
        completion_tokens=12,
    ),
    reply(
        "Writing it.",
        [("call_write", "create", {"path": "hello.txt", "file_text": "hello world\n"})],
        prompt_tokens=103,
        completion_tokens=13,
    ),
    reply(
        None,
        [
            (
                "call_env",
                "bash",
                {
                    "command": 'printf %s "$VALLY_TEST_MARKER" > env.txt',
                    "description": "save the marker",
                },
            )
        ],
        prompt_tokens=104,
        completion_tokens=14,
    ),
    reply("Bonjour! I wrote hello.txt.", prompt_tokens=105, completion_tokens=15),
    reply("Bonjour! I wrote hello world.", prompt_tokens=106, completion_tokens=16),
]


def _events(record: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [e for e in record["trajectory"]["events"] if e["type"] == kind]


def _run(tmp_path: Path, eval_text: str, script: list[dict[str, Any]], marker: str) -> AgentRun:
    cli = copilot_cli()
    files = {
        "eval.yaml": eval_text.replace("__MARKER__", marker),
        ".vally.yaml": SETTINGS,
        "skills/greeter/SKILL.md": SKILL,
    }
    return run_agent_eval(
        tmp_path,
        files,
        script,
        ["eval", "-e", "eval.yaml"],
        env={"COPILOT_CLI_PATH": cli, "COPILOT_TEST_KEY": "sk-copilot-test"},
    )


def _leftovers(marker: str) -> list[int]:
    """Processes whose environment holds ``marker`` (the CLI and what it started)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and entry.name != str(os.getpid()):
            try:
                if marker.encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_copilot_runs_tools_skills_mcp_and_two_turns_as_scripted(tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    run = _run(tmp_path, EVAL, SCRIPT, marker)
    assert run.returncode == 0, run.output
    [record] = run.records
    assert record["status"] == "success", record
    assert record["gradeResult"]["passed"] is True, record["gradeResult"]
    trajectory = record["trajectory"]
    assert trajectory["endReason"] == "completed"
    assert trajectory["metadata"]["executor"] == "copilot"
    calls = [e["data"] for e in _events(record, "tool_call")]
    assert [(c["toolName"], c["toolCallId"], c["arguments"], c["server"]) for c in calls] == [
        ("skill", "call_skill", {"skill": "greeter"}, None),
        ("notes-lookup", "call_mcp", {"key": "alpha"}, "notes"),
        ("create", "call_write", {"path": "hello.txt", "file_text": "hello world\n"}, None),
        (
            "bash",
            "call_env",
            {
                "command": 'printf %s "$VALLY_TEST_MARKER" > env.txt',
                "description": "save the marker",
            },
            None,
        ),
    ]
    results = {e["data"]["toolCallId"]: e["data"] for e in _events(record, "tool_result")}
    assert results["call_mcp"]["success"] is True
    assert "first letter" in results["call_mcp"]["result"]
    assert results["call_write"]["success"] is True
    usage = [
        (e["data"]["inputTokens"], e["data"]["outputTokens"])
        for e in _events(record, "token_usage")
    ]
    assert usage == [(101 + i, 11 + i) for i in range(6)]
    metrics = trajectory["metrics"]
    assert metrics["turnCount"] == 6
    assert metrics["tokenUsage"]["inputTokens"] == sum(101 + i for i in range(6))
    assert metrics["skillActivationBreakdown"] == {"greeter": 1}
    prompts = [(e["turn"], e["data"]["content"]) for e in _events(record, "user_message")]
    assert prompts == [
        (0, "Greet, look up alpha, then write hello.txt."),
        (1, "What did you write?"),
    ]
    assert trajectory["output"] == "Bonjour! I wrote hello world."
    # One conversation: the second turn's request carries the first turn's exchange.
    assert len(run.received) == 6
    last = json.dumps(run.received[5]["body"]["messages"])
    assert "Bonjour! I wrote hello.txt." in last and "then write hello.txt" in last
    assert all(r["body"]["stream"] is True for r in run.received)
    raw = run.trial_file("copilot-events.jsonl").read_text().splitlines()
    assert any(json.loads(line)["type"] == "session.shutdown" for line in raw)
    assert _leftovers(marker) == []


ERROR_EVAL = EVAL.replace(
    "turns:\n      - prompt: Greet, look up alpha, then write hello.txt.\n"
    "      - prompt: What did you write?\n",
    "prompt: Say hi.\n",
)


def test_a_model_server_error_ends_the_trial_as_errored_with_its_message(
    tmp_path: Path,
) -> None:
    marker = uuid.uuid4().hex
    script = [{"status": 400, "message": "quota exhausted for key 7Q"}]
    run = _run(tmp_path, ERROR_EVAL, script, marker)
    assert run.returncode != 0
    [record] = run.records
    assert record["status"] == "error", record
    assert "quota exhausted for key 7Q" in record["error"]["message"]
    assert len(run.received) == 1
    assert _leftovers(marker) == []


TIMEOUT_EVAL = ERROR_EVAL.replace("timeout: 120s", "timeout: 25s")


def test_a_timeout_stops_the_session_and_leaves_no_process_behind(tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    run = _run(tmp_path, TIMEOUT_EVAL, [{"hang": 120}], marker)
    assert run.returncode != 0
    [record] = run.records
    assert record["status"] == "error", record
    assert record["trajectory"]["endReason"] == "timeout"
    assert "timeout" in record["error"]["message"].lower()
    assert len(run.received) == 1  # the CLI was waiting for the model when time ran out
    assert _leftovers(marker) == []


LIMIT_EVAL = ERROR_EVAL.replace("stimuli:", "constraints: {max_tool_calls: 1}\nstimuli:")


def test_a_crossed_limit_aborts_the_session_before_the_next_tool_runs(tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    script = [
        reply(None, [("c1", "bash", {"command": "echo one > one.txt", "description": "one"})]),
        reply(None, [("c2", "bash", {"command": "echo two > two.txt", "description": "two"})]),
        reply("Done."),
    ]
    run = _run(tmp_path, LIMIT_EVAL, script, marker)
    [record] = run.records
    trajectory = record["trajectory"]
    assert trajectory["endReason"] == "max_tool_calls"
    assert "max_tool_calls of 1" in trajectory["endDetail"]
    results = [e["data"] for e in _events(record, "tool_result")]
    assert [(r["toolCallId"], r["success"]) for r in results] == [("c1", True), ("c2", False)]
    assert "interrupted" in results[1]["result"]
    workspace = run.trial_file("copilot-events.jsonl")  # the raw log holds the abort
    assert '"type": "abort"' in workspace.read_text()
    assert len(run.received) == 2
    assert _leftovers(marker) == []


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "copilot"

EXAMPLE_SCRIPT = [
    # write-a-file
    reply(None, [("w1", "create", {"path": "hello.txt", "file_text": "hello world"})]),
    reply("Created hello.txt."),
    # use-a-skill
    reply(None, [("s1", "skill", {"skill": "changelog"})]),
    reply(
        None,
        [
            (
                "s2",
                "create",
                {
                    "path": "CHANGELOG.md",
                    "file_text": "# Changelog\n\n## 1.2.0\n\n- Added --json.\n",
                },
            )
        ],
    ),
    reply("Added the 1.2.0 entry."),
    # two-turns
    reply(None, [("t1", "create", {"path": "notes.txt", "file_text": "first\n"})]),
    reply("Created notes.txt."),
    reply(
        None,
        [("t2", "edit", {"path": "notes.txt", "old_str": "first\n", "new_str": "first\nsecond\n"})],
    ),
    reply("Appended the second line."),
]


def test_the_example_runs_as_documented(tmp_path: Path) -> None:
    cli = copilot_cli()
    files = {
        str(p.relative_to(EXAMPLE)): p.read_text()
        for p in EXAMPLE.rglob("*")
        if p.is_file() and p.name != ".vally.yaml.example"
    }
    files[".vally.yaml"] = (
        (EXAMPLE / ".vally.yaml.example")
        .read_text()
        .replace("http://localhost:8000/v1", "__BASE_URL__")
    )
    run = run_agent_eval(
        tmp_path,
        files,
        EXAMPLE_SCRIPT,
        ["eval", "-e", "eval.yaml", "--model", "gpt-4.1", "--workers", "1", "--require-pass"],
        env={"COPILOT_CLI_PATH": cli},
    )
    assert run.returncode == 0, run.output
    records = run.records
    assert sorted(r["stimulusName"] for r in records) == [
        "two-turns",
        "use-a-skill",
        "write-a-file",
    ]
    assert all(r["gradeResult"]["passed"] for r in records)
    assert {r["body"]["model"] for r in run.received} == {"gpt-4.1"}


KILL_CLI = (
    'for p in /proc/[0-9]*; do grep -qs "$VALLY_TEST_MARKER" $p/environ'
    " && grep -qs -- --headless $p/cmdline && kill -KILL ${p#/proc/}; done"
)
"""Kills the CLI of this trial (found by the marker in its environment) from its own shell
(a script: the CLI refuses a ``kill`` without a literal pid on its command line)."""


def test_a_cli_that_dies_mid_session_ends_the_trial_as_errored(tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    script = [
        reply(None, [("k0", "create", {"path": "k.sh", "file_text": KILL_CLI})]),
        reply(None, [("k1", "bash", {"command": "sh k.sh", "description": "kill the CLI"})]),
        reply("never sent"),
    ]
    run = _run(tmp_path, ERROR_EVAL, script, marker)
    [record] = run.records
    assert record["status"] == "error", record
    assert "Copilot CLI" in record["error"]["message"], record["error"]
    assert _leftovers(marker) == []


def test_a_shell_command_that_exits_non_zero_is_a_failed_tool_result(tmp_path: Path) -> None:
    # Claude Code and Codex record a failure for a command that exits non-zero; Copilot
    # reports the tool call as a success with the exit code in its text, so vally reads it.
    marker = uuid.uuid4().hex
    script = [
        reply(None, [("s1", "bash", {"command": "echo partial; exit 3", "description": "x"})]),
        reply(None, [("s2", "bash", {"command": "echo fine", "description": "y"})]),
        reply("Done."),
    ]
    run = _run(tmp_path, ERROR_EVAL, script, marker)
    [record] = run.records
    results = {e["data"]["toolCallId"]: e["data"] for e in _events(record, "tool_result")}
    assert results["s1"]["success"] is False, results["s1"]
    assert "partial" in results["s1"]["result"]
    assert results["s2"]["success"] is True, results["s2"]
