"""Token totals of a real ``vally eval`` run: the agent's from its trajectory, the judge's
as the local Chat Completions server reported them, per grader, per trial and per run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.llm.chat_server import ChatServer, completion

SPEC = """\
name: counted
defaults:
  runs: 2
  executor:
    name: mock
    config: {output: "The capital of France is Paris.", tokens: {input: 120, output: 30}}
stimuli:
  - name: capital
    prompt: What is the capital of France?
    rubric: [Names Paris as the capital]
    graders: [{type: prompt}]
"""


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as chat:
        yield chat


def test_usage_totals_match_what_the_model_server_reported(
    server: ChatServer, tmp_path: Path
) -> None:
    verdict = json.dumps({"score": "pass", "reasoning": "Paris"})
    # Each trial: one unusable answer (a reminder follows), then the verdict. The mock
    # agent's trials are identical, so --no-cache keeps the second trial's judge asking.
    for _ in range(2):
        server.enqueue(
            completion("no json here", prompt_tokens=100, completion_tokens=7),
            completion(verdict, prompt_tokens=130, completion_tokens=11, cached_tokens=40),
        )
    (tmp_path / "eval.yaml").write_text(SPEC)
    (tmp_path / ".vally.yaml").write_text(
        f"llm: {{base_url: '{server.base_url}', max_retries: 0}}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EVAL_JUDGE"))}
    proc = subprocess.run(
        [sys.executable, "-m", "vally", "eval", "-e", "eval.yaml", "--judge-model", "j",
         "--workers", "1", "--no-cache"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(server.requests) == 4
    [run_dir] = list(tmp_path.glob("vally-results/*"))
    records = [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]
    judge = {"calls": 2, "inputTokens": 230, "outputTokens": 18, "cacheReadTokens": 40,
             "totalTokens": 248}
    agent = {"calls": 1, "inputTokens": 120, "outputTokens": 30, "cacheReadTokens": 0,
             "totalTokens": 150}
    uncached = {"hits": 0, "misses": 0}
    for record in records:
        assert record["usage"] == {"agent": agent, "judge": judge, "judgeCache": uncached}
        [grader] = record["gradeResult"]["details"]
        assert grader["metadata"]["judgeUsage"] == {
            "calls": 2, "inputTokens": 230, "outputTokens": 18, "cacheReadTokens": 40
        }
    [summary] = [json.loads(x) for x in (run_dir / "run-summary.jsonl").read_text().splitlines()]
    doubled = {k: 2 * v for k, v in judge.items()}
    assert summary["usage"] == {
        "agent": {k: 2 * v for k, v in agent.items()}, "judge": doubled, "judgeCache": uncached
    }
    report = (run_dir / "report.md").read_text()
    tokens = "agent 240 in / 60 out (2 calls); judge 460 in / 36 out (4 calls)"
    assert f"- **Tokens:** {tokens}" in report
