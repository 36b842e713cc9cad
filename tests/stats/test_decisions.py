"""The intervals of a difference and the decisions read off them.

Intervals are checked against scipy; the decisions by their truth tables, by a property
test (a verdict never contradicts the interval printed next to it) and by seeded
simulation: with the true difference exactly at the margin, superiority and
non-inferiority are declared at most ``alpha = 1 - confidence`` of the time (the nominal
one-sided rate is ``alpha / 2``; Monte Carlo slack is allowed above that, never above
``alpha``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import stats as sps

from tests.stats.simulate import lower_bound, upper_bound
from vally_compare.statistics.decisions import (
    Direction,
    Verdict,
    check_confidence_level,
    difference,
    non_inferiority,
    oriented,
    paired_interval,
    superiority,
    welch_interval,
)
from vally_compare.statistics.estimates import Interval

LEVELS = (0.95, 0.90)
SIZES = (5, 10, 30)
REPEATS = (2, 5, 10)
REPS = 2_000
"""Seeded data sets per configuration of the paired simulations."""
WELCH_REPS = 1_500
"""Seeded data sets per configuration of the Welch simulations."""
BOUNDS = (-1.0, 1.0)


def scipy_welch(baseline: Sequence[float], candidate: Sequence[float], level: float) -> Interval:
    ci = sps.ttest_ind(candidate, baseline, equal_var=False).confidence_interval(level)
    return Interval(float(ci.low), float(ci.high), level)


def scipy_paired(values: Sequence[float], level: float) -> Interval:
    ci = sps.ttest_1samp(values, 0.0).confidence_interval(level)
    return Interval(float(ci.low), float(ci.high), level)


def assert_same(got: Interval | None, expected: Interval, tol: float = 1e-9) -> None:
    assert got is not None
    assert got.low == pytest.approx(expected.low, abs=tol)
    assert got.high == pytest.approx(expected.high, abs=tol)
    assert got.level == expected.level


# --------------------------------------------------------------------------- Welch

WELCH_DATA: list[tuple[list[float], list[float]]] = [
    ([0.50, 0.55], [0.60, 0.72]),
    ([0.50, 0.52, 0.49], [0.40, 0.90, 0.65, 0.71, 0.30]),
    ([0.1, 0.4, 0.35, 0.2, 0.25, 0.3, 0.15], [0.31, 0.33]),
    ([0.62, 0.64, 0.61, 0.66, 0.63, 0.60, 0.65, 0.62, 0.64, 0.61], [0.2, 0.9, 0.5, 0.7]),
    ([12.0, 15.5, 9.0, 20.25, 11.0, 13.0], [30.0, 4.0, 18.0, 26.0, 7.5, 22.0, 14.0, 9.5]),
    ([0.8, 0.8, 0.8], [0.7, 0.75, 0.9]),
]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("baseline", "candidate"), WELCH_DATA)
@pytest.mark.filterwarnings("ignore:Precision loss")
def test_welch_interval_is_scipys(
    baseline: list[float], candidate: list[float], level: float
) -> None:
    expected = scipy_welch(baseline, candidate, level)
    assert_same(welch_interval(baseline, candidate, level), expected)


def test_welch_interval_orientation_is_candidate_minus_baseline() -> None:
    interval = welch_interval([0.1, 0.2, 0.15], [0.8, 0.9, 0.85])
    assert interval is not None and interval.low > 0.5
    swapped = welch_interval([0.8, 0.9, 0.85], [0.1, 0.2, 0.15])
    assert swapped is not None
    assert swapped.low == pytest.approx(-interval.high)
    assert swapped.high == pytest.approx(-interval.low)


@pytest.mark.filterwarnings("ignore:Precision loss")
def test_welch_interval_needs_two_values_a_side_and_a_spread() -> None:
    assert welch_interval([0.5], [0.4, 0.6]) is None
    assert welch_interval([0.4, 0.6], [0.5]) is None
    assert welch_interval([], []) is None
    assert welch_interval([0.5, 0.5, 0.5], [0.7, 0.7]) is None
    # a spread on one side is enough
    expected = scipy_welch([0.5] * 3, [0.6, 0.8], 0.95)
    assert_same(welch_interval([0.5, 0.5, 0.5], [0.6, 0.8]), expected)


@pytest.mark.filterwarnings("ignore:Precision loss")
@pytest.mark.parametrize("spread", [1e-85, 1e-120, 1e-150])
def test_welch_interval_with_a_tiny_spread(spread: float) -> None:
    """The degrees of freedom of a spread whose square underflows are still computed."""
    baseline, candidate = [0.0, spread], [0.5, 0.5 + spread]
    assert_same(welch_interval(baseline, candidate), scipy_welch(baseline, candidate, 0.95))
    assert_same(welch_interval(baseline, [0.5, 0.5]), scipy_welch(baseline, [0.5, 0.5], 0.95))


def test_welch_interval_drops_values_that_are_not_finite() -> None:
    baseline, candidate = [0.4, math.nan, 0.5, 0.45], [0.7, 0.6, math.inf, 0.8]
    expected = scipy_welch([0.4, 0.5, 0.45], [0.7, 0.6, 0.8], 0.9)
    assert_same(welch_interval(baseline, candidate, 0.9), expected)
    assert welch_interval([0.4, math.nan], [0.5, 0.6]) is None


# --------------------------------------------------------------------------- paired

PAIRED_DATA: list[list[float]] = [
    [0.1, -0.2],
    [0.25, 0.0, 0.5, 0.125, -0.25],
    [0.3, 0.1, 0.2, 0.4, 0.0, 0.1, 0.3, 0.2, 0.25, 0.15],
    [-1.0, 1.0, 0.0, 0.5, -0.5, 1.0, 1.0],
]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("values", PAIRED_DATA)
def test_paired_interval_is_the_one_sample_t_interval(values: list[float], level: float) -> None:
    assert_same(paired_interval(values, level), scipy_paired(values, level))


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("values", [*PAIRED_DATA, [0.0, 0.0, 0.0], [1.0, 1.0], [0.9, 1.0, 1.0]])
def test_bounded_paired_interval_adds_a_pseudo_value_at_each_bound(
    values: list[float], level: float
) -> None:
    padded = scipy_paired([*values, *BOUNDS], level)
    expected = Interval(max(BOUNDS[0], padded.low), min(BOUNDS[1], padded.high), level)
    assert_same(paired_interval(values, level, BOUNDS), expected)


def test_bounded_paired_interval_is_clipped_and_never_zero_width() -> None:
    interval = paired_interval([1.0, 1.0], 0.95, BOUNDS)
    assert interval == Interval(-1.0, 1.0, 0.95)  # the padded interval overshoots both bounds
    same = paired_interval([0.0] * 8, 0.95, BOUNDS)
    assert same is not None and same.low < 0 < same.high
    # without bounds, identical values give a zero-width interval at their mean
    assert paired_interval([0.25] * 4, 0.95) == Interval(0.25, 0.25, 0.95)


@pytest.mark.parametrize("bounds", [None, BOUNDS])
def test_paired_interval_needs_two_cases(bounds: tuple[float, float] | None) -> None:
    assert paired_interval([], 0.95, bounds) is None
    assert paired_interval([0.3], 0.95, bounds) is None
    assert paired_interval([0.3, 0.1], 0.95, bounds) is not None


# --------------------------------------------------------------------------- truth tables

# (interval, better, margin) -> (difference, superiority, non-inferiority)
NCD = "no clear difference"
TRUTH: list[tuple[Interval | None, Direction, float, tuple[str, Verdict, Verdict]]] = [
    # higher is better
    (Interval(0.10, 0.30), "higher", 0.0, ("better", "pass", "pass")),
    (Interval(0.10, 0.30), "higher", 0.05, ("better", "pass", "pass")),
    (Interval(0.10, 0.30), "higher", 0.10, ("better", "inconclusive", "pass")),  # low at m
    (Interval(0.10, 0.30), "higher", 0.30, ("better", "inconclusive", "pass")),  # high at m
    (Interval(0.10, 0.30), "higher", 0.35, ("better", "fail", "pass")),
    (Interval(-0.05, 0.20), "higher", 0.0, (NCD, "inconclusive", "inconclusive")),
    (Interval(-0.05, 0.20), "higher", 0.05, (NCD, "inconclusive", "inconclusive")),
    (Interval(-0.05, 0.20), "higher", 0.06, (NCD, "inconclusive", "pass")),
    (Interval(0.0, 0.20), "higher", 0.0, (NCD, "inconclusive", "inconclusive")),
    (Interval(-0.20, 0.0), "higher", 0.0, (NCD, "inconclusive", "inconclusive")),
    (Interval(-0.30, -0.10), "higher", 0.0, ("worse", "fail", "fail")),
    (Interval(-0.30, -0.10), "higher", 0.10, ("worse", "fail", "inconclusive")),  # high at -m
    (Interval(-0.30, -0.10), "higher", 0.30, ("worse", "fail", "inconclusive")),  # low at -m
    (Interval(-0.30, -0.10), "higher", 0.31, ("worse", "fail", "pass")),
    # lower is better: the gain is minus the difference
    (Interval(-0.30, -0.10), "lower", 0.0, ("better", "pass", "pass")),
    (Interval(-0.30, -0.10), "lower", 0.10, ("better", "inconclusive", "pass")),
    (Interval(-0.30, -0.10), "lower", 0.35, ("better", "fail", "pass")),
    (Interval(0.10, 0.30), "lower", 0.0, ("worse", "fail", "fail")),
    (Interval(0.10, 0.30), "lower", 0.10, ("worse", "fail", "inconclusive")),
    (Interval(0.10, 0.30), "lower", 0.30, ("worse", "fail", "inconclusive")),
    (Interval(0.10, 0.30), "lower", 0.50, ("worse", "fail", "pass")),
    (Interval(-50.0, 20.0), "lower", 0.0, (NCD, "inconclusive", "inconclusive")),
    (Interval(-50.0, 20.0), "lower", 25.0, (NCD, "inconclusive", "pass")),
    (Interval(-50.0, 20.0), "lower", 60.0, (NCD, "fail", "pass")),
    (Interval(-50.0, 20.0), "lower", 20.0, (NCD, "inconclusive", "inconclusive")),
    # no interval
    (None, "higher", 0.0, ("insufficient", "inconclusive", "inconclusive")),
    (None, "lower", 0.1, ("insufficient", "inconclusive", "inconclusive")),
]


@pytest.mark.parametrize(("interval", "better", "margin", "expected"), TRUTH)
def test_decision_truth_table(
    interval: Interval | None, better: Direction, margin: float, expected: tuple[str, str, str]
) -> None:
    got = (
        difference(interval, better),
        superiority(interval, better, margin),
        non_inferiority(interval, better, margin),
    )
    assert got == expected


def test_superiority_margin_defaults_to_zero() -> None:
    assert superiority(Interval(0.01, 0.2), "higher") == "pass"
    assert superiority(Interval(-0.2, -0.01), "lower") == "pass"
    assert superiority(Interval(0.0, 0.2), "higher") == "inconclusive"


def test_oriented_gain() -> None:
    assert oriented(Interval(-0.3, 0.1), "higher") == (-0.3, 0.1)
    assert oriented(Interval(-0.3, 0.1), "lower") == (-0.1, 0.3)


@pytest.mark.parametrize("level", [0, 1, -0.1, 1.5, math.nan, math.inf, -math.inf, "0.9", None])
def test_check_confidence_level_rejects(level: object) -> None:
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        check_confidence_level(level)  # type: ignore[arg-type]


def test_check_confidence_level_accepts() -> None:
    assert check_confidence_level(0.9) == 0.9
    assert check_confidence_level(0.999) == 0.999
    assert isinstance(check_confidence_level(0.5), float)


# --------------------------------------------------------------------------- simulation


def bound(reps: int, alpha: float) -> float:
    """The largest declared rate accepted: the nominal one-sided rate ``alpha / 2`` plus
    Monte Carlo slack (its 99.9% binomial quantile), never more than ``alpha``."""
    return min(alpha, upper_bound(reps, alpha / 2))


Decide = Callable[[Interval | None], Verdict]


def intervals_of(
    rows: np.ndarray, level: float, bounds: tuple[float, float] | None
) -> list[Interval | None]:
    """The paired interval of each row (one data set of per-case differences)."""
    return [paired_interval(row, level, bounds) for row in rows.tolist()]


def pass_share(intervals: Sequence[Interval | None], decide: Decide) -> float:
    """Share of the intervals on which ``decide`` says ``pass``."""
    return sum(decide(i) == "pass" for i in intervals) / len(intervals)


def declared_rate(
    rows: np.ndarray, level: float, bounds: tuple[float, float] | None, decide: Decide
) -> float:
    """Share of rows where ``decide`` of the paired interval is ``pass``."""
    return pass_share(intervals_of(rows, level, bounds), decide)


def negated(interval: Interval | None) -> Interval | None:
    """The interval of minus the difference."""
    return None if interval is None else Interval(-interval.high, -interval.low, interval.level)


def pass_rate_differences(
    rng: np.random.Generator, reps: int, n: int, shift: float, runs: int = 3
) -> np.ndarray:
    """Per-case differences of pass rates (candidate - baseline) of ``reps`` data sets of
    ``n`` stimuli, ``runs`` repeats a side. A stimulus passes in the baseline with
    probability ``p`` (spread over ``[shift, 1]``, many near the ends) and in the candidate
    with ``p - shift``, so the true mean difference is exactly ``-shift``."""
    p = shift + (1.0 - shift) * rng.beta(0.8, 0.8, (reps, n))
    base = rng.binomial(runs, p) / runs
    cand = rng.binomial(runs, p - shift) / runs
    return cand - base


@pytest.mark.parametrize("level", LEVELS)
def test_non_inferiority_at_the_margin_holds_its_level_normal(level: float) -> None:
    alpha, margin = 1 - level, 0.1
    rng = np.random.default_rng(20260101)
    for n in SIZES:
        intervals = intervals_of(rng.normal(-margin, 0.2, (REPS, n)), level, None)
        rate = pass_share(intervals, lambda i: non_inferiority(i, "higher", margin))
        # the exact t interval of normal data spends its one-sided level, no more, no less
        assert lower_bound(REPS, alpha / 2) <= rate <= bound(REPS, alpha), (n, rate)
        # a lower-is-better figure (minus the difference) is declared exactly as often
        lower = [negated(i) for i in intervals]
        assert pass_share(lower, lambda i: non_inferiority(i, "lower", margin)) == rate


@pytest.mark.parametrize("level", LEVELS)
def test_superiority_at_zero_difference_holds_its_level_normal(level: float) -> None:
    alpha = 1 - level
    rng = np.random.default_rng(20260102)
    for n in SIZES:
        rows = rng.normal(0.0, 0.2, (REPS, n))
        rate = declared_rate(rows, level, None, lambda i: superiority(i, "higher"))
        assert lower_bound(REPS, alpha / 2) <= rate <= bound(REPS, alpha), (n, rate)


@pytest.mark.parametrize("level", LEVELS)
def test_non_inferiority_at_the_margin_holds_its_level_pass_rates(level: float) -> None:
    alpha, margin = 1 - level, 0.1
    rng = np.random.default_rng(20260103)
    for n in SIZES:
        rows = pass_rate_differences(rng, REPS, n, margin)
        assert rows.min() >= -1 and rows.max() <= 1
        assert abs(rows.mean() + margin) < 0.01  # the generator sits at the margin
        rate = declared_rate(rows, level, BOUNDS, lambda i: non_inferiority(i, "higher", margin))
        assert rate <= bound(REPS, alpha), (n, rate)


@pytest.mark.parametrize("level", LEVELS)
def test_superiority_at_zero_difference_holds_its_level_pass_rates(level: float) -> None:
    alpha = 1 - level
    rng = np.random.default_rng(20260104)
    for n in SIZES:
        rows = pass_rate_differences(rng, REPS, n, 0.0)
        rate = declared_rate(rows, level, BOUNDS, lambda i: superiority(i, "higher"))
        assert rate <= bound(REPS, alpha), (n, rate)


def test_the_simulated_decisions_have_power_away_from_the_margin() -> None:
    """The level checks above could pass with a decision that never passes; this one
    could not."""
    rng = np.random.default_rng(20260105)
    margin, reps = 0.1, 500
    # true difference 0: non-inferior by 0.1 with 30 stimuli of sd 0.15 (power ~ 0.94)
    rows = rng.normal(0.0, 0.15, (reps, 30))
    assert declared_rate(rows, 0.95, None, lambda i: non_inferiority(i, "higher", margin)) > 0.8
    # pass rates: candidate better by 0.3 on every stimulus, 30 stimuli
    rows = -pass_rate_differences(rng, reps, 30, 0.3)
    assert declared_rate(rows, 0.95, BOUNDS, lambda i: superiority(i, "higher")) > 0.8


def repeat_means_pass_rates(
    rng: np.random.Generator, reps: int, runs: int, stimuli: int = 20
) -> tuple[np.ndarray, np.ndarray]:
    """Per-repeat pass rates (mean over the same ``stimuli`` in both runs) of ``reps``
    A/A pairs of runs with ``runs`` repeats each."""
    p = rng.beta(0.8, 0.8, (reps, 1, stimuli))
    base = (rng.random((reps, runs, stimuli)) < p).mean(axis=2)
    cand = (rng.random((reps, runs, stimuli)) < p).mean(axis=2)
    return base, cand


def welch_rate(base: np.ndarray, cand: np.ndarray, level: float) -> float:
    passes = sum(
        superiority(welch_interval(b, c, level), "higher") == "pass"
        for b, c in zip(base.tolist(), cand.tolist(), strict=True)
    )
    return passes / len(base)


@pytest.mark.parametrize("level", LEVELS)
def test_welch_superiority_at_zero_difference_holds_its_level(level: float) -> None:
    alpha = 1 - level
    rng = np.random.default_rng(20260106)
    for runs in REPEATS:
        base, cand = repeat_means_pass_rates(rng, WELCH_REPS, runs)
        rate = welch_rate(base, cand, level)
        assert rate <= bound(WELCH_REPS, alpha), ("pass rates", runs, rate)
        # unequal variances: the candidate's repeats spread four times as much
        base = rng.normal(0.5, 0.02, (WELCH_REPS, runs))
        cand = rng.normal(0.5, 0.08, (WELCH_REPS, runs))
        rate = welch_rate(base, cand, level)
        assert rate <= bound(WELCH_REPS, alpha), ("unequal variances", runs, rate)


# --------------------------------------------------------------------------- property

unit_floats = st.floats(min_value=-1.0, max_value=1.0, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(unit_floats, min_size=0, max_size=40),
    level=st.floats(min_value=0.5, max_value=0.999, exclude_min=True),
    margin=st.floats(min_value=0.0, max_value=2.0),
    better=st.sampled_from(["higher", "lower"]),
    bounded=st.booleans(),
)
def test_a_verdict_never_contradicts_its_interval(
    values: list[float], level: float, margin: float, better: Direction, bounded: bool
) -> None:
    interval = paired_interval(values, level, BOUNDS if bounded else None)
    assert (interval is None) == (len(values) < 2)
    diff = difference(interval, better)
    sup = superiority(interval, better, margin)
    ni = non_inferiority(interval, better, margin)
    assert (diff == "insufficient") == (interval is None)
    if interval is None:
        assert sup == ni == "inconclusive"
        return
    assert interval.level == level
    # the t interval is centred on the mean of the values, the bounded one on the mean
    # of the values and the two pseudo-values, and stays within the bounds
    centre = math.fsum([*values, *BOUNDS] if bounded else values) / (len(values) + 2 * bounded)
    assert interval.low <= centre + 1e-12 and centre - 1e-12 <= interval.high
    if bounded:
        assert BOUNDS[0] <= interval.low <= interval.high <= BOUNDS[1]
    low, high = oriented(interval, better)
    assert low <= high
    assert (sup == "pass") == (low > margin)
    assert (sup == "fail") == (high < margin)
    assert (ni == "pass") == (low > -margin)
    assert (ni == "fail") == (high < -margin)
    assert (diff == "better") == (low > 0)
    assert (diff == "worse") == (high < 0)
    # a decision read at a margin never contradicts the one without it
    if sup == "pass":
        assert diff == "better"
        assert ni == "pass"
    if ni == "fail":
        assert diff == "worse" and sup == "fail"


@settings(max_examples=200, deadline=None)
@given(
    baseline=st.lists(unit_floats, min_size=0, max_size=12),
    candidate=st.lists(unit_floats, min_size=0, max_size=12),
    level=st.floats(min_value=0.5, max_value=0.999, exclude_min=True),
    margin=st.floats(min_value=0.0, max_value=2.0),
    better=st.sampled_from(["higher", "lower"]),
)
def test_a_welch_verdict_never_contradicts_its_interval(
    baseline: list[float], candidate: list[float], level: float, margin: float, better: Direction
) -> None:
    interval = welch_interval(baseline, candidate, level)
    spread = len(set(baseline)) > 1 or len(set(candidate)) > 1
    if len(baseline) < 2 or len(candidate) < 2 or not spread:
        assert interval is None
    if interval is None:
        assert difference(interval, better) == "insufficient"
        assert superiority(interval, better, margin) == "inconclusive"
        return
    low, high = oriented(interval, better)
    assert low <= high
    assert (superiority(interval, better, margin) == "pass") == (low > margin)
    assert (superiority(interval, better, margin) == "fail") == (high < margin)
    assert (non_inferiority(interval, better, margin) == "pass") == (low > -margin)
    assert (non_inferiority(interval, better, margin) == "fail") == (high < -margin)
