"""The chat-agent through the real ``vally eval`` command, against the scripted server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.llm.chat_server import ChatServer, Received, Reply, completion, tool_call
from tests.llm.project_run import eval_with_project_llm

EVAL_YAML = """\
name: chat-cli
defaults:
  timeout: 60s
  executor: {name: chat-agent, config: {max_steps: 5}}
stimuli:
  - name: write-hello
    prompt: Create hello.txt saying hello world.
    graders:
      - {type: file-contains, config: {path: hello.txt, value: hello world}}
      - {type: tool-calls, config: {required: [write_file]}}
"""


def _agent(request: Received) -> Reply:
    if request.messages[-1]["role"] == "tool":
        return completion("Wrote hello.txt.")
    return completion(
        None, [tool_call("write_file", {"path": "hello.txt", "content": "hello world"})]
    )


def test_vally_eval_runs_the_chat_agent_with_the_project_llm(
    chat_server: ChatServer, tmp_path: Path
) -> None:
    chat_server.default = _agent
    record = eval_with_project_llm(tmp_path, EVAL_YAML, chat_server.base_url)
    assert record["gradeResult"]["passed"] is True
    trajectory = record["trajectory"]
    assert trajectory["metadata"]["executor"] == "chat-agent"
    assert trajectory["endReason"] == "completed"
    assert len(trajectory["metadata"]["extra"]["harness_sha256"]) == 64
    assert [r.model for r in chat_server.requests] == ["m1", "m1"]
    assert chat_server.requests[0].headers["authorization"] == "Bearer sk-test"


EXPERIMENT_YAML = """\
name: models
evals: [eval.yaml]
vary: [/defaults/model]
baseline: small
variants:
  small: {overrides: {model: m-small}}
  large: {overrides: {model: m-large}}
"""


def test_experiment_variants_run_the_chat_agent_with_their_models(
    chat_server: ChatServer, tmp_path: Path
) -> None:
    chat_server.default = _agent
    (tmp_path / "eval.yaml").write_text(EVAL_YAML)
    (tmp_path / "experiment.yaml").write_text(EXPERIMENT_YAML)
    (tmp_path / ".vally.yaml").write_text(
        f"llm:\n  base_url: {chat_server.base_url}\n  api_key_env: CHAT_CLI_TEST_KEY\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["CHAT_CLI_TEST_KEY"] = "sk-cli-test"
    proc = subprocess.run(
        [sys.executable, "-m", "vally", "experiment", "run", "experiment.yaml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for variant, model in (("small", "m-small"), ("large", "m-large")):
        [results] = list(tmp_path.glob(f"**/{variant}/results.jsonl"))
        [record] = [json.loads(line) for line in results.read_text().splitlines()]
        assert record["gradeResult"]["passed"] is True, record["error"]
        assert record["trajectory"]["metadata"]["model"] == model
    assert sorted({r.model for r in chat_server.requests}) == ["m-large", "m-small"]
