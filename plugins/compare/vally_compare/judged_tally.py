"""Running sums behind a comparison's figures, fed one judged pair at a time.

A :class:`PairTally` takes each pair's outcome as it finishes and keeps, per stimulus,
what the figures need (exact sums and counts, and the judged scores), never the pairs'
records: memory grows with the number of stimuli, plus 8 bytes per judged score. Its
figures are those of the whole-list formulas in :mod:`vally_compare.statistics.estimates` to
the last bit: a stimulus mean is the correctly rounded exact sum over its count, which is what
``math.fsum`` gives over the full list, and stimuli are taken in sorted key order, the
order in which the pairs are judged.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from vally_compare.statistics import estimates as stats
from vally_compare.statistics.agreement import OrderAgreement, krippendorff_alpha, order_agreement
from vally_compare.statistics.multiplicity import holm

if TYPE_CHECKING:
    from vally import TrialResultRecord

StimulusKey = tuple[str, str]
"""(eval name, stimulus name)."""

MetricReader = Callable[["TrialResultRecord"], "float | None"]
"""How to read one metric from a trial (None: the trial has no trajectory)."""


class ExactSum:
    """A running sum kept exactly as non-overlapping partials (Shewchuk's algorithm):
    :attr:`value` is the correctly rounded sum of every value added, the same float as
    ``math.fsum`` over all of them."""

    __slots__ = ("count", "partials")

    def __init__(self) -> None:
        self.partials: list[float] = []
        self.count = 0

    def add(self, value: float) -> None:
        """Add one value."""
        x = float(value)
        partials = self.partials
        i = 0
        for y in partials:
            if abs(x) < abs(y):
                x, y = y, x
            high = x + y
            low = y - (high - x)
            if low:
                partials[i] = low
                i += 1
            x = high
        partials[i:] = [x]
        self.count += 1

    @property
    def value(self) -> float:
        """The correctly rounded sum."""
        return math.fsum(self.partials)

    @property
    def mean(self) -> float:
        """The sum over the count (the count must not be zero)."""
        return self.value / self.count


@dataclass
class _Stimulus:
    """What one stimulus contributes to the figures."""

    scores: array[float] = field(default_factory=lambda: array("d"))
    wins: int = 0
    graded: int = 0
    baseline_passed: int = 0
    treatment_passed: int = 0
    metrics: dict[str, tuple[ExactSum, ExactSum, ExactSum]] = field(default_factory=dict)
    """Per metric: the exact sums of the deltas, the baseline and the treatment values."""


@dataclass
class PairTally:
    """The running state of one comparison's figures (see the module docstring)."""

    metrics: tuple[tuple[str, MetricReader], ...]
    stimuli: dict[StimulusKey, _Stimulus] = field(default_factory=dict)
    judged: int = 0
    failed: int = 0
    with_grades: int = 0
    usable_grades: int = 0
    errored_grades: int = 0
    """Pairs left out of McNemar because a side's trial or its grade errored."""
    missing: dict[str, int] = field(default_factory=dict)
    agreement: dict[str | None, OrderAgreement] = field(default_factory=dict)
    panel_units: list[list[float | None]] = field(default_factory=list)
    disagreeing: int = 0
    """Judged ties whose passes did not both answer tie (the two orders disagreed)."""

    def add(
        self,
        key: StimulusKey,
        result: Any,
        baseline: TrialResultRecord,
        treatment: TrialResultRecord,
    ) -> None:
        """Count one pair's outcome (a :class:`vally_compare.judged.PairResult`)."""
        if result.failure is not None:
            self.failed += 1
        if result.score is None:
            return
        self.judged += 1
        stimulus = self.stimuli.get(key)
        if stimulus is None:
            stimulus = self.stimuli[key] = _Stimulus()
        stimulus.scores.append(result.score)
        stimulus.wins += result.score > 0
        self._add_grades(stimulus, baseline, treatment)
        self._add_metrics(stimulus, baseline, treatment)
        self._add_judging(result)

    def _add_grades(
        self, stimulus: _Stimulus, baseline: TrialResultRecord, treatment: TrialResultRecord
    ) -> None:
        """Count the pair in McNemar: both sides graded, or left out for an error when
        either side's trial (its agent or its grade) errored."""
        from vally import is_graded

        errored = _errored(baseline) or _errored(treatment)
        if not errored and (baseline.grade_result is None or treatment.grade_result is None):
            return  # an ungraded trial that did not error: no pass or fail to compare
        self.with_grades += 1
        if errored:
            self.errored_grades += 1
        if not (is_graded(baseline) and is_graded(treatment)):
            return
        self.usable_grades += 1
        assert baseline.grade_result is not None and treatment.grade_result is not None
        stimulus.graded += 1
        stimulus.baseline_passed += baseline.grade_result.passed
        stimulus.treatment_passed += treatment.grade_result.passed

    def _add_metrics(
        self, stimulus: _Stimulus, baseline: TrialResultRecord, treatment: TrialResultRecord
    ) -> None:
        for name, read in self.metrics:
            before, after = read(baseline), read(treatment)
            if before is None or after is None:
                self.missing[name] = self.missing.get(name, 0) + 1
                continue
            sums = stimulus.metrics.get(name)
            if sums is None:
                sums = stimulus.metrics[name] = (ExactSum(), ExactSum(), ExactSum())
            sums[0].add(after - before)
            sums[1].add(before)
            sums[2].add(after)

    def _add_judging(self, result: Any) -> None:
        passes = result.passes
        for first, second in zip(passes[::2], passes[1::2], strict=True):
            model = first.get("judgeModel")
            answer = order_agreement([(str(first["winner"]), str(second["winner"]))])
            self.agreement[model] = self.agreement.get(model, OrderAgreement(0, 0, 0, 0, 0)) + (
                answer
            )
        if result.verdict == "tie" and any(p["winner"] != "tie" for p in passes):
            self.disagreeing += 1
        if result.votes:
            self.panel_units.append([score for _, score in result.votes])

    # ------------------------------------------------------------------------- figures

    def _ordered(self) -> list[tuple[StimulusKey, _Stimulus]]:
        return sorted(self.stimuli.items(), key=lambda item: item[0])

    def score_pairs(self) -> Iterator[tuple[StimulusKey, float]]:
        """``(stimulus, score)`` of every judged pair, stimulus by stimulus."""
        for key, stimulus in self._ordered():
            for score in stimulus.scores:
                yield key, score

    def win_rate(self) -> stats.WinRate:
        """Wins, ties and losses with the interval over per-stimulus win shares."""
        wins = ties = 0
        for stimulus in self.stimuli.values():
            wins += stimulus.wins
            ties += sum(1 for s in stimulus.scores if s == 0)
        shares = [s.wins / len(s.scores) for _, s in self._ordered()]
        counts = stats.WinRate(wins, ties, self.judged - wins - ties)
        return replace(counts, ci=stats.bounded_interval(shares, (0.0, 1.0)))

    def score(self) -> stats.Estimate:
        """The mean score over stimuli, its interval and sign-flip test."""
        means = [(key, math.fsum(s.scores) / len(s.scores)) for key, s in self._ordered()]
        return _per_stimulus(means, self.judged, stats.SCORE_BOUNDS)

    def mcnemar(self) -> stats.McNemarResult | None:
        """McNemar over the stimuli with graded pairs; None when no pair had grades (nor
        an errored trial)."""
        if not self.with_grades:
            return None
        rates = [
            (s.baseline_passed / s.graded, s.treatment_passed / s.graded)
            for _, s in self._ordered()
            if s.graded
        ]
        return stats.mcnemar_from_rates(rates, self.errored_grades)

    def deltas(self) -> list[stats.MetricDelta]:
        """Every metric's delta, Holm-adjusted across the metrics."""
        deltas = [self._delta(name) for name, _ in self.metrics]
        adjusted = holm([d.delta.p_value for d in deltas])
        return [
            replace(d, delta=replace(d.delta, p_adjusted=p))
            for d, p in zip(deltas, adjusted, strict=True)
        ]

    def _delta(self, name: str) -> stats.MetricDelta:
        rows = [(key, s.metrics[name]) for key, s in self._ordered() if name in s.metrics]
        complete = sum(sums[0].count for _, sums in rows)
        estimate = _per_stimulus([(key, sums[0].mean) for key, sums in rows], complete, None)
        base = [sums[1].mean for _, sums in rows]
        treat = [sums[2].mean for _, sums in rows]
        return stats.metric_delta_from_means(
            name,
            estimate,
            math.fsum(base) / len(base) if base else None,
            math.fsum(treat) / len(treat) if treat else None,
            self.missing.get(name, 0),
        )

    def panel_alpha(self) -> float | None:
        """Krippendorff's alpha between panel members' scores (None without a panel)."""
        return krippendorff_alpha(self.panel_units) if self.panel_units else None


def _errored(record: TrialResultRecord) -> bool:
    """The trial failed operationally: its agent (status not ``success``) or its grade."""
    if record.status != "success":
        return True
    return record.grade_result is not None and record.grade_result.errored


def _per_stimulus(
    means: Sequence[tuple[Hashable, float]], pairs: int, bounds: tuple[float, float] | None
) -> stats.Estimate:
    """:func:`stats.tested_mean` of one value per stimulus (its mean), counting ``pairs``."""
    estimate = stats.tested_mean(means, bounds)
    return replace(estimate, n_pairs=pairs) if means else estimate
