"""The judge cache cannot be poisoned or cross-wired: a malformed entry is a miss that the
provider's answer replaces, negative or non-finite token counts are never believed, and the
key covers where the judge is and the evidence it may read."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from vally import judging_evidence
from vally.contracts.llm import ChatMessage, ChatRequest, ChatResponse
from vally.engine.trials.judge_cache import CachedJudge, JudgeCache, read_entry, request_key


class _Provider:
    """Answers every request, counting them; ``base_url`` names where it is."""

    def __init__(self, base_url: str | None = "http://127.0.0.1:9/v1") -> None:
        self.calls = 0
        self.base_url = base_url

    async def chat(self, request: ChatRequest) -> ChatResponse:
        self.calls += 1
        message = ChatMessage(role="assistant", content='{"score": "pass"}')
        return ChatResponse(message, "stop", input_tokens=7, output_tokens=3, model="m")

    async def aclose(self) -> None:
        return None


def _request() -> ChatRequest:
    return ChatRequest(model="m", messages=(ChatMessage(role="user", content="Judge out.md"),))


def _judge(root: Path, provider: _Provider) -> CachedJudge:
    return CachedJudge(provider, JudgeCache(root), "openai")  # type: ignore[arg-type]


def _entry_path(root: Path) -> Path:
    (path,) = list((root / "judge").rglob("*.json"))
    return path


GOOD = {
    "message": {
        "role": "assistant",
        "content": "ok",
        "tool_calls": [],
        "tool_call_id": None,
        "name": None,
    },
    "finish_reason": "stop",
    "input_tokens": 1,
    "output_tokens": 1,
    "cache_read_tokens": 0,
    "model": "m",
}


def _with(**changes: object) -> dict[str, object]:
    return {**GOOD, **changes}


MALFORMED = {
    "a list": "[]",
    "a number": "42",
    "a string": '"x"',
    "no response": json.dumps({"key": "KEY"}),
    "a list response": json.dumps({"key": "KEY", "response": []}),
    "deep nesting": '{"key": "KEY", "response": ' + "[" * 5000 + "]" * 5000 + "}",
    "infinite tokens": json.dumps({"key": "KEY", "response": _with(input_tokens=1e999)}),
    "nan tokens": json.dumps({"key": "KEY", "response": _with(output_tokens=float("nan"))}),
    "negative tokens": json.dumps({"key": "KEY", "response": _with(output_tokens=-25000)}),
    "fractional tokens": json.dumps({"key": "KEY", "response": _with(input_tokens=1.5)}),
    "boolean tokens": json.dumps({"key": "KEY", "response": _with(input_tokens=True)}),
    "non-string content": json.dumps(
        {"key": "KEY", "response": _with(message={**GOOD["message"], "content": 7})}  # type: ignore[dict-item]
    ),
    "unknown role": json.dumps(
        {"key": "KEY", "response": _with(message={**GOOD["message"], "role": "judge"})}  # type: ignore[dict-item]
    ),
    "bad tool call": json.dumps(
        {"key": "KEY", "response": _with(message={**GOOD["message"], "tool_calls": [{"id": 1}]})}  # type: ignore[dict-item]
    ),
    "another key": json.dumps({"key": "OTHER", "response": GOOD}),
    "not json": "{",
}


def test_a_valid_entry_reads_back() -> None:
    response = read_entry(json.dumps({"key": "KEY", "response": GOOD}), "KEY")
    assert response is not None and response.message.content == "ok"


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_a_malformed_entry_is_no_answer(name: str) -> None:
    assert read_entry(MALFORMED[name], "KEY") is None


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_a_malformed_entry_is_a_miss_and_is_rewritten(tmp_path: Path, name: str) -> None:
    provider = _Provider()
    first = asyncio.run(_judge(tmp_path, provider).chat(_request()))
    path = _entry_path(tmp_path)
    key = path.stem
    path.write_text(MALFORMED[name].replace("KEY", key), encoding="utf-8")
    judge = _judge(tmp_path, provider)
    again = asyncio.run(judge.chat(_request()))
    assert again == first and provider.calls == 2
    assert (judge.cache.hits, judge.cache.misses) == (0, 1)  # type: ignore[union-attr]
    assert read_entry(path.read_text(encoding="utf-8"), key) == first  # rewritten
    third = _judge(tmp_path, provider)
    asyncio.run(third.chat(_request()))
    assert provider.calls == 2 and third.cache.hits == 1  # type: ignore[union-attr]


def test_an_oversized_entry_is_a_miss(tmp_path: Path) -> None:
    provider = _Provider()
    asyncio.run(_judge(tmp_path, provider).chat(_request()))
    path = _entry_path(tmp_path)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(" " * (16 * 1024 * 1024 + 1))
    asyncio.run(_judge(tmp_path, provider).chat(_request()))
    assert provider.calls == 2


def test_another_judge_server_with_the_same_model_is_asked(tmp_path: Path) -> None:
    here, there = _Provider("http://127.0.0.1:9001/v1"), _Provider("http://127.0.0.1:9002/v1")
    asyncio.run(_judge(tmp_path, here).chat(_request()))
    judge = _judge(tmp_path, there)
    asyncio.run(judge.chat(_request()))
    assert (here.calls, there.calls) == (1, 1)
    assert judge.cache.misses == 1  # type: ignore[union-attr]
    asyncio.run(_judge(tmp_path, _Provider("http://127.0.0.1:9002/v1")).chat(_request()))
    assert there.calls == 1  # the same server again: a hit


def test_the_key_covers_the_evidence_the_judge_may_read(tmp_path: Path) -> None:
    provider = _Provider()
    with judging_evidence("sha256:run-1"):
        asyncio.run(_judge(tmp_path, provider).chat(_request()))
    with judging_evidence("sha256:run-2"):
        asyncio.run(_judge(tmp_path, provider).chat(_request()))
    assert provider.calls == 2  # same messages, other evidence: not answered from the cache
    with judging_evidence("sha256:run-1"):
        asyncio.run(_judge(tmp_path, provider).chat(_request()))
    assert provider.calls == 2
    request = _request()
    assert request_key("openai", request, evidence="a") != request_key("openai", request)
    assert request_key("openai", request, endpoint="u") != request_key("openai", request)


def test_the_evidence_digest_follows_what_not_when(tmp_path: Path) -> None:
    from vally import Trajectory
    from vally_builtin.judge.evidence import EvidenceReader, write_trajectory_evidence

    def digest(folder: str, output: str, wall_ms: int, stamp: str) -> str:
        trajectory = Trajectory.model_validate(
            {
                "stimulus": {"name": "s", "prompt": "Capital of France?"},
                "events": [
                    {"type": "assistant_message", "timestamp": stamp, "data": {"content": output}}
                ],
                "metrics": {"wallTimeMs": wall_ms},
            }
        )
        write_trajectory_evidence(tmp_path / folder / "run-1", trajectory)
        return EvidenceReader(tmp_path / folder, 5).digest()

    first = digest("a", "Paris", 10, "2026-01-01T00:00:00Z")
    assert digest("b", "Paris", 99, "2026-06-01T12:00:00Z") == first  # only the times differ
    assert digest("c", "Lyon", 10, "2026-01-01T00:00:00Z") != first  # the content differs
