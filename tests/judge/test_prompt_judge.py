"""The prompt judge against a real Chat Completions server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.compare.records import record
from tests.llm.chat_server import ChatServer, completion, error, tool_call
from vally.contracts.protocols import GradeContext, JudgeSettings, PairwiseContext
from vally.errors import GradingError, LLMError
from vally.models import GraderConfig
from vally_builtin.judge.evidence import EvidenceReader
from vally_builtin.judge.prompt import PromptConfig, PromptGrader
from vally_builtin.llm.openai import OpenAIProvider
from vally_compare import judged as compare, judged_pairs as judging, judged_record


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as chat:
        yield chat


def provider(server: ChatServer, **overrides: Any) -> OpenAIProvider:
    config = {
        "base_url": server.base_url,
        "backoff_base": 0.001,
        "backoff_max": 0.002,
        "timeout": 5.0,
        "max_retries": 1,
        **overrides,
    }
    return OpenAIProvider(OpenAIProvider.Config.model_validate(config))


def grade(server: ChatServer, config: dict[str, Any], output: str = "The answer is 42.") -> Any:
    rec = record("s", output=output, rubric=["States the answer 42"])
    assert rec.trajectory is not None
    grader = PromptGrader(PromptConfig.model_validate(config))

    async def go() -> Any:
        llm = provider(server)
        try:
            return await grader.grade(
                GradeContext(
                    trajectory=rec.trajectory,
                    stimulus=rec.stimulus,
                    grader=GraderConfig(type="prompt", config=config),
                    llm=llm,
                    judge=JudgeSettings(model="judge-1", timeout=5.0),
                )
            )
        finally:
            await llm.aclose()

    return asyncio.run(go())


def test_tool_reading_judge_never_gets_evidence_in_first_message(server: ChatServer) -> None:
    server.enqueue(
        completion(tool_calls=[tool_call("read_evidence", {"path": "run-1/output.md"})]),
        completion(json.dumps({"score": "pass", "reasoning": "says 42"})),
    )
    result = grade(server, {}, output="SECRET-EVIDENCE 42")
    assert result.passed and result.score == 1.0
    first, second = server.requests
    assert "SECRET-EVIDENCE" not in json.dumps(first.messages)
    assert "run-1/output.md" in first.messages[1]["content"]
    assert "States the answer 42" in first.messages[1]["content"]
    assert {t["function"]["name"] for t in first.body["tools"]} == {
        "list_evidence",
        "read_evidence",
    }
    assert first.body["response_format"]["type"] == "json_schema"
    assert "SECRET-EVIDENCE" in second.messages[-1]["content"]
    assert result.metadata["reads"] == 1


def test_inline_judge_puts_capped_evidence_in_prompt(server: ChatServer) -> None:
    server.enqueue(completion(json.dumps({"score": 4, "reasoning": "ok"})))
    result = grade(server, {"evidence": "inline", "scoring": "scale_1_5"}, output="x" * 100_000)
    assert result.score == pytest.approx(0.75) and result.passed
    body = server.requests[0].body
    assert "tools" not in body or not body["tools"]
    content = body["messages"][1]["content"]
    assert "truncated" in content and len(content) < 40_000


def test_unparseable_answer_after_reminders_is_a_grading_error(server: ChatServer) -> None:
    server.enqueue(completion("I think it passes"), completion("yes"), completion("pass!"))
    with pytest.raises(GradingError, match="could not be used"):
        grade(server, {})
    assert len(server.requests) == 3
    assert "JSON" in server.requests[1].messages[-1]["content"]


def test_lenient_parse_of_fenced_json(server: ChatServer) -> None:
    server.enqueue(completion('Here:\n```json\n{"score": "fail", "reasoning": "no {42}"}\n```'))
    result = grade(server, {})
    assert not result.passed and result.score == 0.0


def test_server_without_response_format_falls_back(server: ChatServer) -> None:
    server.enqueue(
        error(400, "Unrecognized request argument supplied: response_format"),
        completion(json.dumps({"score": "pass", "reasoning": "fine"})),
    )
    assert grade(server, {}).passed
    assert "response_format" not in server.requests[1].body


def test_judge_failure_is_grading_error_naming_status(server: ChatServer) -> None:
    server.enqueue(error(404, "model judge-1 not found"))
    with pytest.raises(GradingError, match="404"):
        grade(server, {})


def test_evidence_reader_budget_and_confinement(tmp_path: Path) -> None:
    (tmp_path / "run-1").mkdir()
    (tmp_path / "run-1" / "output.md").write_text("hello world")
    (tmp_path / "secret.txt").write_text("outside")
    reader = EvidenceReader(tmp_path / "run-1", budget=1)
    assert reader.call("read_evidence", {"path": "../secret.txt"})[0] is False
    ok, text = reader.call("read_evidence", {"path": "output.md", "offset": 6, "limit": 3})
    assert ok and text.startswith("wor") and "more characters" in text
    ok, text = reader.call("read_evidence", {"path": "output.md"})
    assert not ok and "budget" in text


def compare_with(server: ChatServer, base: list[Any], treat: list[Any], **kw: Any) -> Any:
    async def go() -> Any:
        llm = provider(server)
        try:
            options = judging.CompareOptions(
                JudgeSettings(model="judge-1", timeout=5.0),
                llm,
                backoff_base=0.001,
                judge_workers=1,
                **kw,
            )
            return await judging.compare_runs("base", base, "treat", treat, PromptGrader(), options)
        finally:
            await llm.aclose()

    return asyncio.run(go())


def verdict(winner: str, magnitude: str | None = "much") -> Any:
    return completion(json.dumps({"winner": winner, "magnitude": magnitude, "reasoning": "r"}))


def test_position_biased_judge_over_http_gives_ties(server: ChatServer) -> None:
    server.enqueue(*[verdict("A") for _ in range(4)])
    result = compare_with(server, [record("a"), record("b")], [record("a"), record("b")])
    assert [r.score for r in result.results] == [0.0, 0.0]
    assert result.status == "complete"


def treatment_wins(request: Any) -> Any:
    """A consistent judge: whichever letter the treatment (run-2) holds wins."""
    first = request.messages[1]["content"]
    return verdict("A" if "Response A: run-2" in first else "B")


def test_rate_limit_then_success_equals_clean_run(server: ChatServer) -> None:
    server.default = treatment_wins
    clean = compare_with(server, [record("a")], [record("a")])
    limited = error(429, "slow down", headers={"Retry-After": "0"})
    server.enqueue(limited, limited, limited, limited)
    recovered = compare_with(server, [record("a")], [record("a")])
    assert clean.results[0].score == 1.0
    to_record = judged_record.to_record
    assert json.dumps(to_record(clean)) == json.dumps(to_record(recovered))
    assert len(server.requests) == 2 + 4 + 2


def test_terminal_404_fails_pair_without_retry(server: ChatServer) -> None:
    server.enqueue(error(404, "The model judge-1 does not exist"), error(404, "nope"))
    result = compare_with(server, [record("a")], [record("a")])
    failure = result.results[0].failure
    assert failure is not None
    assert failure.error_class == "model_unavailable" and not failure.retryable
    assert failure.attempts == 1 and failure.model == "judge-1"
    assert compare.exit_code([result], fail_on_regression=False) == 1


def test_pair_reads_both_runs_through_tools(server: ChatServer) -> None:
    def reads(label: str) -> Any:
        return completion(tool_calls=[tool_call("read_evidence", {"path": f"{label}/output.md"})])

    server.enqueue(reads("run-1"), verdict("tie", None), reads("run-2"), verdict("tie", None))
    result = compare_with(
        server, [record("a", output="BASE-OUT")], [record("a", output="TREAT-OUT")]
    )
    assert result.results[0].score == 0.0
    first_messages = [r.messages[1]["content"] for r in server.requests if len(r.messages) == 2]
    assert all("BASE-OUT" not in m and "TREAT-OUT" not in m for m in first_messages)
    assert any("Response A: run-2" in m for m in first_messages)


def test_judge_without_model_is_terminal(server: ChatServer) -> None:
    grader = PromptGrader()
    ctx = PairwiseContext(Path("."), "run-1", "run-2", "t", ["r"], JudgeSettings(), None)
    with pytest.raises(GradingError, match="model provider"):
        asyncio.run(grader.judge_pair(ctx))
    assert isinstance(LLMError("x", retryable=True, error_class="timeout"), LLMError)
