"""A chat-agent eval judged by the ``prompt`` grader, both answered by the loopback chat
server with fixed usage, and a helper running ``vally`` in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.llm.chat_server import ChatServer, Received, Reply, completion, tool_call

AGENT_MODEL = "m-agent"
JUDGE_MODEL = "m-judge"

EVAL_YAML = """\
name: costed
defaults:
  timeout: 60s
  executor: {name: chat-agent, config: {max_steps: 5}}
  judge_model: m-judge
  runs: RUNS
stimuli:
  - name: write-hello
    prompt: Create hello.txt saying hello world.
    graders:
      - {type: file-contains, config: {path: hello.txt, value: hello world}}
      - name: judge
        type: prompt
        config: {prompt: The file says hello world., delivery: inline}
"""

PRICES = """\
prices:
  m-agent: {input: 1000, output: 2000}
  m-judge: {input: 100, output: 200}
"""


def reply(request: Received) -> Reply:
    """The judge passes; the agent writes hello.txt then says so (each call 10 in / 5 out)."""
    if request.model == JUDGE_MODEL:
        return completion(json.dumps({"score": "pass", "reasoning": "ok"}), model=JUDGE_MODEL)
    if request.messages[-1]["role"] == "tool":
        return completion("Wrote hello.txt.", model=AGENT_MODEL)
    return completion(
        None,
        [tool_call("write_file", {"path": "hello.txt", "content": "hello world"})],
        model=AGENT_MODEL,
    )


def project(tmp_path: Path, server: ChatServer, *, runs: int = 1, extra: str = PRICES) -> None:
    """Write the eval and ``.vally.yaml`` (the server as LLM, the test prices)."""
    (tmp_path / "eval.yaml").write_text(EVAL_YAML.replace("RUNS", str(runs)))
    (tmp_path / ".vally.yaml").write_text(
        f"llm:\n  base_url: {server.base_url}\n  api_key_env: COST_TEST_KEY\n{extra}"
    )


def vally(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``vally ARGS`` in ``tmp_path`` with a clean LLM environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["COST_TEST_KEY"] = "sk-test"
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg-cache")
    return subprocess.run(
        [sys.executable, "-m", "vally", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every JSON line of ``path``."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
