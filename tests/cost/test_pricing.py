"""The price table's lookup and a trial's cost: the agent's reported cost wins over the
table, an unpriced model leaves the cost unknown."""

from __future__ import annotations

import pytest

from vally.models.cost import trial_cost
from vally.models.pricing import BUILTIN_PRICES, ModelPrice, PriceTable
from vally.models.records import GradeResult, GraderResult
from vally.models.spec import Stimulus
from vally.models.trajectory import Trajectory, TrajectoryMetadata, TrajectoryRecorder


def test_lookup_strips_provider_prefixes_and_date_suffixes() -> None:
    table = PriceTable({"gpt-4o": ModelPrice(input=1, output=2)})
    assert table.get("openai/gpt-4o") == ModelPrice(input=1, output=2)
    assert table.get("gpt-4o-mini-2024-07-18") == BUILTIN_PRICES["gpt-4o-mini"]
    assert table.get("claude-sonnet-4-20250514") == BUILTIN_PRICES["claude-sonnet-4"]
    assert table.get("gpt-4oz") is None
    assert table.get(None) is None


def test_cached_input_tokens_are_priced_at_the_cache_rate() -> None:
    price = ModelPrice(input=10, output=20, cache_read=1)
    assert price.cost(1_000_000, 0, cache_read_tokens=400_000) == pytest.approx(6.4)
    assert ModelPrice(input=10, output=20).cost(0, 500_000) == pytest.approx(10.0)


def _trajectory(cost_usd: float | None = None) -> Trajectory:
    recorder = TrajectoryRecorder()
    recorder.token_usage(input_tokens=1000, output_tokens=100, model="m")
    extra = {} if cost_usd is None else {"costUsd": cost_usd}
    metadata = TrajectoryMetadata(model="m", extra=extra)
    return recorder.trajectory(Stimulus(name="s", prompt="p"), output="done", metadata=metadata)


def _grade(model: str) -> GradeResult:
    judge = GraderResult(
        name="judge",
        type="prompt",
        passed=True,
        score=1.0,
        metadata={
            "judgeModel": model,
            "judgeUsage": {"calls": 1, "inputTokens": 100, "outputTokens": 10},
        },
    )
    return GradeResult(
        passed=True,
        score=1.0,
        threshold=None,
        mode="binary",
        has_graders=True,
        errored=False,
        details=[judge],
    )


def test_the_agents_reported_cost_is_preferred_to_the_table() -> None:
    table = PriceTable({"m": ModelPrice(input=1000, output=1000)})
    reported = trial_cost(_trajectory(0.5), None, model="m", prices=table)
    assert (reported.agent_usd, reported.agent_source) == (0.5, "reported")
    priced = trial_cost(_trajectory(), None, model="m", prices=table)
    assert priced.agent_usd == pytest.approx(1.1)
    assert priced.agent_source == "price-table"


def test_an_unpriced_judge_makes_the_trial_cost_unknown() -> None:
    table = PriceTable({"m": ModelPrice(input=1000, output=1000)})
    cost = trial_cost(_trajectory(), _grade("nobody-knows"), model="m", prices=table)
    assert cost.judge_by_grader == {"judge": None}
    assert (cost.judge_usd, cost.total_usd, cost.unpriced_trials) == (None, None, 1)
    known = trial_cost(_trajectory(), _grade("m"), model="m", prices=table)
    assert known.judge_usd == pytest.approx(0.11)
    assert known.total_usd == pytest.approx(1.21)
