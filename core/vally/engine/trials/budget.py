"""Budgets: ``--max-cost`` and ``--max-tokens`` stop a run from starting new trials once
what its finished trials spent reaches the limit.

A :class:`BudgetGate` is a :class:`~vally.engine.trials.context.TrialGate`: before a trial
starts it
compares the spending of the finished trials (agent and judge; the records' ``cost.totalUsd``
and ``usage``) with the limit. Trials already running when the limit is reached finish and
are recorded; the trials never started leave no record, and a later ``--resume`` runs them.
An experiment divides the budget evenly across its variants, each stopping on its own share.
A trial whose cost is unknown (a model without a price) counts for its tokens only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from vally.engine.planning.plan import PlannedTrial
from vally.engine.trials.context import TrialGate
from vally.errors import ConfigError
from vally.models.records import TrialResultRecord


@dataclass(frozen=True)
class Budget:
    """The limits of one run (None: no limit of that kind).

    Attributes:
        max_cost: US dollars (``--max-cost``).
        max_tokens: Tokens, agent and judge, input and output (``--max-tokens``).
    """

    max_cost: float | None = None
    max_tokens: int | None = None

    @classmethod
    def from_flags(cls, max_cost: float | None, max_tokens: int | None) -> Budget | None:
        """The budget of the flags, or None when neither is given.

        Raises:
            ConfigError: A limit is not above zero.
        """
        if max_cost is not None and not max_cost > 0:
            raise ConfigError(
                f"--max-cost must be more than 0 (US dollars), got {max_cost}",
                hint="write e.g. --max-cost 2.50",
            )
        if max_tokens is not None and max_tokens < 1:
            raise ConfigError(
                f"--max-tokens must be at least 1, got {max_tokens}",
                hint="write e.g. --max-tokens 200000",
            )
        if max_cost is None and max_tokens is None:
            return None
        return cls(max_cost, max_tokens)

    def share(self, parts: int) -> Budget:
        """This budget divided evenly into ``parts`` (one variant's share)."""
        if parts <= 1:
            return self
        return Budget(
            None if self.max_cost is None else self.max_cost / parts,
            None if self.max_tokens is None else max(1, self.max_tokens // parts),
        )


@dataclass
class Spending:
    """What the finished trials of one budget group spent."""

    cost: float = 0.0
    tokens: int = 0
    refused: int = 0

    def add(self, record: TrialResultRecord) -> None:
        """Count one finished trial."""
        self.cost += record.cost.total_usd or 0.0
        self.tokens += record.usage.agent.total_tokens + record.usage.judge.total_tokens

    def reached(self, budget: Budget) -> str | None:
        """Which limit is reached (``--max-cost 1.00`` ...), or None."""
        if budget.max_cost is not None and self.cost >= budget.max_cost:
            return f"--max-cost {budget.max_cost:g} (${self.cost:,.4f} spent)"
        if budget.max_tokens is not None and self.tokens >= budget.max_tokens:
            return f"--max-tokens {budget.max_tokens} ({self.tokens:,} tokens spent)"
        return None


@dataclass
class BudgetGate:
    """Refuses new trials of a group (a variant; the whole run outside experiments) once
    its share of the budget is spent; passes every other decision to ``inner``.

    Args:
        budget: The run's budget.
        trials: The trials to run (their variants decide the shares).
        inner: Another gate (``--until-decided``) consulted as well.
        spent: Records already finished (a resumed run's), counted first.
    """

    budget: Budget
    trials: Sequence[PlannedTrial]
    inner: TrialGate | None = None
    spent: Iterable[TrialResultRecord] = ()
    groups: dict[str, Spending] = field(default_factory=dict)

    def __post_init__(self) -> None:
        variants = {t.key.variant for t in self.trials} | {r.variant or "" for r in self.spent}
        self.share = self.budget.share(len(variants))
        for record in self.spent:
            self._group(record.variant or "").add(record)

    def _group(self, variant: str) -> Spending:
        return self.groups.setdefault(variant, Spending())

    def order(self, trials: Sequence[PlannedTrial]) -> list[PlannedTrial]:
        """The inner gate's order, else the plan's."""
        return self.inner.order(trials) if self.inner is not None else list(trials)

    def admit(self, trial: PlannedTrial) -> bool:
        """False once the trial's group has spent its share (or the inner gate refuses)."""
        if self.inner is not None and not self.inner.admit(trial):
            return False
        group = self._group(trial.key.variant)
        if group.reached(self.share) is not None:
            group.refused += 1
            return False
        return True

    def observe(self, record: TrialResultRecord) -> None:
        """Count a finished trial's spending."""
        self._group(record.variant or "").add(record)
        if self.inner is not None:
            self.inner.observe(record)

    def stops(self) -> list[str]:
        """One line per group that refused trials: which limit, how many trials not run."""
        lines = []
        for variant, group in sorted(self.groups.items()):
            if not group.refused:
                continue
            reason = group.reached(self.share)
            where = f"variant {variant}: " if variant else ""
            lines.append(f"{where}budget reached, {reason}; {group.refused} trial(s) not started")
        return lines
