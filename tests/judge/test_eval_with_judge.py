"""The prompt grader inside a real `vally eval` run, judged by the local Chat Completions
server: verdicts count, judge failures make the grader errored (never a fail)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.llm.chat_server import ChatServer, completion, error

SPEC = """\
name: judged
defaults: {executor: {name: mock, config: {output: "The capital of France is Paris."}}}
stimuli:
  - name: capital
    prompt: What is the capital of France?
    rubric: [Names Paris as the capital]
    graders:
      - {type: output-contains, config: {substring: Paris}}
      - {type: prompt}
"""


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as chat:
        yield chat


def run(server: ChatServer, tmp_path: Path, *args: str) -> tuple[int, str, dict]:  # type: ignore[type-arg]
    (tmp_path / "eval.yaml").write_text(SPEC)
    (tmp_path / ".vally.yaml").write_text(
        f"llm: {{base_url: '{server.base_url}', max_retries: 0}}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EVAL_JUDGE"))}
    proc = subprocess.run(
        [sys.executable, "-m", "vally", "eval", "-e", "eval.yaml", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    [results] = list(tmp_path.glob("vally-results/*/results.jsonl"))
    [record] = [json.loads(line) for line in results.read_text().splitlines()]
    return proc.returncode, proc.stdout + proc.stderr, record


def test_judge_verdict_is_a_grader_result(server: ChatServer, tmp_path: Path) -> None:
    server.default = completion(json.dumps({"score": "fail", "reasoning": "wrong city"}))
    code, output, record = run(server, tmp_path, "--judge-model", "judge-x")
    assert code == 0, output
    details = {d["type"]: d for d in record["gradeResult"]["details"]}
    assert details["prompt"]["passed"] is False and details["prompt"]["status"] == "success"
    assert "wrong city" in details["prompt"]["evidence"]
    assert record["gradeResult"]["passed"] is False and not record["gradeResult"]["errored"]
    assert {r.model for r in server.requests} == {"judge-x"}
    assert "Names Paris as the capital" in server.requests[0].messages[1]["content"]


def test_judge_failure_is_an_errored_grader_not_a_fail(server: ChatServer, tmp_path: Path) -> None:
    server.default = error(503, "judge overloaded")
    code, output, record = run(server, tmp_path, "--judge-model", "judge-x")
    details = {d["type"]: d for d in record["gradeResult"]["details"]}
    assert details["prompt"]["status"] == "error"
    assert "503" in details["prompt"]["evidence"]
    assert details["output-contains"]["passed"] is True
    assert record["gradeResult"]["errored"] is True
    assert code == 1  # an operational error of the run, not a quality verdict
    assert "Traceback" not in output


def test_no_judge_model_is_reported_clearly(server: ChatServer, tmp_path: Path) -> None:
    code, output, record = run(server, tmp_path)
    details = {d["type"]: d for d in record["gradeResult"]["details"]}
    assert details["prompt"]["status"] == "error"
    assert "EVAL_JUDGE_MODEL" in details["prompt"]["evidence"]
    assert code == 1 and "Traceback" not in output
    assert server.requests == []
