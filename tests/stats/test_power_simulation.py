"""The printed smallest detectable effect is the effect the test detects 80% of the time.

For each size, the MDE vally prints for a pilot comparison (the median over 100 seeded
pilots from a judge that reads the content) is compared with the effect that the sign-flip
test, simulated, detects with 80% power: found by bisection on the judge's latent effect and
measured on the score scale. They must agree within 20%.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.stats.simulate import content_judge, judged_scores, two_sided
from vally_compare.statistics import estimates as stats


def _printed_mde(rng: np.random.Generator, n: int) -> float:
    mdes = []
    for _ in range(100):
        pilot = judged_scores(rng, content_judge, (n,))
        estimate = stats.tested_mean([(f"s{i}", float(v)) for i, v in enumerate(pilot)], (-1, 1))
        assert estimate.mde is not None
        mdes.append(estimate.mde)
    return float(np.median(mdes))


def _effect_with_80_percent_power(rng: np.random.Generator, n: int) -> float:
    low, high = 0.0, 2.0
    for _ in range(6):
        middle = (low + high) / 2
        scores = judged_scores(rng, content_judge, (600, n), middle)
        if float((two_sided(scores) <= 0.05).mean()) < 0.8:
            low = middle
        else:
            high = middle
    latent = (low + high) / 2
    return float(judged_scores(np.random.default_rng(0), content_judge, (100_000,), latent).mean())


@pytest.mark.parametrize("n", [10, 30])
def test_printed_mde_is_the_simulated_80_percent_power_effect(n: int) -> None:
    rng = np.random.default_rng(n)
    printed = _printed_mde(rng, n)
    simulated = _effect_with_80_percent_power(rng, n)
    assert simulated == pytest.approx(printed, rel=0.2), (printed, simulated)
