"""The interval that inverts the sign-flip test, and the judged comparison's decisions
read beside it: a difference is never called significant while its printed interval
includes zero, and a single comparison's interval excludes zero exactly when the test
rejects."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from vally_compare.statistics import estimates as stats, signflip
from vally_compare.statistics.signflip import (
    SignDraws,
    _drawn_signs,
    min_two_sided_p,
    sign_flip_interval,
    sign_flip_pvalues,
    sign_flip_test,
)


@pytest.mark.parametrize("n", [6, 8, 12, 15, 20, 25])
@pytest.mark.parametrize("level", [0.9, 0.95])
def test_each_end_is_where_the_test_starts_to_reject(n: int, level: float) -> None:
    rng = np.random.default_rng(n)
    data = rng.normal(0.2, 0.5, n)
    interval = sign_flip_interval(data, level)
    assert interval is not None
    low, high = interval
    alpha = 1 - level
    eps = 1e-6 * (float(data.max() - data.min()) + 1)
    assert low < float(data.mean()) < high
    # just inside each end the shifted data are not rejected; just outside they are
    assert sign_flip_test(data - (low + eps)).p_two_sided > alpha
    assert sign_flip_test(data - (high - eps)).p_two_sided > alpha
    assert sign_flip_test(data - (low - eps)).p_two_sided <= alpha
    assert sign_flip_test(data - (high + eps)).p_two_sided <= alpha


def test_too_few_values_give_the_bounds_or_nothing() -> None:
    assert min_two_sided_p(5) > 0.05
    assert sign_flip_interval([0.4] * 5, 0.95, (-1.0, 1.0)) == (-1.0, 1.0)
    assert sign_flip_interval([0.4] * 5, 0.95) is None
    assert sign_flip_interval([], 0.95, (-1.0, 1.0)) is None
    # at 90% five values can reject (2 / 32 < 0.1)
    assert sign_flip_interval([0.4, 0.5, 0.6, 0.7, 0.8], 0.9) is not None


def test_all_ties_and_all_flips() -> None:
    ties = stats.tested_mean([(f"s{i}", 0.0) for i in range(8)], stats.SCORE_BOUNDS)
    assert ties.decision_ci is not None and ties.decision_ci.low <= 0 <= ties.decision_ci.high
    assert not ties.significant()
    flips = stats.tested_mean([(f"s{i}", -1.0) for i in range(8)], stats.SCORE_BOUNDS)
    assert flips.decision_ci is not None and flips.decision_ci.high < 0
    assert flips.significant() and stats.is_significant_regression(flips)


values = st.lists(
    st.floats(min_value=-1, max_value=1, allow_nan=False).map(lambda v: round(v, 2)),
    min_size=0,
    max_size=24,
)


@settings(max_examples=150, deadline=None)
@given(values)
def test_no_decision_contradicts_its_printed_interval(data: list[float]) -> None:
    estimate = stats.tested_mean([(f"s{i}", v) for i, v in enumerate(data)], stats.SCORE_BOUNDS)
    ci = estimate.decision_ci
    if estimate.significant():
        assert ci is not None and (ci.low > 0 or ci.high < 0)
        assert (ci.low > 0) == (estimate.mean is not None and estimate.mean > 0)
    if estimate.p_value is not None and ci is not None:
        # one comparison (no family adjustment): the interval and the test agree both ways
        assert (estimate.p_value <= 0.05 and bool(estimate.mean)) == (ci.low > 0 or ci.high < 0)


def test_the_smallest_p_value_is_defined_for_any_number_of_pairs() -> None:
    # 2 / 2**n overflowed past 1,023 pairs, so large experiments had no comparison.
    assert min_two_sided_p(1) == 1.0
    assert min_two_sided_p(11) == 2.0 / 2**11
    assert min_two_sided_p(2000) == 0.0
    assert 0.0 <= min_two_sided_p(1100) < 1e-300


@pytest.mark.parametrize("n", [21, 64, 500])
def test_kept_draws_are_the_draws(n: int) -> None:
    """The sign vectors an interval draws once and keeps as bits are, block by block, the
    very blocks a single test draws, so every p-value is the same with them."""
    kept = list(SignDraws(n).blocks())
    drawn = list(_drawn_signs(n))
    assert len(kept) == len(drawn)
    for mine, theirs in zip(kept, drawn, strict=True):
        assert mine.dtype == theirs.dtype and mine.shape == theirs.shape
        assert np.array_equal(mine, theirs)
    data = np.random.default_rng(n).normal(0.1, 0.4, (3, n))
    assert repr(sign_flip_pvalues(data, draws=SignDraws(n))) == repr(sign_flip_pvalues(data))


def _pass_rate_differences(n: int, runs: int, seed: int) -> np.ndarray:
    """Per-stimulus pass-rate differences of ``runs`` runs a side (a few distinct values)."""
    rng = np.random.default_rng(seed)
    treatment = rng.binomial(runs, rng.uniform(0.3, 0.9), n) / runs
    baseline = rng.binomial(runs, rng.uniform(0.3, 0.9), n) / runs
    return np.asarray(treatment - baseline, dtype=float)


@pytest.mark.parametrize(("n", "runs"), [(24, 1), (40, 1), (160, 2), (400, 3), (600, 5)])
def test_draws_added_up_by_value_give_the_same_tests_and_intervals(
    n: int, runs: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Values that take few distinct values are tested with each draw's signs added up by
    value: the same p-values and intervals as adding up every value."""
    data_sets = [_pass_rate_differences(n, runs, seed) for seed in range(4)]
    data_sets.append(np.zeros(n))  # all ties
    data_sets.append(-np.ones(n))  # all flips
    assert all(signflip.GroupedDraws.fits(data) for data in data_sets)
    grouped = [(sign_flip_test(d), sign_flip_interval(d)) for d in data_sets]
    monkeypatch.setattr(signflip, "_GROUPED_SHARE", n + 1)  # every value on its own
    assert not any(signflip.GroupedDraws.fits(data) for data in data_sets)
    assert grouped == [(sign_flip_test(d), sign_flip_interval(d)) for d in data_sets]


def test_values_that_take_many_values_are_not_grouped() -> None:
    data = np.random.default_rng(3).normal(0.1, 0.4, 400)
    assert not signflip.GroupedDraws.fits(data)
    assert not signflip.GroupedDraws.fits(np.zeros(20))  # tested exactly


def test_the_distinct_values_are_found_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Deciding to add up the draws by value and adding them up take one ``np.unique`` of
    the values, and a test of values that follows the interval's, or an interval that
    follows their test, none."""
    data = _pass_rate_differences(400, 3, 0)
    calls: list[int] = []
    unique = np.unique

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return unique(*args, **kwargs)

    monkeypatch.setattr(signflip, "_LAST_GROUPED", None)
    monkeypatch.setattr(np, "unique", counted)
    interval = sign_flip_interval(data)
    assert len(calls) == 1
    test = sign_flip_test(data)
    assert len(calls) == 1
    monkeypatch.setattr(signflip, "_LAST_GROUPED", None)
    assert sign_flip_test(data) == test and len(calls) == 2
    assert sign_flip_interval(data) == interval and len(calls) == 2
