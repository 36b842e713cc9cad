"""A run's tally sums its trials' costs as plain numbers (``CostSum``): the sum is the
``Cost`` the chain of ``Cost.plus`` gives, to the last bit."""

from __future__ import annotations

import random

from vally.models.cost import Cost, CostSource, CostSum

SOURCES: list[CostSource | None] = [None, "reported", "price-table", "mixed"]


def _cost(rng: random.Random) -> Cost:
    priced = rng.random() < 0.8
    agent = rng.choice([0.0, rng.random() / 7, rng.uniform(0, 3)]) if priced else None
    judge = rng.choice([0.0, rng.random() / 3, None])
    graders = {name: rng.choice([0.1 * rng.random(), None]) for name in rng.sample("abcd", 2)}
    return Cost(
        agent_usd=agent,
        judge_usd=judge,
        total_usd=None if agent is None or judge is None else agent + judge,
        agent_source=rng.choice(SOURCES),
        judge_by_grader=graders,
        unpriced_trials=0 if priced else 1,
    )


def test_a_running_sum_is_the_chain_of_plus() -> None:
    rng = random.Random(11)
    for _ in range(200):
        costs = [_cost(rng) for _ in range(rng.randint(0, 30))]
        start = rng.choice([None, _cost(rng)])
        chained = Cost() if start is None else start
        running = CostSum(start)
        for cost in costs:
            chained = chained.plus(cost)
            running.add(cost)
        got = running.cost
        assert got == chained
        assert repr(got.total_usd) == repr(chained.total_usd)  # the same float, bit for bit
    assert CostSum().cost == Cost()
