"""``vally experiment run --until-decided``: stop running a variant once it is decided.

The planned trials are scheduled round by round (every stimulus's first trial, then every
second one, ...). Each finished pair, a variant's trial and the baseline's trial of the same
eval, stimulus, model and index, is a win (the variant passed and the baseline failed), a
loss, or a tie (same outcome, or a side that errored or had no graders), and feeds that
variant's anytime-valid sequential sign test (:mod:`vally_compare.statistics.sequential`).
A variant stops as soon as its test decides (better or worse at 5%) or can no longer decide
within the planned trials (futility); its remaining trials, and the baseline's once no
variant needs them, are never started. Trials already running when a variant stops finish
and are saved but do not change its decision; the summary counts their pairs apart, so
that the pairs tested are exactly its wins + losses + ties.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from vally import PlannedTrial, TrialResultRecord, is_graded, model_label
from vally_compare.statistics.sequential import ALPHA, SequentialState, observe

PairKey = tuple[str, str, str, int]
"""(eval, stimulus, model label, trial index)."""


@dataclass
class _Variant:
    """One variant's monitoring: its test state and how many pairs it may still see."""

    planned: int
    state: SequentialState
    observed: int = 0
    """Pairs that fed the test: its wins + losses + ties."""
    late: int = 0
    """Pairs that finished after the test had stopped (trials already running): saved, but
    not counted in the decision."""
    paired: set[PairKey] = field(default_factory=set)
    """The pairs seen, so that a trial observed twice does not pair twice."""


class SequentialGate:
    """The :class:`vally.ExperimentGate` of ``--until-decided``."""

    def __init__(self, baseline: str, trials: Sequence[PlannedTrial], alpha: float = ALPHA) -> None:
        self.baseline = baseline
        self.alpha = alpha
        self.planned_trials = len(trials)
        base_keys = {_key(t) for t in trials if t.key.variant == baseline}
        planned: Counter[str] = Counter(
            t.key.variant for t in trials if t.key.variant != baseline and _key(t) in base_keys
        )
        self.variants = {
            name: _Variant(count, SequentialState()) for name, count in planned.items()
        }
        self.outcomes: dict[tuple[str, PairKey], int | None] = {}
        self.skipped: Counter[str] = Counter()

    def order(self, trials: Sequence[PlannedTrial]) -> list[PlannedTrial]:
        """Round by round: trial index first, plan order within a round."""
        return [
            t for _, t in sorted(enumerate(trials), key=lambda item: (item[1].key.trial, item[0]))
        ]

    def admit(self, trial: PlannedTrial) -> bool:
        """A variant's trial starts while its test is undecided; the baseline's while any
        variant is."""
        variant = trial.key.variant
        if variant == self.baseline:
            needed = any(not v.state.stopped for v in self.variants.values())
        else:
            monitored = self.variants.get(variant)
            needed = monitored is None or not monitored.state.stopped
        if not needed:
            self.skipped[variant] += 1
        return needed

    def observe(self, record: TrialResultRecord) -> None:
        """Record a finished trial and update every pair it completes."""
        variant = record.variant or ""
        key = (
            record.eval_name,
            record.stimulus_name,
            model_label(record.model),
            record.trial_index,
        )
        passed = None
        if is_graded(record) and record.grade_result is not None:
            passed = int(record.grade_result.passed)
        self.outcomes[(variant, key)] = passed
        if variant == self.baseline:
            for name in self.variants:
                if (name, key) in self.outcomes:
                    self._pair(name, key)
        elif variant in self.variants and (self.baseline, key) in self.outcomes:
            self._pair(variant, key)

    def _pair(self, name: str, key: PairKey) -> None:
        base, treat = self.outcomes[(self.baseline, key)], self.outcomes[(name, key)]
        sign = 0 if base is None or treat is None else treat - base
        monitored = self.variants[name]
        if key in monitored.paired:
            return
        monitored.paired.add(key)
        if monitored.state.stopped:
            monitored.late += 1
            return
        monitored.observed += 1
        remaining = max(0, monitored.planned - monitored.observed)
        monitored.state = observe(monitored.state, [sign], remaining=remaining, alpha=self.alpha)

    @property
    def saved(self) -> int:
        """Planned trials never started."""
        return sum(self.skipped.values())

    def lines(self) -> list[str]:
        """The console summary: each variant's decision and what stopping early saved."""
        lines = [f"Sequential (--until-decided; anytime-valid sign test, alpha {self.alpha}):"]
        for name, monitored in self.variants.items():
            state = monitored.state
            status = {
                "better": "better",
                "worse": "worse",
                "futile": "no decision (cannot be decided within the planned trials)",
                "budget": "no decision (planned trials spent)",
                "running": "no decision (run stopped)",
            }[state.status]
            late = (
                f"{monitored.late} more finished after the decision and were not counted; "
                if monitored.late
                else ""
            )
            lines.append(
                f"  {name}: {status} after {monitored.observed} of {monitored.planned} planned "
                f"pairs ({state.wins} wins + {state.losses} losses + {state.ties} ties = "
                f"{monitored.observed} pairs tested; {late}"
                f"always-valid p = {state.p_value:.3f})"
            )
        share = self.saved / self.planned_trials if self.planned_trials else 0.0
        lines.append(
            f"  Saved {self.saved} of {self.planned_trials} planned trials ({share:.0%}): agent "
            "runs and grader calls not made."
        )
        return lines


def _key(trial: PlannedTrial) -> PairKey:
    key = trial.key
    return (key.eval_name, key.stimulus, key.model, key.trial)
