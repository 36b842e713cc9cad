"""Every comparison figure against scipy, statsmodels, the krippendorff package and
published worked examples, including the edge cases the old figures got wrong."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from vally_compare.statistics import agreement, multiplicity, power, signflip


def _scipy_sign_flip(values: np.ndarray, alternative: str) -> float:
    return float(
        sps.permutation_test(
            (values,),
            lambda x, axis: np.sum(x, axis=axis),
            permutation_type="samples",
            n_resamples=np.inf,
            alternative=alternative,
        ).pvalue
    )


@pytest.mark.parametrize("n", [2, 3, 5, 8, 12, 13, 16])
def test_sign_flip_is_scipys_exact_permutation_test(n: int) -> None:
    rng = np.random.default_rng(n)
    values = rng.choice([-1.0, -0.4, 0.0, 0.4, 1.0, -0.7, 0.2], size=n)
    result = signflip.sign_flip_test(values.tolist())
    assert result.exact
    assert result.p_two_sided == pytest.approx(_scipy_sign_flip(values, "two-sided"))
    assert result.p_less == pytest.approx(_scipy_sign_flip(values, "less"))
    assert result.p_greater == pytest.approx(_scipy_sign_flip(values, "greater"))


def test_sign_flip_edge_cases() -> None:
    assert signflip.sign_flip_test([0.0, 0.0, 0.0]).p_two_sided == 1.0  # all ties
    assert signflip.sign_flip_test([]).p_two_sided == 1.0
    assert signflip.sign_flip_test([-0.4, -0.4]).p_two_sided == pytest.approx(0.5)
    six = signflip.sign_flip_test([-1.0] * 6)
    assert six.p_less == pytest.approx(1 / 64) and six.p_two_sided == pytest.approx(1 / 32)
    assert signflip.min_two_sided_p(5) == pytest.approx(0.0625)
    assert signflip.min_two_sided_p(6) == pytest.approx(0.03125)
    # values whose sums differ only by rounding still tie with the observed sum
    assert signflip.sign_flip_test([0.1, 0.2, -0.3]).p_two_sided == 1.0


def test_sign_flip_monte_carlo_is_close_to_the_exact_value() -> None:
    rng = np.random.default_rng(1)
    values = rng.normal(0.3, 1.0, 22)
    result = signflip.sign_flip_test(values.tolist())
    assert not result.exact
    exact = signflip._meet_in_middle(np.abs(values), float(values.sum()), 1e-9)
    # 9,999 draws: the p-value's standard error is below 0.005
    assert result.p_less == pytest.approx(exact[0], abs=0.015)
    assert result.p_greater == pytest.approx(exact[1], abs=0.015)
    again = signflip.sign_flip_test(values.tolist())
    assert again == result  # fixed seed: the same p-value every time


def test_batched_and_single_tests_agree() -> None:
    rng = np.random.default_rng(5)
    for n in (4, 15, 25):
        rows = rng.normal(0.2, 1.0, (6, n))
        less, greater = signflip.sign_flip_pvalues(rows)
        for row, lo, hi in zip(rows, less, greater, strict=True):
            single = signflip.sign_flip_test(row.tolist())
            assert (single.p_less, single.p_greater) == pytest.approx((lo, hi))


def test_holm_is_statsmodels_holm() -> None:
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    rng = np.random.default_rng(0)
    for m in (1, 2, 5, 9):
        p = rng.uniform(0, 0.2, m)
        expected = multitest.multipletests(p, method="holm")[1]
        assert multiplicity.holm(p.tolist()) == pytest.approx(expected.tolist())
    assert multiplicity.holm([0.01, None, 0.04]) == [0.02, None, 0.04]
    assert multiplicity.holm([]) == []


KRIPPENDORFF_2011 = [  # Krippendorff (2011), section C: 4 observers, 12 units, missing data
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
]


def test_krippendorff_alpha_published_values() -> None:
    units = [list(unit) for unit in zip(*KRIPPENDORFF_2011, strict=True)]
    assert agreement.krippendorff_alpha(units, "nominal") == pytest.approx(0.743, abs=5e-4)
    assert agreement.krippendorff_alpha(units, "interval") == pytest.approx(0.849, abs=5e-4)


def test_krippendorff_alpha_matches_the_krippendorff_package() -> None:
    krippendorff = pytest.importorskip("krippendorff")
    rng = np.random.default_rng(3)
    scores = np.array([-1.0, -0.4, 0.0, 0.4, 1.0])
    truth = rng.integers(0, 5, 40)
    data = np.clip(truth + rng.integers(-1, 2, (3, 40)), 0, 4)
    ratings = scores[data].astype(float)
    ratings[rng.random(ratings.shape) < 0.1] = np.nan
    units = [[None if math.isnan(v) else float(v) for v in unit] for unit in ratings.T]
    for level in ("interval", "nominal"):
        expected = krippendorff.alpha(reliability_data=ratings, level_of_measurement=level)
        assert agreement.krippendorff_alpha(units, level) == pytest.approx(expected)  # type: ignore[arg-type]
    assert agreement.krippendorff_alpha([[1.0, 1.0], [1.0, 1.0]]) is None  # no variation
    assert agreement.krippendorff_alpha([[1.0], [None, 2.0]]) is None  # nothing pairable


def test_order_agreement_and_chance() -> None:
    always_a = agreement.order_agreement([("A", "A")] * 10)
    assert always_a.rate == 0.0 and always_a.chance == 0.0 and always_a.no_better_than_chance
    assert always_a.position_a_share == 1.0
    reader = agreement.order_agreement([("B", "A")] * 6 + [("A", "B")] * 2 + [("B", "B")] * 2)
    # answers: A 8, B 12 over 20 passes: chance = 2 * 0.4 * 0.6 = 0.48
    assert reader.rate == pytest.approx(0.8) and reader.chance == pytest.approx(0.48)
    assert reader.kappa == pytest.approx((0.8 - 0.48) / 0.52)
    assert not reader.no_better_than_chance
    uniform = agreement.order_agreement([(x, y) for x in "AB" for y in "AB"] + [("tie", "tie")])
    assert uniform.chance == pytest.approx(2 * 0.4 * 0.4 + 0.2**2)
    ties = agreement.order_agreement([("tie", "tie")] * 3)
    assert ties.rate == 1.0 and ties.kappa is None and not ties.no_better_than_chance
    assert (always_a + reader).pairs == 20


def test_smallest_detectable_effect_formula_and_statsmodels() -> None:
    # (t(0.975, 9) + t(0.8, 9)) * 0.5 / sqrt(10)
    expected = (2.2621571628 + 0.8834038) * 0.5 / math.sqrt(10)
    assert power.smallest_detectable(0.5, 10) == pytest.approx(expected, rel=1e-6)
    assert power.smallest_detectable(0.5, 5) is None  # the sign-flip test cannot reach 0.05
    assert power.min_stimuli() == 6
    solver = pytest.importorskip("statsmodels.stats.power")
    for n in (10, 30, 100):
        exact = solver.TTestPower().solve_power(nobs=n, alpha=0.05, power=0.8) * 0.5
        mde = power.smallest_detectable(0.5, n)
        assert mde is not None and mde == pytest.approx(exact, rel=0.05)


def test_plan_inverts_the_smallest_detectable_effect() -> None:
    pilot = [(f"s{i}", v) for i, v in enumerate([0.4, -0.4, 0.0, 1.0, 0.4, -1.0, 0.0, 0.4])]
    components = power.variance_components(pilot)
    assert components.within is None and components.stimuli == 8
    assert components.between == pytest.approx(float(np.var([v for _, v in pilot], ddof=1)))
    n = power.stimuli_needed(components, 0.2)
    assert n is not None
    sd = math.sqrt(components.between)
    assert (
        (power.smallest_detectable(sd, n) or 9) <= 0.2 < (power.smallest_detectable(sd, n - 1) or 9)
    )
    repeated = [(f"s{i}", v) for i in range(6) for v in (i / 10, i / 10 + 0.4, i / 10 - 0.4)]
    comp = power.variance_components(repeated)
    assert comp.within == pytest.approx(0.16)  # each stimulus: values m, m±0.4
    # var of the means (0..0.5) is 0.035; less within / 3 leaves nothing between
    assert comp.between == pytest.approx(max(0.0, 0.035 - 0.16 / 3))
    fewer = power.stimuli_needed(comp, 0.2, runs=3)
    more = power.stimuli_needed(comp, 0.2, runs=1)
    assert fewer is not None and more is not None and fewer < more
    with pytest.raises(ValueError):
        power.stimuli_needed(comp, 0.0)
