"""Cost in money of a trial and a run, split into the agent's and the judges' model calls.

The agent's cost is what the agent reported when it reports one (Claude Code's
``total_cost_usd``, kept as ``trajectory.metadata.extra.costUsd``), else its token usage
priced with the :class:`~vally.models.pricing.PriceTable`. A judge's cost is the usage its
grader reports (``metadata.judgeUsage``) priced at the judge model's price
(``metadata.judgeModel``). Model calls whose model has no price make the cost unknown
(``null``), never zero; a side without model calls costs 0.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from vally.models.base import RecordModel
from vally.models.usage import JUDGE_USAGE_KEY, judge_totals

if TYPE_CHECKING:
    from vally.models.pricing import PriceTable
    from vally.models.records import GradeResult, GraderResult
    from vally.models.trajectory import Trajectory

JUDGE_MODEL_KEY = "judgeModel"
"""The grader-result metadata key naming the judge model (used to price its usage)."""

REPORTED_COST_KEY = "costUsd"
"""The ``trajectory.metadata.extra`` key of the cost an agent reported, in US dollars."""

CostSource = Literal["reported", "price-table", "mixed"]


def _add(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


class Cost(RecordModel):
    """Cost in US dollars, agent and judge, of a trial or (summed) of a run.

    Attributes:
        agent_usd: The agent's cost (``null`` when a model it called has no price).
        judge_usd: The judges' cost (``null`` when a judge model has no price).
        total_usd: ``agentUsd + judgeUsd`` (``null`` when either is unknown).
        agent_source: Where the agent's cost came from: ``reported`` by the agent,
            ``price-table``, ``mixed`` (a run with both), ``null`` when unknown or no calls.
        judge_by_grader: The judges' cost by grader name (``null`` for an unpriced judge).
        unpriced_trials: Trials whose cost is unknown (counted in a run's sums as nothing).
    """

    agent_usd: float | None = 0.0
    judge_usd: float | None = 0.0
    total_usd: float | None = 0.0
    agent_source: CostSource | None = None
    judge_by_grader: dict[str, float | None] = Field(default_factory=dict)
    unpriced_trials: int = 0

    def plus(self, other: Cost) -> Cost:
        """The sum of two costs of a run: unknown parts count as nothing and are counted in
        ``unpriced_trials``."""
        graders = dict(self.judge_by_grader)
        for name, value in other.judge_by_grader.items():
            graders[name] = (graders.get(name) or 0.0) + (value or 0.0)
        sources = {s for s in (self.agent_source, other.agent_source) if s is not None}
        return Cost(
            agent_usd=(self.agent_usd or 0.0) + (other.agent_usd or 0.0),
            judge_usd=(self.judge_usd or 0.0) + (other.judge_usd or 0.0),
            total_usd=(self.agent_usd or 0.0)
            + (other.agent_usd or 0.0)
            + (self.judge_usd or 0.0)
            + (other.judge_usd or 0.0),
            agent_source=sources.pop() if len(sources) == 1 else ("mixed" if sources else None),
            judge_by_grader=graders,
            unpriced_trials=self.unpriced_trials + other.unpriced_trials,
        )


class CostSum:
    """A running :meth:`Cost.plus` over many costs (a run's tally adds one a trial) kept as
    plain numbers: building a :class:`Cost` for each partial sum was most of what counting
    a trial's cost took. :attr:`cost` is the :class:`Cost` the same chain of ``plus``
    gives, to the last bit.

    Args:
        start: The cost the others are added to (default: nothing spent).
    """

    __slots__ = (
        "agent_source",
        "agent_usd",
        "judge_by_grader",
        "judge_usd",
        "total_usd",
        "unpriced_trials",
    )

    def __init__(self, start: Cost | None = None) -> None:
        start = Cost() if start is None else start
        self.agent_usd, self.judge_usd = start.agent_usd, start.judge_usd
        self.total_usd, self.agent_source = start.total_usd, start.agent_source
        self.judge_by_grader = dict(start.judge_by_grader)
        self.unpriced_trials = start.unpriced_trials

    def add(self, other: Cost) -> None:
        """Add ``other`` (as ``sum = sum.plus(other)`` would)."""
        graders = self.judge_by_grader
        for name, value in other.judge_by_grader.items():
            graders[name] = (graders.get(name) or 0.0) + (value or 0.0)
        mine, theirs = self.agent_source, other.agent_source
        if theirs is not None and theirs != mine:
            self.agent_source = theirs if mine is None else "mixed"
        agent = (self.agent_usd or 0.0) + (other.agent_usd or 0.0)
        judge = self.judge_usd or 0.0
        other_judge = other.judge_usd or 0.0
        self.total_usd = agent + judge + other_judge
        self.agent_usd, self.judge_usd = agent, judge + other_judge
        self.unpriced_trials += other.unpriced_trials

    @property
    def cost(self) -> Cost:
        """The sum so far."""
        return Cost(
            agent_usd=self.agent_usd,
            judge_usd=self.judge_usd,
            total_usd=self.total_usd,
            agent_source=self.agent_source,
            judge_by_grader=dict(self.judge_by_grader),
            unpriced_trials=self.unpriced_trials,
        )


def _reported_cost(trajectory: Trajectory) -> float | None:
    value = trajectory.metadata.extra.get(REPORTED_COST_KEY)
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < math.inf:
        return float(value)
    return None


def agent_cost(
    trajectory: Trajectory | None, model: str | None, prices: PriceTable
) -> tuple[float | None, CostSource | None]:
    """The agent's cost and its source: the reported cost, else its tokens priced by model
    (``model`` stands for calls that name none)."""
    if trajectory is None:
        return 0.0, None
    reported = _reported_cost(trajectory)
    if reported is not None:
        return reported, "reported"
    usage = trajectory.metrics.token_usage
    if usage.input_tokens + usage.output_tokens == 0:
        return 0.0, None
    by_model = {m: v for m, v in usage.by_model.items() if m != "unknown"}
    if len(by_model) <= 1 or len(usage.by_model) != len(by_model):
        # One model (or calls naming none): price the totals, cached tokens included.
        name = next(iter(by_model), None) or trajectory.metadata.model or model
        price = prices.get(name)
        if price is None:
            return None, None
        return (
            price.cost(usage.input_tokens, usage.output_tokens, usage.cache_read_tokens),
            "price-table",
        )
    total = 0.0
    for name, counts in by_model.items():
        price = prices.get(name)
        if price is None:
            return None, None
        total += price.cost(counts.get("inputTokens", 0), counts.get("outputTokens", 0))
    return total, "price-table"


def grader_judge_cost(result: GraderResult, prices: PriceTable) -> float | None:
    """The cost of the judge calls one grader result reports (nested results included)."""
    tokens = judge_totals(result.metadata.get(JUDGE_USAGE_KEY))
    total: float | None = 0.0
    if tokens.total_tokens:
        model = result.metadata.get(JUDGE_MODEL_KEY)
        price = prices.get(model if isinstance(model, str) else None)
        total = (
            None
            if price is None
            else price.cost(tokens.input_tokens, tokens.output_tokens, tokens.cache_read_tokens)
        )
    for detail in result.details:
        total = _add(total, grader_judge_cost(detail, prices))
    return total


def judge_costs(grade: GradeResult | None, prices: PriceTable) -> dict[str, float | None]:
    """The judges' cost by grader name (graders that called no model cost 0)."""
    costs: dict[str, float | None] = {}
    for result in grade.details if grade is not None else ():
        value = grader_judge_cost(result, prices)
        costs[result.name] = _add(costs.get(result.name, 0.0), value)
    return costs


def trial_cost(
    trajectory: Trajectory | None,
    grade: GradeResult | None,
    *,
    model: str | None,
    prices: PriceTable,
) -> Cost:
    """The cost of one trial: its agent's and its judges'."""
    agent, source = agent_cost(trajectory, model, prices)
    by_grader = judge_costs(grade, prices)
    judge: float | None = 0.0
    for value in by_grader.values():
        judge = _add(judge, value)
    total = _add(agent, judge)
    return Cost(
        agent_usd=agent,
        judge_usd=judge,
        total_usd=total,
        agent_source=source,
        judge_by_grader=by_grader,
        unpriced_trials=0 if total is not None else 1,
    )
