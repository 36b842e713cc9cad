"""Intervals for a difference, and the decisions read off them.

A decision is always read off one two-sided interval for the difference (candidate minus
baseline) at the confidence level ``c``, so the interval printed next to a verdict is the
one that made it and can never contradict it. With the difference oriented so that a gain
is positive (``gain = delta`` when higher is better, ``-delta`` when lower is better) and
its interval ``[g_low, g_high]``:

* **difference**: ``better`` when ``g_low > 0``, ``worse`` when ``g_high < 0``, else
  ``no clear difference``; ``insufficient`` when there is no interval;
* **superiority by a margin** ``m >= 0``: ``pass`` when ``g_low > m``, ``fail`` when
  ``g_high < m`` (the data rule the improvement out), else ``inconclusive``;
* **non-inferiority with a margin** ``m >= 0`` (the largest acceptable loss): ``pass`` when
  ``g_low > -m``, ``fail`` when ``g_high < -m``, else ``inconclusive``.

Reading one end of a two-sided interval at level ``c`` is a one-sided test at level
``(1 - c) / 2``: when the true difference sits exactly at the margin, a method whose
interval covers at its nominal level declares superiority or non-inferiority at most
``(1 - c) / 2`` of the time (2.5% at 95%). ``tests/stats/test_decisions.py`` checks that
rate by seeded simulation.

Two intervals are offered:

* :func:`paired_interval`, over cases (the stimulus is vally's unit of inference): the
  Student t interval of the per-case differences, ``mean ± t(1/2 + c/2, n - 1) · sd /
  sqrt(n)``; for bounded figures (grader scores, pass rates) with one pseudo-case at each
  bound of the difference added, so that it is never zero-width by accident (see
  :func:`vally_compare.statistics.estimates.bounded_interval`);
* :func:`welch_interval`, over repeats (NeMo Gym's method): each repeat of a run is one
  observation (the figure's mean over the cases of that repeat), the two sets of repeats are
  independent, and the interval is Welch's, with the Welch-Satterthwaite degrees of freedom;
  it equals ``scipy.stats.ttest_ind(candidate, baseline, equal_var=False)
  .confidence_interval(c)``. It needs at least two finite values on each side and a spread
  on at least one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from vally_compare.statistics.estimates import Interval, bounded_interval, t_interval
from vally_compare.statistics.power import scipy_stats

DEFAULT_CONFIDENCE = 0.95
"""The confidence level when none is given."""

Direction = Literal["higher", "lower"]
"""Which way a figure is better."""
Verdict = Literal["pass", "fail", "inconclusive"]
"""The outcome of a decision with a margin."""
Difference = Literal["better", "worse", "no clear difference", "insufficient"]
"""What an interval says about a difference without a margin."""


def check_confidence_level(level: float) -> float:
    """``level`` when it lies strictly between 0 and 1.

    Raises:
        ValueError: It does not (or is not a finite number).
    """
    if not (isinstance(level, (int, float)) and math.isfinite(level) and 0 < level < 1):
        raise ValueError(f"a confidence level must lie strictly between 0 and 1, got {level!r}")
    return float(level)


def paired_interval(
    deltas: Sequence[float],
    level: float = DEFAULT_CONFIDENCE,
    bounds: tuple[float, float] | None = None,
) -> Interval | None:
    """The interval of the mean per-case difference (see the module docstring); None with
    fewer than two cases."""
    if bounds is not None:
        return bounded_interval(deltas, bounds, level)
    return t_interval(deltas, level)


def welch_interval(
    baseline: Sequence[float], candidate: Sequence[float], level: float = DEFAULT_CONFIDENCE
) -> Interval | None:
    """Welch's interval for ``mean(candidate) - mean(baseline)``; None unless each side has
    at least two finite values and at least one side has a spread."""
    base = [v for v in baseline if math.isfinite(v)]
    cand = [v for v in candidate if math.isfinite(v)]
    if len(base) < 2 or len(cand) < 2:
        return None
    var_b, var_c = _variance(base) / len(base), _variance(cand) / len(cand)
    se2 = var_b + var_c
    if se2 <= 0:
        return None
    # Welch-Satterthwaite, with the variances as shares of se2 so that tiny spreads
    # do not underflow to 0 / 0
    share_b, share_c = var_b / se2, var_c / se2
    df = 1.0 / (share_b**2 / (len(base) - 1) + share_c**2 / (len(cand) - 1))
    diff = math.fsum(cand) / len(cand) - math.fsum(base) / len(base)
    half = float(scipy_stats().t.ppf(0.5 + level / 2, df)) * math.sqrt(se2)
    return Interval(diff - half, diff + half, level)


def _variance(values: Sequence[float]) -> float:
    mean = math.fsum(values) / len(values)
    return math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)


def oriented(interval: Interval, better: Direction) -> tuple[float, float]:
    """``(g_low, g_high)``: the interval of the gain, positive when the candidate is
    better."""
    if better == "higher":
        return interval.low, interval.high
    return -interval.high, -interval.low


def difference(interval: Interval | None, better: Direction) -> Difference:
    """What the interval says about the difference (see the module docstring)."""
    if interval is None:
        return "insufficient"
    low, high = oriented(interval, better)
    if low > 0:
        return "better"
    if high < 0:
        return "worse"
    return "no clear difference"


def superiority(interval: Interval | None, better: Direction, margin: float = 0.0) -> Verdict:
    """Is the candidate better by more than ``margin`` (in the figure's units)?"""
    if interval is None:
        return "inconclusive"
    low, high = oriented(interval, better)
    if low > margin:
        return "pass"
    if high < margin:
        return "fail"
    return "inconclusive"


def non_inferiority(interval: Interval | None, better: Direction, margin: float) -> Verdict:
    """Is the candidate worse by less than ``margin`` (the largest acceptable loss)?"""
    if interval is None:
        return "inconclusive"
    low, high = oriented(interval, better)
    if low > -margin:
        return "pass"
    if high < -margin:
        return "fail"
    return "inconclusive"
