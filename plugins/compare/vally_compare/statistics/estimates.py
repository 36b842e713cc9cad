"""Statistics for comparing a treatment with a baseline.

The stimulus is the unit of inference. Trials of one stimulus share its difficulty, so they
are not independent samples: every figure here first averages within each stimulus, then
treats the per-stimulus values as the sample. Each result says how many stimuli and pairs
it rests on. With fewer than two stimuli there is no interval: the result says
``insufficient`` instead of inventing one.

Formulas (see ``docs/statistics.md``):

* decisions (labels, ``--fail-on-regression``): the exact sign-flip permutation test over
  the per-stimulus values (:mod:`vally_compare.statistics.signflip`), Holm-adjusted across
  the family (:mod:`vally_compare.statistics.multiplicity`); a difference is declared only
  when the adjusted two-sided p-value is at most 0.05 (a one-sided 2.5% gate);
* mean with a 95% CI: Student t interval over the m per-stimulus means,
  ``mean ± t(0.975, m-1) · sd / sqrt(m)`` (sd with ddof=1); for values bounded in
  ``[lo, hi]`` (judge scores, pass-rate differences, win shares) the interval is computed
  with one pseudo-stimulus at each bound added (Agresti and Caffo's "add one success and one
  failure"), so that it is never zero-width by accident, and clipped to ``[lo, hi]``;
* McNemar exact test on pass/fail flips: two-sided binomial test of the discordant counts
  ``b`` (baseline passed, treatment failed) and ``c`` (the reverse) against p = 0.5,
  ``p = min(1, 2 · BinomCDF(min(b, c); b + c, 0.5))``; a stimulus with several trials
  passes when its mean pass rate is above 0.5, fails below, and exactly 0.5 is a tie that
  is left out (and counted);
* metric deltas: per pair ``treatment - baseline``, averaged per stimulus, then the t
  interval and the sign-flip test; ``high_variance`` when the interval reaches zero (the
  sign of the delta is not established at this sample size).

numpy and scipy are imported on first use.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, replace

from vally_compare.statistics.power import ALPHA, scipy_stats, smallest_detectable
from vally_compare.statistics.signflip import SignFlipResult, sign_flip_interval, sign_flip_test

CONFIDENCE = 0.95
SCORE_BOUNDS = (-1.0, 1.0)
"""The range of judge scores and of pass-rate differences."""


@dataclass(frozen=True)
class Interval:
    """A two-sided confidence interval."""

    low: float
    high: float
    level: float = CONFIDENCE

    def excludes_zero(self) -> bool:
        """True when zero lies outside the interval."""
        return self.low > 0 or self.high < 0


def interval_json(interval: Interval | None) -> dict[str, float] | None:
    """``{"low", "high", "level"}`` of an interval, or None: its form in every record."""
    if interval is None:
        return None
    return {"low": interval.low, "high": interval.high, "level": interval.level}


@dataclass(frozen=True)
class Estimate:
    """A mean over stimuli with its interval.

    Attributes:
        mean: Mean of the per-stimulus means; None with no data.
        ci: The t interval; None when fewer than two stimuli (``insufficient``).
        std: Standard deviation (ddof=1) of the per-stimulus means; None below two.
        n_stimuli: How many stimuli the figure rests on.
        n_pairs: How many pairs (trials) the figure rests on.
        test: The sign-flip test of the per-stimulus values against zero (None when not
            tested).
        p_adjusted: The Holm-adjusted two-sided p-value within its family (None until
            adjusted).
        mde: Smallest mean detectable with 80% power at this sample size and spread; None
            when no difference is detectable at this n: the test cannot reach 0.05 with so
            few stimuli, or (on a bounded scale) the figure exceeds the largest mean the
            scale allows, so that not even the largest possible difference would be
            detected with 80% power.
        decision_ci: The interval that inverts the sign-flip test at the interval's level
            (:func:`vally_compare.statistics.signflip.sign_flip_interval`): zero lies outside it
            exactly when the test rejects, so it is the one printed next to a decision;
            None when not tested, or when unbounded values are too few for the test to
            reject at all.
    """

    mean: float | None
    ci: Interval | None
    std: float | None
    n_stimuli: int
    n_pairs: int
    test: SignFlipResult | None = None
    p_adjusted: float | None = None
    mde: float | None = None
    decision_ci: Interval | None = None

    @property
    def insufficient(self) -> bool:
        """True when there are too few stimuli for an interval."""
        return self.ci is None

    @property
    def p_value(self) -> float | None:
        """The unadjusted two-sided sign-flip p-value."""
        return None if self.test is None else self.test.p_two_sided

    @property
    def decision_p(self) -> float | None:
        """The p-value decisions use: adjusted when adjusted, else the raw one."""
        return self.p_adjusted if self.p_adjusted is not None else self.p_value

    def significant(self, alpha: float = ALPHA) -> bool:
        """True when the (adjusted) two-sided p-value is at most ``alpha`` and the decision
        interval (when there is one) excludes zero on the mean's side, so no decision is
        printed beside an interval that contradicts it."""
        p = self.decision_p
        if p is None or p > alpha or not self.mean:
            return False
        ci = self.decision_ci
        return ci is None or (ci.low > 0 if self.mean > 0 else ci.high < 0)

    @property
    def direction(self) -> int:
        """+1 or -1 when significant at :data:`ALPHA` in that direction, else 0."""
        if not self.significant() or self.mean is None:
            return 0
        return 1 if self.mean > 0 else -1


@dataclass(frozen=True)
class WinRate:
    """Wins, ties and losses of the treatment over judged pairs."""

    wins: int
    ties: int
    losses: int
    ci: Interval | None = None
    """95% interval of the win rate over stimuli (per-stimulus win shares, bounded
    interval in [0, 1]); None below two stimuli."""

    @property
    def total(self) -> int:
        """Judged pairs."""
        return self.wins + self.ties + self.losses

    @property
    def win_rate(self) -> float | None:
        """wins / judged pairs; None with no pairs."""
        return self.wins / self.total if self.total else None


@dataclass(frozen=True)
class McNemarResult:
    """Exact McNemar test on discordant pass/fail outcomes.

    Attributes:
        b: Units where the baseline passed and the treatment failed (regressions).
        c: Units where the baseline failed and the treatment passed (improvements).
        n_units: Units compared (stimuli, or pairs with one trial each).
        n_ties: Stimuli left out because their mean pass rate was exactly 0.5 on a side.
        p_value: Two-sided exact p-value; 1.0 when there are no discordant units; None
            with no units at all.
    """

    b: int
    c: int
    n_units: int
    n_ties: int
    p_value: float | None
    n_errored: int = 0
    """Pairs left out because a side's trial errored: its agent, or its grade."""

    @property
    def discordant(self) -> int:
        """b + c."""
        return self.b + self.c

    @property
    def min_p_value(self) -> float:
        """The smallest p-value reachable with this many discordant units,
        ``min(1, 2 · 0.5^(b + c))``: below 6 discordant units p cannot fall below 0.05."""
        return min(1.0, 2.0 * 0.5**self.discordant)


@dataclass(frozen=True)
class MetricDelta:
    """treatment - baseline for one metric."""

    metric: str
    baseline_mean: float | None
    treatment_mean: float | None
    delta: Estimate
    high_variance: bool
    missing: int = 0
    """Pairs left out because a side had no value (an errored trial without metrics)."""

    @property
    def relative(self) -> float | None:
        """delta / baseline mean, when the baseline mean is not zero."""
        if self.delta.mean is None or not self.baseline_mean:
            return None
        return self.delta.mean / self.baseline_mean


def t_interval(values: Sequence[float], level: float = CONFIDENCE) -> Interval | None:
    """Student t interval for the mean of ``values``; None with fewer than two values."""
    n = len(values)
    if n < 2:
        return None
    sps = scipy_stats()

    mean = math.fsum(values) / n
    sd = _sd(values)
    half = float(sps.t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n)
    return Interval(mean - half, mean + half, level)


def _sd(values: Sequence[float]) -> float:
    n = len(values)
    mean = math.fsum(values) / n
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))


def bounded_interval(
    values: Sequence[float], bounds: tuple[float, float], level: float = CONFIDENCE
) -> Interval | None:
    """The t interval of ``values`` with one pseudo-value at each bound added, clipped to
    the bounds; None with fewer than two values. Never zero-width by accident: identical
    values still leave the interval the width the pseudo-values give it."""
    if len(values) < 2:
        return None
    low, high = bounds
    padded = t_interval([*values, low, high], level)
    assert padded is not None
    return Interval(max(low, padded.low), min(high, padded.high), level)


def group_means(pairs: Iterable[tuple[Hashable, float]]) -> dict[Hashable, float]:
    """Mean value per group key (stimulus), in first-seen order."""
    groups: dict[Hashable, list[float]] = defaultdict(list)
    for key, value in pairs:
        groups[key].append(float(value))
    return {key: math.fsum(vals) / len(vals) for key, vals in groups.items()}


def clustered_mean(pairs: Sequence[tuple[Hashable, float]], level: float = CONFIDENCE) -> Estimate:
    """Mean over stimuli of per-stimulus means, with a t interval over the stimuli.

    Args:
        pairs: ``(stimulus, value)`` for each judged pair.
        level: Confidence level.
    """
    means = list(group_means(pairs).values())
    if not means:
        return Estimate(None, None, None, 0, 0)
    mean = math.fsum(means) / len(means)
    std = _sd(means) if len(means) >= 2 else None
    return Estimate(mean, t_interval(means, level), std, len(means), len(pairs))


def tested_mean(
    pairs: Sequence[tuple[Hashable, float]],
    bounds: tuple[float, float] | None = None,
    level: float = CONFIDENCE,
) -> Estimate:
    """:func:`clustered_mean` with the sign-flip test of the per-stimulus means and the
    smallest detectable mean; with ``bounds`` the interval comes from the bounded (padded)
    form, and so does the spread behind the MDE when the values are all equal, so that
    neither is zero by accident, and an MDE beyond the largest mean the bounds allow is
    None (not detectable at this n), never a figure off the scale."""
    base = clustered_mean(pairs, level)
    if base.mean is None:
        return base
    means = list(group_means(pairs).values())
    ci, spread = base.ci, base.std
    if bounds is not None and len(means) >= 2:
        ci = bounded_interval(means, bounds, level)
        if not spread:  # identical values: the padded spread, never a zero MDE
            spread = _sd([*means, *bounds])
    mde = smallest_detectable(spread, len(means)) if spread is not None else None
    if mde is not None and bounds is not None and mde > max(abs(b) for b in bounds):
        mde = None  # beyond the largest mean the scale allows: nothing is detectable at this n
    inverted = sign_flip_interval(means, level, bounds)
    decision_ci = None if inverted is None else Interval(inverted[0], inverted[1], level)
    return replace(base, ci=ci, test=sign_flip_test(means), mde=mde, decision_ci=decision_ci)


def win_tie_loss(scores: Iterable[float]) -> WinRate:
    """Count positive (win), zero (tie) and negative (loss) treatment-relative scores."""
    wins = ties = losses = 0
    for score in scores:
        if score > 0:
            wins += 1
        elif score < 0:
            losses += 1
        else:
            ties += 1
    return WinRate(wins, ties, losses)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for discordant counts ``b`` and ``c``."""
    if b < 0 or c < 0:
        raise ValueError("discordant counts cannot be negative")
    n = b + c
    if n == 0:
        return 1.0
    sps = scipy_stats()

    return float(min(1.0, 2.0 * sps.binom.cdf(min(b, c), n, 0.5)))


def mcnemar_from_pairs(
    pairs: Sequence[tuple[Hashable, bool, bool]], n_errored: int = 0
) -> McNemarResult:
    """McNemar over stimuli from ``(stimulus, baseline_passed, treatment_passed)`` pairs.

    Pairs whose grade errored must be left out by the caller and counted in ``n_errored``
    (an errored grade is neither a pass nor a fail).

    Several trials of a stimulus collapse to one outcome per side: pass when the mean pass
    rate is above 0.5, fail below; a stimulus at exactly 0.5 on either side is a tie and is
    left out.
    """
    base = group_means((key, 1.0 if b else 0.0) for key, b, _ in pairs)
    treat = group_means((key, 1.0 if t else 0.0) for key, _, t in pairs)
    return mcnemar_from_rates([(base[key], treat[key]) for key in base], n_errored)


def mcnemar_from_rates(rates: Sequence[tuple[float, float]], n_errored: int = 0) -> McNemarResult:
    """McNemar over stimuli from each stimulus's ``(baseline pass rate, treatment pass
    rate)`` (see :func:`mcnemar_from_pairs`: above 0.5 passes, at exactly 0.5 a tie)."""
    if not rates:
        return McNemarResult(0, 0, 0, 0, None, n_errored)
    b_count = c_count = ties = 0
    for rb, rt in rates:
        if rb == 0.5 or rt == 0.5:
            ties += 1
            continue
        if rb > 0.5 and rt < 0.5:
            b_count += 1
        elif rb < 0.5 and rt > 0.5:
            c_count += 1
    units = len(rates) - ties
    p_value = mcnemar_exact(b_count, c_count) if units else None
    return McNemarResult(b_count, c_count, units, ties, p_value, n_errored)


def metric_delta(
    metric: str,
    pairs: Sequence[tuple[Hashable, float | None, float | None]],
    level: float = CONFIDENCE,
) -> MetricDelta:
    """Delta of one metric from ``(stimulus, baseline_value, treatment_value)`` pairs.

    A pair with a missing value on either side (None: the trial errored before it had
    metrics) is left out and counted in ``missing``, never read as zero.
    """
    complete = [(key, b, t) for key, b, t in pairs if b is not None and t is not None]
    deltas = tested_mean([(key, t - b) for key, b, t in complete], level=level)
    base = group_means((key, b) for key, b, _ in complete)
    treat = group_means((key, t) for key, _, t in complete)
    base_mean = math.fsum(base.values()) / len(base) if base else None
    treat_mean = math.fsum(treat.values()) / len(treat) if treat else None
    return metric_delta_from_means(
        metric, deltas, base_mean, treat_mean, len(pairs) - len(complete)
    )


def metric_delta_from_means(
    metric: str,
    deltas: Estimate,
    baseline_mean: float | None,
    treatment_mean: float | None,
    missing: int,
) -> MetricDelta:
    """A :class:`MetricDelta` from its tested delta estimate and the two sides' means over
    stimuli; high variance when the delta is non-zero but its interval includes zero."""
    high_variance = bool(deltas.mean) and (deltas.ci is None or not deltas.ci.excludes_zero())
    return MetricDelta(metric, baseline_mean, treatment_mean, deltas, high_variance, missing)


def win_rate_interval(
    scores: Sequence[tuple[Hashable, float]], level: float = CONFIDENCE
) -> Interval | None:
    """95% interval of the win rate: per-stimulus win shares, bounded interval in [0, 1]."""
    shares = list(group_means((key, 1.0 if s > 0 else 0.0) for key, s in scores).values())
    return bounded_interval(shares, (0.0, 1.0), level)


def is_significant_regression(estimate: Estimate, alpha: float = ALPHA) -> bool:
    """A negative mean whose sign-flip test (Holm-adjusted when adjusted) rejects at
    ``alpha`` two-sided, i.e. a one-sided ``alpha / 2`` gate."""
    return estimate.mean is not None and estimate.mean < 0 and estimate.significant(alpha)
