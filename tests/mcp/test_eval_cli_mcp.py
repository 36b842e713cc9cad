"""``vally eval`` with the chat-agent and a stdio MCP server, against the scripted model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.llm.chat_server import ChatServer, Received, Reply, completion, tool_call
from tests.mcp.support import NOTES

EVAL_YAML = f"""\
name: mcp-cli
defaults:
  timeout: 60s
  executor: {{name: chat-agent, config: {{max_steps: 5}}}}
environment:
  mcpServers:
    notes: {{type: stdio, command: {json.dumps(sys.executable)}, args: [{json.dumps(str(NOTES))}]}}
stimuli:
  - name: look-up
    prompt: What is the note 'answer'?
    graders:
      - {{type: output-contains, config: {{value: "42"}}}}
      - {{type: tool-calls, config: {{required: ["^notes__lookup$"], disallowed: [run_command]}}}}
"""


def _agent(request: Received) -> Reply:
    if request.messages[-1]["role"] == "tool":
        return completion(f"The note says {request.messages[-1]['content']}.")
    return completion(None, [tool_call("notes__lookup", {"key": "answer"})])


def test_vally_eval_chat_agent_calls_an_mcp_tool(chat_server: ChatServer, tmp_path: Path) -> None:
    chat_server.default = _agent
    (tmp_path / "eval.yaml").write_text(EVAL_YAML)
    (tmp_path / ".vally.yaml").write_text(
        f"llm:\n  base_url: {chat_server.base_url}\n  api_key_env: MCP_CLI_TEST_KEY\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["MCP_CLI_TEST_KEY"] = "sk-mcp-test"
    proc = subprocess.run(
        [sys.executable, "-m", "vally", "eval", "-e", "eval.yaml", "--model", "m1"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [results] = list(tmp_path.glob("**/results.jsonl"))
    [record] = [json.loads(line) for line in results.read_text().splitlines()]
    assert record["gradeResult"]["passed"] is True
    calls = [e["data"] for e in record["trajectory"]["events"] if e["type"] == "tool_call"]
    assert [(c["toolName"], c["server"]) for c in calls] == [("notes__lookup", "notes")]
