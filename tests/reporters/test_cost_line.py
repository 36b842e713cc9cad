"""The cost line reads as a statement of what is known: a part without a price says
``cost unknown``, a judge that was never called is not shown, and trials left out say how
to price them."""

from __future__ import annotations

from vally_builtin.reporters.cost import CostTotals


def _totals(
    tokens: dict[str, int],
    dollars: dict[str, float] | None = None,
    priced: dict[str, bool] | None = None,
    unpriced: int = 0,
) -> CostTotals:
    totals = CostTotals()
    totals.tokens.update(tokens)
    totals.dollars.update(dollars or {})
    totals.priced.update(priced or {})
    totals.unpriced = unpriced
    totals.spent = True
    return totals


def test_nothing_priced_reads_unknown_with_the_way_to_price_it() -> None:
    line = _totals(tokens={"agent": 432}, unpriced=9).line()
    assert line == (
        "agent 432 tokens cost unknown · total unknown "
        "(9 trials of a model without a price: add it under prices: in .vally.yaml)"
    )


def test_a_priced_judge_beside_an_unpriced_agent_says_what_the_total_leaves_out() -> None:
    line = _totals(
        tokens={"agent": 20, "judge": 15},
        dollars={"judge": 0.0025},
        priced={"judge": True},
        unpriced=1,
    ).line()
    assert line.startswith("agent 20 tokens cost unknown · judge 15 tokens $0.0025 · total $0.0025")
    assert line.endswith(
        "(1 trial of a model without a price, not counted in the total: add it under prices: "
        "in .vally.yaml)"
    )


def test_everything_priced() -> None:
    line = _totals(
        tokens={"agent": 240, "judge": 60},
        dollars={"agent": 0.0012, "judge": 0.0003},
        priced={"agent": True, "judge": True},
    ).line()
    assert line == "agent 240 tokens $0.0012 · judge 60 tokens $0.0003 · total $0.0015"
