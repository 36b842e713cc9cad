"""The library behind ``vally compare``: the text report and :func:`execute` with its own
output callbacks (as ``experiment run --compare`` and Python callers use it)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.compare.records import record
from tests.compare.test_engine import ScriptedJudge, longer_wins, options, run
from tests.llm.chat_server import ChatServer, completion
from vally.errors import LLMError
from vally.plugins.session import Session
from vally.specs.loading import find_project
from vally_compare import judged as compare, judged_pairs
from vally_compare.cli import CompareRequest as CliCompareRequest, execute as cli_execute
from vally_compare.judged_text import cleanup_warnings, comparison_lines
from vally_compare.run import CompareRequest, execute


def test_the_cli_module_re_exports_the_request_and_execute() -> None:
    assert CliCompareRequest is CompareRequest
    assert cli_execute is execute


def test_report_lines_of_a_partial_comparison() -> None:
    base = [record("a", output="short"), record("b", output="short"), record("c", tokens=50)]
    treat = [record("a", output="much longer"), record("b", output="x"), record("d")]
    failing = LLMError("bad request", error_class="bad_request", retryable=False)
    judge = ScriptedJudge(longer_wins, failures=[failing, failing])
    result = run(judged_pairs.compare_runs("base", base, "treat", treat, judge, options()))
    lines = comparison_lines(result, verbose=False)
    assert lines[:3] == [
        "━━━ treat vs base ━━━",
        "Judge: judge-1   Matched pairs: 2",
        "Unmatched: 1 only in baseline, 1 only in treatment",
    ]
    assert "⚠ Judged 1 of 2 matched pairs — 1 failed during judging." in lines
    assert any(line.startswith("Win rate: 0 W / 0 T / 1 L") for line in lines)
    assert lines[-1] == "  ✘ ev/a #0: bad_request after 1 attempt(s): bad request"
    verbose = comparison_lines(result, verbose=True)
    assert "  only in baseline: ev/c #0" in verbose
    assert "  ev/b #0: much worse (-1.0)" in verbose
    assert cleanup_warnings(result) == []


def test_a_comparison_without_judged_pairs_has_no_statistics() -> None:
    pairing = compare.Pairing([], [], [])
    result = compare.summarize("base", "treat", pairing, [], None, error="boom")
    lines = comparison_lines(result, verbose=True)
    assert lines == [
        "━━━ treat vs base ━━━",
        "Judge: n/a   Matched pairs: 0",
        "Comparison failed: boom",
        "No statistics available — every matched pair failed",
    ]


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as chat:
        yield chat


def test_execute_reports_through_the_given_callbacks(
    server: ChatServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    verdict = {"winner": "tie", "magnitude": None, "reasoning": "same"}
    server.default = lambda request: completion(json.dumps(verdict))
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    (tmp_path / ".vally.yaml").write_text("llm:\n  max_retries: 0\n")
    lines = [r.to_json_line() + "\n" for r in (record("a"), record("b"))]
    (tmp_path / "base.jsonl").write_text("".join(lines))
    (tmp_path / "treat.jsonl").write_text("".join(lines))
    project, root = find_project(tmp_path)
    echoed: list[str] = []
    warned: list[str] = []
    request = CompareRequest(
        baseline=tmp_path / "base.jsonl",
        treatment=tmp_path / "treat.jsonl",
        judge_model="judge-1",
        output=tmp_path / "out" / "cmp.jsonl",
    )
    code = execute(request, Session(project, root), echo=echoed.append, warn=warned.append)
    assert code == 0
    assert any(
        line.startswith("Win rate: 0 W / 2 T / 0 L (0% wins over 2 pairs)") for line in echoed
    )
    assert echoed[-1] == ""
    assert warned == []
    assert capsys.readouterr().out == ""
    written = json.loads((tmp_path / "out" / "cmp.jsonl").read_text())
    assert written["status"] == "complete" and written["judgedPairs"] == 2
