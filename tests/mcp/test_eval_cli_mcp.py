"""``vally eval`` with the chat-agent and a stdio MCP server, against the scripted model."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.llm.chat_server import ChatServer, Received, Reply, completion, tool_call
from tests.llm.project_run import eval_with_project_llm
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
    record = eval_with_project_llm(tmp_path, EVAL_YAML, chat_server.base_url)
    assert record["gradeResult"]["passed"] is True
    calls = [e["data"] for e in record["trajectory"]["events"] if e["type"] == "tool_call"]
    assert [(c["toolName"], c["server"]) for c in calls] == [("notes__lookup", "notes")]
