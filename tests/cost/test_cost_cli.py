"""Token and cost totals of a real ``vally eval`` match what the loopback server reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cost.support import project, read_jsonl, reply, vally
from tests.llm.chat_server import ChatServer

# Each call: 10 prompt / 5 completion tokens. Agent: 2 calls at $1000 / $2000 per Mtok;
# judge: 1 call at $100 / $200 per Mtok.
AGENT_USD = (20 * 1000 + 10 * 2000) / 1e6
JUDGE_USD = (10 * 100 + 5 * 200) / 1e6


def test_eval_records_summary_and_report_carry_the_priced_totals(
    chat_server: ChatServer, tmp_path: Path
) -> None:
    chat_server.default = reply
    project(tmp_path, chat_server, runs=2)
    proc = vally(tmp_path, "eval", "-e", "eval.yaml", "--model", "m-agent", "--workers", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [results] = list(tmp_path.glob("vally-results/*/results.jsonl"))
    records = read_jsonl(results)
    assert len(records) == 2
    for record in records:
        assert record["usage"]["agent"]["totalTokens"] == 30
        assert record["usage"]["judge"]["totalTokens"] == 15
        cost = record["cost"]
        assert cost["agentUsd"] == pytest.approx(AGENT_USD)
        assert cost["judgeUsd"] == pytest.approx(JUDGE_USD)
        assert cost["totalUsd"] == pytest.approx(AGENT_USD + JUDGE_USD)
        assert cost["agentSource"] == "price-table"
        assert cost["judgeByGrader"]["judge"] == pytest.approx(JUDGE_USD)
        assert cost["judgeByGrader"]["file-contains"] == 0
        assert cost["unpricedTrials"] == 0
        assert record["usage"]["judgeCache"] == {"hits": 0, "misses": 1}
    [summary] = read_jsonl(results.with_name("run-summary.jsonl"))
    assert summary["usage"]["judgeCache"] == {"hits": 0, "misses": 2}
    assert summary["cost"]["totalUsd"] == pytest.approx(2 * (AGENT_USD + JUDGE_USD))
    assert summary["cost"]["judgeByGrader"]["judge"] == pytest.approx(2 * JUDGE_USD)
    total = f"${2 * (AGENT_USD + JUDGE_USD):,.4f}"
    assert f"total {total}" in proc.stdout + proc.stderr
    report = results.with_name("report.md").read_text()
    assert f"judge 30 tokens ${2 * JUDGE_USD:,.4f}" in report
    assert f"total {total} · judge cache 0 hits / 2 misses" in report


def test_a_model_without_a_price_leaves_the_cost_unknown(
    chat_server: ChatServer, tmp_path: Path
) -> None:
    chat_server.default = reply
    project(tmp_path, chat_server, extra="prices:\n  m-judge: {input: 100, output: 200}\n")
    proc = vally(tmp_path, "eval", "-e", "eval.yaml", "--model", "m-agent")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [results] = list(tmp_path.glob("vally-results/*/results.jsonl"))
    [record] = read_jsonl(results)
    assert record["cost"]["agentUsd"] is None
    assert record["cost"]["totalUsd"] is None
    assert record["cost"]["judgeUsd"] == pytest.approx(JUDGE_USD)
    assert record["cost"]["unpricedTrials"] == 1
    out = proc.stdout + proc.stderr
    assert "tokens cost unknown" in out
    assert (
        "(1 trial of a model without a price, not counted in the total: add it under prices: "
        "in .vally.yaml)"
    ) in out
