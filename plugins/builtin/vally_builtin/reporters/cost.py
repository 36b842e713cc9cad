"""The run's token and money totals as one line, for the console and ``report.md``.

``agent 1,200 tokens $0.0042 (reported) · judge 300 tokens $0.0011 · total $0.0053``: tokens
and cost of the agent's and the judges' model calls, summed over the trials' records. A cost
some trials could not price (a model without a price) says how many trials were left out;
the judge cache's hits and misses follow when judges were asked.
"""

from __future__ import annotations

from collections.abc import Iterable

from vally import TrialResultRecord


def format_usd(value: float | None) -> str:
    """Dollars with four decimals (``$0.0042``), or ``unknown``."""
    return "unknown" if value is None else f"${value:,.4f}"


def cost_line(records: Iterable[TrialResultRecord]) -> str:
    """The run's totals: tokens and cost of the agent, of the judges, and the total cost."""
    tokens = {"agent": 0, "judge": 0}
    dollars = {"agent": 0.0, "judge": 0.0}
    priced = {"agent": False, "judge": False}
    sources: set[str] = set()
    unpriced = hits = misses = 0
    for record in records:
        hits += record.usage.judge_cache.hits
        misses += record.usage.judge_cache.misses
        cost = record.cost
        tokens["agent"] += record.usage.agent.total_tokens
        tokens["judge"] += record.usage.judge.total_tokens
        for who, value in (("agent", cost.agent_usd), ("judge", cost.judge_usd)):
            if value is not None:
                dollars[who] += value
                priced[who] = True
        if cost.agent_source is not None:
            sources.add(cost.agent_source)
        unpriced += cost.unpriced_trials
    parts = []
    for who in ("agent", "judge"):
        part = f"{who} {tokens[who]:,} tokens {format_usd(dollars[who] if priced[who] else None)}"
        if who == "agent" and sources:
            part += f" ({'/'.join(sorted(sources))})"
        parts.append(part)
    total = format_usd(dollars["agent"] + dollars["judge"] if any(priced.values()) else None)
    line = " · ".join([*parts, f"total {total}"])
    if unpriced:
        line += f" ({unpriced} trial{'' if unpriced == 1 else 's'} without a price left out)"
    if hits or misses:
        line += f" · judge cache {hits} hits / {misses} misses"
    return line
