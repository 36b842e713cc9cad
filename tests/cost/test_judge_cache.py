"""The judge cache: a second ``vally compare`` over the same runs sends nothing to the
judge server and prints the same figures; ``--no-cache`` sends everything again; the key
ignores temp folders and timestamps, and follows the evidence."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.compare.records import record
from tests.llm.chat_server import ChatServer, Received, Reply, completion
from vally.contracts.llm import ChatMessage, ChatRequest, ChatResponse, ToolCall
from vally.engine.trials.judge_cache import CachedJudge, JudgeCache, request_key
from vally.models import TrialResultRecord


def _write(path: Path, records: list[TrialResultRecord]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(r.to_json_line() + "\n" for r in records))
    return path


def _judge(request: Received) -> Reply:
    # The treatment (run-2) wins by much in both orders; 40 in / 8 out per call.
    first = request.messages[1]["content"] if len(request.messages) > 1 else ""
    winner = "A" if "Response A: run-2" in first else "B"
    body = json.dumps({"winner": winner, "magnitude": "much", "reasoning": "r"})
    return completion(body, model="judge-m", prompt_tokens=40, completion_tokens=8)


def _runs(tmp_path: Path) -> tuple[Path, Path]:
    """The two runs, written once (records carry the time they were made)."""
    names = ("s1", "s2", "s3")
    if (tmp_path / "treat/results.jsonl").exists():
        return tmp_path / "base/results.jsonl", tmp_path / "treat/results.jsonl"
    base = _write(tmp_path / "base/results.jsonl", [record(n, passed=False) for n in names])
    treat = _write(tmp_path / "treat/results.jsonl", [record(n, passed=True) for n in names])
    return base, treat


def _compare(tmp_path: Path, server: ChatServer, *extra: str) -> subprocess.CompletedProcess[str]:
    base, treat = _runs(tmp_path)
    (tmp_path / ".vally.yaml").write_text(
        "llm:\n  max_retries: 0\nprices:\n  judge-m: {input: 1000, output: 5000}\n"
    )
    env = {**os.environ, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-test"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache-home")
    args = ["compare", "--baseline", str(base), "--treatment", str(treat)]
    return subprocess.run(
        [sys.executable, "-m", "vally", *args, "--judge-model", "judge-m", *extra],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _figures(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if not line.startswith("Judge cache:")]


def test_a_second_compare_makes_no_judge_request_and_prints_the_same_figures(
    tmp_path: Path,
) -> None:
    with ChatServer() as server:
        server.default = _judge
        first = _compare(tmp_path, server, "--judge-evidence", "inline", "--output", "one.jsonl")
        assert first.returncode == 0, first.stdout + first.stderr
        sent = len(server.requests)
        assert sent == 1 + 3 * 2  # the connection check, then two passes per pair
        second = _compare(tmp_path, server, "--judge-evidence", "inline", "--output", "two.jsonl")
        assert second.returncode == 0, second.stdout + second.stderr
        assert len(server.requests) == sent  # zero requests the second time
    assert _figures(second.stdout) == _figures(first.stdout)
    assert "Judge cache: 0 hits, 6 misses" in first.stdout
    assert "Judge cache: 6 hits, 0 misses" in second.stdout
    # 6 pair passes of 40 in / 8 out at $1000 / $5000 per Mtok
    assert f"Judge tokens: 240 in / 48 out (6 calls) · cost ${(240e3 + 240e3) / 1e6:,.4f}" in (
        first.stdout
    )
    one = json.loads((tmp_path / "one.jsonl").read_text())
    two = json.loads((tmp_path / "two.jsonl").read_text())
    assert one["trials"] == two["trials"]  # verdicts and reasoning byte for byte
    assert (one["judgeUsage"]["cacheMisses"], two["judgeUsage"]["cacheHits"]) == (6, 6)


def test_tool_delivery_is_cached_too_and_no_cache_sends_everything(tmp_path: Path) -> None:
    with ChatServer() as server:
        server.default = _judge
        first = _compare(tmp_path, server)
        assert first.returncode == 0, first.stdout + first.stderr
        sent = len(server.requests)
        second = _compare(tmp_path, server)
        assert second.returncode == 0, second.stdout + second.stderr
        assert len(server.requests) == sent
        third = _compare(tmp_path, server, "--no-cache")
        assert third.returncode == 0, third.stdout + third.stderr
        assert len(server.requests) == 2 * sent
    assert "Judge cache: off (--no-cache)" in third.stdout
    assert _figures(third.stdout)[:-1] == _figures(first.stdout)[:-1]


def _request(evidence: str) -> ChatRequest:
    return ChatRequest(
        model="m",
        messages=(
            ChatMessage(role="user", content="Judge run-1/output.md"),
            ChatMessage(role="assistant", tool_calls=(ToolCall("c1", "read_evidence", "{}"),)),
            ChatMessage(role="tool", content=evidence, tool_call_id="c1"),
        ),
        timeout=30.0,
    )


def test_the_key_follows_the_content_not_the_timeout() -> None:
    key = request_key("openai", _request("hello"))
    assert key == request_key("openai", _request("hello"))
    later = _request("hello")
    assert key == request_key("openai", ChatRequest(later.model, later.messages, timeout=99.0))
    assert key != request_key("openai", _request("hello!"))
    assert key != request_key("other", _request("hello"))


class _Once:
    """A provider that answers once and fails afterwards."""

    def __init__(self) -> None:
        self.calls = 0

    async def chat(self, request: ChatRequest) -> ChatResponse:
        self.calls += 1
        if self.calls > 1:
            raise AssertionError("asked twice")
        message = ChatMessage(role="assistant", content='{"score": "pass"}')
        return ChatResponse(message, "stop", input_tokens=7, output_tokens=3, model="m")

    async def aclose(self) -> None:
        return None


def test_two_caches_sharing_a_folder_answer_identically(tmp_path: Path) -> None:
    inner = _Once()
    writer = CachedJudge(inner, JudgeCache(tmp_path), "openai")  # type: ignore[arg-type]
    reader = CachedJudge(inner, JudgeCache(tmp_path), "openai")  # type: ignore[arg-type]
    original = asyncio.run(writer.chat(_request("e")))
    again = asyncio.run(reader.chat(_request("e")))
    assert again == original
    assert (reader.cache.hits, reader.cache.misses) == (1, 0)  # type: ignore[union-attr]
    assert not list(tmp_path.rglob("*.tmp"))


def test_regrading_saved_trials_twice_asks_the_judge_once(tmp_path: Path) -> None:
    from tests.cost.support import JUDGE_MODEL, project, read_jsonl, reply, vally

    with ChatServer() as server:
        server.default = reply
        project(tmp_path, server, runs=2)
        run = vally(tmp_path, "eval", "-e", "eval.yaml", "--model", "m-agent")
        assert run.returncode == 0, run.stdout + run.stderr
        assert "judge cache: 0 hits, 2 misses" in run.stderr
        [results] = list(tmp_path.glob("vally-results/*/results.jsonl"))
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
        env["XDG_CACHE_HOME"] = str(tmp_path / "grade-cache")  # not the eval's cache
        outputs = []
        for _ in range(2):
            before = len(server.requests_for(JUDGE_MODEL))
            with results.open() as stdin:
                graded = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "vally",
                        "grade",
                        "-e",
                        "eval.yaml",
                        "--output",
                        "jsonl",
                    ],
                    cwd=tmp_path,
                    env={**env, "COST_TEST_KEY": "sk-test"},
                    stdin=stdin,
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
            # file-contains errors without --workspace; the judge's verdict is what counts
            assert "Graded 2 trials" in graded.stderr, graded.stdout + graded.stderr
            outputs.append((len(server.requests_for(JUDGE_MODEL)) - before, graded))
    (first_calls, first), (second_calls, second) = outputs
    assert (first_calls, second_calls) == (2, 0)
    assert "judge cache: 0 hits, 2 misses" in first.stderr
    assert "judge cache: 2 hits, 0 misses" in second.stderr

    def verdicts(text: str) -> list[list[dict[str, object]]]:
        return [
            [d for d in json.loads(line)["gradeResult"]["details"] if d["type"] == "prompt"]
            for line in text.splitlines()
        ]

    assert verdicts(first.stdout) == verdicts(second.stdout)
    details = [d for v in verdicts(second.stdout) for d in v]
    assert details and all(d["status"] == "success" for d in details)
    assert read_jsonl(results)  # the run's own records are untouched


class _Counting(_Once):
    """A provider that answers every time, counting the calls."""

    async def chat(self, request: ChatRequest) -> ChatResponse:
        self.calls += 1
        message = ChatMessage(role="assistant", content=f'{{"n": {self.calls}}}')
        return ChatResponse(message, "stop", model="m")


def test_rejudging_bypasses_the_cache(tmp_path: Path) -> None:
    from vally.engine.trials.judge_cache import bypass_cache

    inner = _Counting()
    judge = CachedJudge(inner, JudgeCache(tmp_path), "openai")  # type: ignore[arg-type]

    async def twice() -> tuple[ChatResponse, ChatResponse]:
        first = await judge.chat(_request("e"))
        with bypass_cache():
            again = (await asyncio.gather(judge.chat(_request("e"))))[0]
        return first, again

    first, again = asyncio.run(twice())
    assert inner.calls == 2
    assert first != again
    assert asyncio.run(judge.chat(_request("e"))) == first  # the bypass stored nothing


MOCK_SPEC = """\
name: same-evidence
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


def test_identical_trials_of_one_eval_ask_the_judge_once(tmp_path: Path) -> None:
    with ChatServer() as server:
        server.default = lambda request: completion(
            json.dumps({"score": "pass", "reasoning": "Paris"}), prompt_tokens=50
        )
        (tmp_path / "eval.yaml").write_text(MOCK_SPEC)
        (tmp_path / ".vally.yaml").write_text(f"llm: {{base_url: '{server.base_url}'}}\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
        args = ["eval", "-e", "eval.yaml", "--judge-model", "j", "--workers", "1"]
        proc = subprocess.run(
            [sys.executable, "-m", "vally", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert len(server.requests) == 1
    [results] = list(tmp_path.glob("vally-results/*/results.jsonl"))
    records = [json.loads(line) for line in results.read_text().splitlines()]
    counts = sorted(
        (r["usage"]["judgeCache"]["hits"], r["usage"]["judgeCache"]["misses"]) for r in records
    )
    assert counts == [(0, 1), (1, 0)]
    first, second = (r["gradeResult"]["details"] for r in records)
    assert first == second  # the cached verdict is the original, byte for byte
    assert "judge cache: 1 hit, 1 miss (" in proc.stderr
