"""What library callers get about the judge's evidence: each pass's reads
(``metadata["evidence_usage"]``) and what became of the shared evidence directory
(``metadata["judge_cleanup"]``), through ``vally_compare``'s public API with the built-in
prompt judge against a Chat Completions server on 127.0.0.1. Neither is written to
``--output``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.compare.records import record
from tests.llm.chat_server import ChatServer, completion, error, tool_call
from vally import JudgeSettings, PairwiseContext, PairwiseVerdict
from vally_builtin.judge.prompt import PromptGrader
from vally_builtin.llm.openai import OpenAIProvider
from vally_compare import CompareOptions, ComparisonResult, compare_runs, judge_pair
from vally_compare.judged_record import to_record


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as chat:
        yield chat


def _provider(server: ChatServer) -> OpenAIProvider:
    config = {"base_url": server.base_url, "timeout": 5.0, "max_retries": 0}
    return OpenAIProvider(OpenAIProvider.Config.model_validate(config))


def _compare(server: ChatServer, **kw: Any) -> ComparisonResult:
    async def go() -> ComparisonResult:
        llm = _provider(server)
        try:
            options = CompareOptions(
                JudgeSettings(model="judge-1", timeout=5.0), llm, judge_workers=1, **kw
            )
            return await compare_runs(
                "base", [record("a")], "treat", [record("a")], PromptGrader(), options
            )
        finally:
            await llm.aclose()

    return asyncio.run(go())


def _reads_then_answers(reads: dict[str, int]) -> Any:
    """A judge that reads ``reads[folder of A]`` files before answering a tie."""

    def respond(request: Any) -> Any:
        first = request.messages[1]["content"]
        a = "run-1" if "Response A: run-1" in first else "run-2"
        done = sum(1 for m in request.messages if m["role"] == "tool")
        if done < reads[a]:
            files = ("output.md", "metrics.json", "timeline.jsonl")
            return completion(None, [tool_call("read_evidence", {"path": f"{a}/{files[done]}"})])
        return completion(json.dumps({"winner": "tie", "magnitude": None, "reasoning": "same"}))

    return respond


def test_each_pass_reports_its_own_reads(server: ChatServer) -> None:
    server.default = _reads_then_answers({"run-1": 2, "run-2": 3})
    result = _compare(server)
    (pair,) = result.results
    usage = pair.metadata["evidence_usage"]
    assert usage == [
        {
            "pass": 1,
            "judge_model": "judge-1",
            "a": "run-1",
            "b": "run-2",
            "delivery": "tools",
            "reads": 2,
            "read_budget": 40,
        },
        {
            "pass": 2,
            "judge_model": "judge-1",
            "a": "run-2",
            "b": "run-1",
            "delivery": "tools",
            "reads": 3,
            "read_budget": 40,
        },
    ]
    cleanup = pair.metadata["judge_cleanup"]
    assert cleanup["status"] == "removed" and cleanup["session_failures"] == []
    (folder,) = cleanup["directories"]
    assert folder["status"] == "removed" and folder["error"] is None
    assert folder["attempt"] == 1 and not Path(folder["directory"]).exists()
    written = json.dumps(to_record(result))
    assert "evidence_usage" not in written and "judge_cleanup" not in written
    assert folder["directory"] not in written


def test_a_failed_pass_is_labelled_in_the_cleanup(server: ChatServer) -> None:
    """The second pass fails for good: the pair fails, its reads are unknown, and the
    session failure names pass 2."""

    def respond(request: Any) -> Any:
        if "Response A: run-2" in request.messages[1]["content"]:
            return error(400, "malformed request")
        return completion(json.dumps({"winner": "tie", "magnitude": None, "reasoning": "="}))

    server.default = respond
    (pair,) = _compare(server).results
    assert pair.failure is not None
    assert [u["reads"] for u in pair.metadata["evidence_usage"]] == [0, None]
    cleanup = pair.metadata["judge_cleanup"]
    assert cleanup["status"] == "removed"
    (failure,) = cleanup["session_failures"]
    assert failure["pass"] == 2 and failure["attempt"] == 1 and failure["settled"] is True
    assert failure["error_class"] == "bad_request" and "malformed request" in failure["message"]


class HeldJudge:
    """Answers pass 1 at once and holds pass 2 until released."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def judge_pair(self, context: PairwiseContext) -> PairwiseVerdict:
        if context.a == "run-2":
            await self.release.wait()
        return PairwiseVerdict("tie", None, reads=1)


def test_a_pass_still_running_keeps_the_directory_pending_until_it_settles() -> None:
    async def go() -> None:
        judge = HeldJudge()
        options = CompareOptions(
            JudgeSettings(model="j"), None, pass_timeout=0.05, max_retries=0, backoff_base=0.0
        )
        result = await judge_pair(_pair(), judge, options)
        cleanup = result.metadata["judge_cleanup"]
        assert cleanup["status"] == "pending"
        (folder,) = cleanup["directories"]
        assert Path(folder["directory"]).exists()
        (failure,) = cleanup["session_failures"]
        assert failure["pass"] == 2 and failure["settled"] is False
        assert failure["error_class"] == "timeout"
        judge.release.set()
        for _ in range(100):  # let the held pass finish and its callback run
            if cleanup["status"] != "pending":
                break
            await asyncio.sleep(0)
        assert cleanup["status"] == "removed" and folder["status"] == "removed"
        assert not Path(folder["directory"]).exists()

    asyncio.run(go())


def _pair() -> Any:
    from vally_compare.judged import pair_records

    return pair_records([record("a")], [record("a")]).pairs[0]
