"""The run's token and money totals as one line, for the console and ``report.md``.

``agent 1,200 tokens $0.0042 (reported) · judge 300 tokens $0.0011 · total $0.0053``: tokens
and cost of the agent's and the judges' model calls, summed over the trials' records. A cost
some trials could not price (a model without a price) says how many trials were left out;
the judge cache's hits and misses follow when judges were asked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from vally import USAGE_FIELDS, TrialFacts, TrialResultRecord

_SIDE = len(USAGE_FIELDS)
_AGENT_CALLS, _AGENT_TOTAL = USAGE_FIELDS.index("calls"), USAGE_FIELDS.index("totalTokens")
_JUDGE_CALLS, _JUDGE_TOTAL = _SIDE + _AGENT_CALLS, _SIDE + _AGENT_TOTAL
"""Where :attr:`vally.TrialFacts.usage` holds the counters a cost line reads."""


def format_usd(value: float | None) -> str:
    """Dollars with four decimals (``$0.0042``), or ``unknown``."""
    return "unknown" if value is None else f"${value:,.4f}"


class CostTotals:
    """The run's tokens, dollars and judge-cache counts, fed one record at a time."""

    def __init__(self) -> None:
        self.tokens = {"agent": 0, "judge": 0}
        self.dollars = {"agent": 0.0, "judge": 0.0}
        self.priced = {"agent": False, "judge": False}
        self.sources: set[str] = set()
        self.unpriced = self.hits = self.misses = 0
        self.spent = False
        """Some trial made a model call or reported a cost."""

    def add(self, record: TrialResultRecord) -> None:
        """Count one trial's usage and cost."""
        self.add_facts(TrialFacts.of_record(record))

    def add_facts(self, facts: TrialFacts) -> None:
        """Count one trial's usage and cost from its facts (see :meth:`add`)."""
        usage, cost, cache = facts.usage, facts.cost, facts.judge_cache
        if cost is None:  # a line without one: a record's default cost, nothing spent
            agent_usd: float | None = 0.0
            judge_usd: float | None = 0.0
        else:
            agent_usd, judge_usd = cost.agent_usd, cost.judge_usd
            if cost.agent_source is not None:
                self.sources.add(cost.agent_source)
            self.unpriced += cost.unpriced_trials
        if cache is not None:
            self.hits += cache.hits
            self.misses += cache.misses
        agent_tokens, judge_tokens = usage[_AGENT_TOTAL], usage[_JUDGE_TOTAL]
        if agent_tokens or judge_tokens:  # most trials of a mock or a judge-free eval: none
            self.tokens["agent"] += agent_tokens
            self.tokens["judge"] += judge_tokens
        if not self.spent:
            self.spent = bool(usage[_AGENT_CALLS] or usage[_JUDGE_CALLS] or agent_usd)
        if agent_usd is not None:
            if agent_usd:  # a sum of dollars: adding nothing changes nothing
                self.dollars["agent"] += agent_usd
            self.priced["agent"] = True
        if judge_usd is not None:
            if judge_usd:
                self.dollars["judge"] += judge_usd
            self.priced["judge"] = True

    def state(self) -> dict[str, Any]:
        """The totals as JSON data, which :meth:`absorb` adds to other totals."""
        return {
            "tokens": dict(self.tokens),
            "dollars": dict(self.dollars),
            "priced": dict(self.priced),
            "sources": sorted(self.sources),
            "unpriced": self.unpriced,
            "hits": self.hits,
            "misses": self.misses,
            "spent": self.spent,
        }

    def absorb(self, state: Mapping[str, Any]) -> None:
        """Add other totals (their :meth:`state`), as if their records were added here."""
        for who in ("agent", "judge"):
            self.tokens[who] += int(state["tokens"][who])
            self.dollars[who] += float(state["dollars"][who])
            self.priced[who] = self.priced[who] or bool(state["priced"][who])
        self.sources.update(str(source) for source in state["sources"])
        self.unpriced += int(state["unpriced"])
        self.hits += int(state["hits"])
        self.misses += int(state["misses"])
        self.spent = self.spent or bool(state["spent"])

    def line(self) -> str:
        """Tokens and cost of the agent, of the judges (when they were called), and the
        total cost: ``agent 240 tokens $0.0012 · judge 60 tokens $0.0003 · total $0.0015``.
        A part with no price reads ``cost unknown``, and trials left out of the total say
        how to price them."""
        shown = [w for w in ("agent", "judge") if self.tokens[w] or self.dollars[w]] or ["agent"]
        parts = []
        for who in shown:
            dollars = format_usd(self.dollars[who]) if self.priced[who] else "cost unknown"
            part = f"{who} {self.tokens[who]:,} tokens {dollars}"
            if who == "agent" and self.sources:
                part += f" ({'/'.join(sorted(self.sources))})"
            parts.append(part)
        priced = any(self.priced[who] for who in shown)
        total = format_usd(sum(self.dollars[who] for who in shown)) if priced else "unknown"
        line = " · ".join([*parts, f"total {total}"])
        if self.unpriced:
            trials = f"{self.unpriced} trial{'' if self.unpriced == 1 else 's'}"
            counted = ", not counted in the total" if priced else ""
            line += (
                f" ({trials} of a model without a price{counted}: "
                "add it under prices: in .vally.yaml)"
            )
        if self.hits or self.misses:
            line += f" · judge cache {self.hits} hits / {self.misses} misses"
        return line


def cost_line(records: Iterable[TrialResultRecord]) -> str:
    """The run's totals: tokens and cost of the agent, of the judges, and the total cost."""
    totals = CostTotals()
    for record in records:
        totals.add(record)
    return totals.line()
