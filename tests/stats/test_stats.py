"""Comparison statistics checked against scipy and textbook values."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats as sps

from vally_compare.statistics import estimates as stats


def test_t_interval_matches_scipy() -> None:
    values = [0.4, -0.4, 1.0, 0.0, 0.4, 1.0, -1.0]
    ci = stats.t_interval(values)
    assert ci is not None
    expected = sps.ttest_1samp(values, 0.0).confidence_interval(0.95)
    assert ci.low == pytest.approx(expected.low)
    assert ci.high == pytest.approx(expected.high)


def test_t_interval_textbook_value() -> None:
    # n=4, mean 2.5, sd 1.2910: half-width t(0.975,3)=3.1824 * 1.2910 / 2 = 2.0543
    ci = stats.t_interval([1.0, 2.0, 3.0, 4.0])
    assert ci is not None
    assert ci.low == pytest.approx(2.5 - 2.05426, abs=1e-4)
    assert ci.high == pytest.approx(2.5 + 2.05426, abs=1e-4)


@pytest.mark.parametrize("values", [[], [0.4]])
def test_interval_needs_two_values(values: list[float]) -> None:
    assert stats.t_interval(values) is None


def test_clustered_mean_averages_within_stimulus_first() -> None:
    # stimulus a has three trials, b one: a naive pool would weight a three times.
    pairs = [("a", 1.0), ("a", 1.0), ("a", 1.0), ("b", -1.0)]
    est = stats.clustered_mean(pairs)
    assert est.mean == pytest.approx(0.0)
    assert est.n_stimuli == 2
    assert est.n_pairs == 4
    expected = sps.ttest_1samp([1.0, -1.0], 0.0).confidence_interval(0.95)
    assert est.ci is not None
    assert est.ci.low == pytest.approx(expected.low)


def test_clustered_mean_edge_cases() -> None:
    empty = stats.clustered_mean([])
    assert empty.mean is None and empty.insufficient and empty.n_pairs == 0
    one = stats.clustered_mean([("a", 0.4), ("a", 1.0)])
    assert one.mean == pytest.approx(0.7)
    assert one.insufficient and one.std is None and one.n_stimuli == 1


def test_all_ties_are_no_regression_and_the_bounded_interval_has_width() -> None:
    est = stats.tested_mean([(f"s{i}", 0.0) for i in range(5)], stats.SCORE_BOUNDS)
    assert est.mean == 0.0
    # t interval of [0]*5 + [-1, 1]: sd = sqrt(2/6), t(0.975, 6) = 2.4469
    half = 2.44691185 * math.sqrt(2 / 6) / math.sqrt(7)
    assert (
        est.ci is not None
        and est.ci.low == pytest.approx(-half)
        and est.ci.high == pytest.approx(half)
    )
    assert est.p_value == 1.0
    assert not stats.is_significant_regression(est)
    assert stats.win_tie_loss([0.0] * 5) == stats.WinRate(0, 5, 0)


def test_two_equal_losses_are_not_certainty() -> None:
    # The case: 2 stimuli, both "slightly worse". The t interval had zero width.
    est = stats.tested_mean([("a", -0.4), ("b", -0.4)], stats.SCORE_BOUNDS)
    assert est.ci is not None and est.ci.low == -1.0 and est.ci.high > 0
    assert est.p_value == pytest.approx(0.5)  # 2 * P(T* <= -0.8) = 2 * 1/4, as a sign test
    assert not stats.is_significant_regression(est)
    assert est.mde is None  # 2 stimuli cannot reach 0.05


def test_regression_needs_the_sign_flip_test_to_reject() -> None:
    three = stats.tested_mean([(f"s{i}", -1.0) for i in range(3)], stats.SCORE_BOUNDS)
    assert three.p_value == pytest.approx(0.25) and not stats.is_significant_regression(three)
    six = stats.tested_mean([(f"s{i}", -1.0) for i in range(6)], stats.SCORE_BOUNDS)
    assert six.p_value == pytest.approx(2 / 64) and stats.is_significant_regression(six)
    assert six.direction == -1
    held_back = dataclasses.replace(six, p_adjusted=0.09)
    assert not stats.is_significant_regression(held_back) and held_back.direction == 0
    mixed = stats.tested_mean([("a", -1.0), ("b", 0.4), ("c", -0.4)])
    assert not stats.is_significant_regression(mixed)


def test_bounded_interval_matches_padded_t_interval_and_clips() -> None:
    values = [-0.4, -1.0, -1.0, -0.4, -1.0]
    ci = stats.bounded_interval(values, (-1.0, 1.0))
    expected = sps.ttest_1samp([*values, -1.0, 1.0], 0.0).confidence_interval(0.95)
    assert ci is not None
    assert ci.low == max(-1.0, expected.low) and ci.high == pytest.approx(expected.high)
    assert stats.bounded_interval([0.3], (-1.0, 1.0)) is None


def test_win_rate_interval_over_stimuli() -> None:
    scores = [("a", 1.0), ("a", -1.0), ("b", 0.4), ("c", 0.0)]
    ci = stats.win_rate_interval(scores)
    expected = sps.ttest_1samp([0.5, 1.0, 0.0, 0.0, 1.0], 0.0).confidence_interval(0.95)
    assert ci is not None
    assert ci.low == max(0.0, expected.low) and ci.high == min(1.0, expected.high)


def test_win_rate() -> None:
    rate = stats.win_tie_loss([1.0, 0.4, 0.0, -0.4, 1.0])
    assert (rate.wins, rate.ties, rate.losses) == (3, 1, 1)
    assert rate.win_rate == pytest.approx(0.6)
    assert stats.win_tie_loss([]).win_rate is None


@pytest.mark.parametrize("b,c", [(0, 5), (3, 12), (10, 10), (1, 0), (25, 40)])
def test_mcnemar_exact_matches_binomial_test(b: int, c: int) -> None:
    expected = sps.binomtest(min(b, c), b + c, 0.5).pvalue
    assert stats.mcnemar_exact(b, c) == pytest.approx(expected)


def test_mcnemar_textbook_and_edges() -> None:
    assert stats.mcnemar_exact(0, 5) == pytest.approx(2 * 0.5**5)  # 0.0625
    assert stats.mcnemar_exact(0, 0) == 1.0
    with pytest.raises(ValueError):
        stats.mcnemar_exact(-1, 2)


def test_mcnemar_from_pairs_collapses_trials_per_stimulus() -> None:
    pairs = [
        ("a", True, False),
        ("a", True, False),
        ("a", False, False),  # a: 0.67 -> 0 : b
        ("b", False, True),  # c
        ("c", True, True),  # concordant
        ("d", True, False),
        ("d", False, False),  # baseline 0.5: tie, left out
    ]
    result = stats.mcnemar_from_pairs(pairs)
    assert (result.b, result.c, result.n_units, result.n_ties) == (1, 1, 3, 1)
    assert result.p_value == pytest.approx(1.0)
    assert stats.mcnemar_from_pairs([]).p_value is None


def test_mcnemar_all_flips() -> None:
    pairs = [(f"s{i}", True, False) for i in range(8)]
    result = stats.mcnemar_from_pairs(pairs)
    assert result.b == 8 and result.c == 0
    assert result.p_value == pytest.approx(sps.binomtest(0, 8, 0.5).pvalue)


def test_metric_delta_against_numpy() -> None:
    rng = np.random.default_rng(7)
    pairs = []
    for s in range(6):
        for _ in range(3):
            base = float(rng.integers(100, 200))
            pairs.append((f"s{s}", base, base + float(rng.integers(-30, 10))))
    delta = stats.metric_delta("tokens", pairs)
    per_stim = {}
    for key, b, t in pairs:
        per_stim.setdefault(key, []).append(t - b)
    means = [float(np.mean(v)) for v in per_stim.values()]
    assert delta.delta.mean == pytest.approx(np.mean(means))
    ci = sps.ttest_1samp(means, 0.0).confidence_interval(0.95)
    assert delta.delta.ci is not None
    assert delta.delta.ci.low == pytest.approx(ci.low)
    assert delta.delta.ci.high == pytest.approx(ci.high)
    assert delta.high_variance == (ci.low <= 0 <= ci.high)
    assert delta.delta.p_value == pytest.approx(
        sps.permutation_test(
            (np.array(means),), np.mean, permutation_type="samples", n_resamples=np.inf
        ).pvalue
    )
    assert delta.relative == pytest.approx(delta.delta.mean / delta.baseline_mean)


def test_metric_delta_high_variance_flag_follows_the_interval() -> None:
    steady = stats.metric_delta("turns", [("a", 1, 3), ("b", 1, 3), ("c", 2, 4)])
    assert steady.delta.mean == pytest.approx(2.0) and not steady.high_variance
    noisy = stats.metric_delta("turns", [("a", 1, 10), ("b", 10, 1), ("c", 2, 3)])
    assert noisy.high_variance
    none = stats.metric_delta("turns", [])
    assert none.delta.mean is None and none.relative is None and not none.high_variance
    assert math.isclose(steady.treatment_mean or 0, 10 / 3)


def test_high_variance_depends_on_sample_size() -> None:
    # The cases: a clear delta at 30 stimuli (sd > |mean| but p tiny) is not flagged;
    # two stimuli whose interval spans many standard deviations are.
    rng = np.random.default_rng(3)
    clear = [(f"s{i}", 0.0, float(v)) for i, v in enumerate(rng.normal(1.0, 1.2, 30) + 0.2)]
    delta = stats.metric_delta("tokens", clear)
    assert delta.delta.std is not None and delta.delta.mean is not None
    assert delta.delta.ci is not None and delta.delta.ci.low > 0
    assert not delta.high_variance
    two = stats.metric_delta("tokens", [("a", 0.0, 1.0), ("b", 0.0, 1.2)])
    assert two.delta.std is not None and two.delta.std < abs(two.delta.mean or 0)
    assert two.high_variance


def test_missing_metrics_are_left_out_not_zero() -> None:
    pairs: list[tuple[str, float | None, float | None]] = [
        ("a", 100.0, 110.0),
        ("b", 100.0, None),  # the treatment trial errored before it had a trajectory
        ("c", None, 90.0),
        ("d", 100.0, 100.0),
    ]
    delta = stats.metric_delta("tokens", pairs)
    assert delta.missing == 2
    assert delta.delta.mean == pytest.approx(5.0) and delta.delta.n_stimuli == 2
    assert delta.baseline_mean == pytest.approx(100.0)


def test_mcnemar_counts_errored_grades_and_its_floor() -> None:
    result = stats.mcnemar_from_pairs([("a", True, False)], n_errored=2)
    assert result.n_errored == 2
    assert result.min_p_value == 1.0
    five = stats.mcnemar_from_pairs([(f"s{i}", True, False) for i in range(5)])
    assert five.min_p_value == pytest.approx(0.0625) and five.p_value == pytest.approx(0.0625)
    six = stats.mcnemar_from_pairs([(f"s{i}", True, False) for i in range(6)])
    assert six.min_p_value == pytest.approx(0.03125)
