"""Power: the smallest effect a comparison can detect, and the stimuli a target effect needs.

**Smallest detectable effect.** For a two-sided test at level alpha with power 1 - beta
over n stimuli whose per-stimulus values have standard deviation s, the smallest true mean
difference detected with that power is (normal-theory approximation with Student t
quantiles)

    MDE = (t(1 - alpha/2, n - 1) + t(1 - beta, n - 1)) * s / sqrt(n).

With fewer stimuli than the sign-flip test needs to reach alpha at all (6 at alpha = 0.05,
see :func:`vally_compare.statistics.signflip.min_two_sided_p`), no effect is detectable and
the figure is None. Source: J. Cohen, *Statistical Power Analysis for the Behavioral
Sciences* (2nd ed., 1988), chapter 2; the t form follows S.-C. Chow, J. Shao and H. Wang,
*Sample Size Calculations in Clinical Research* (2nd ed., 2008), section 3.1.

**Planning.** A stimulus's mean over r runs varies by ``sigma_b^2 + sigma_w^2 / r``, where
sigma_b^2 is the variance between stimuli and sigma_w^2 the variance of one run around its
stimulus's mean. Both come from a pilot by the one-way random-effects method of moments:
sigma_w^2 is the pooled within-stimulus variance (stimuli with two or more runs), and
``sigma_b^2 = max(0, var(stimulus means) - sigma_w^2 * mean(1 / r_j))``. The plan is the
smallest n whose MDE at that variance is at most the target. Source: S. R. Searle,
G. Casella and C. E. McCulloch, *Variance Components* (1992), section 3.5.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from vally_compare.statistics.signflip import min_two_sided_p

ALPHA = 0.05
"""Two-sided level of every comparison test."""
POWER = 0.8
"""Power at which the smallest detectable effect is given."""
MAX_PLAN = 100_000
"""Plans needing more stimuli than this say so instead of a number."""


def scipy_stats() -> Any:
    """``scipy.stats``, imported on first use (and untyped: scipy ships no stubs)."""
    import importlib

    return importlib.import_module("scipy.stats")


def min_stimuli(alpha: float = ALPHA) -> int:
    """Fewest stimuli with which the sign-flip test can reach ``alpha`` (6 at 0.05)."""
    n = 1
    while min_two_sided_p(n) > alpha:
        n += 1
    return n


def smallest_detectable(
    sd: float, n: int, alpha: float = ALPHA, power: float = POWER
) -> float | None:
    """The MDE (see the module docstring); None below :func:`min_stimuli`."""
    if n < max(2, min_stimuli(alpha)):
        return None
    sps = scipy_stats()
    factor = float(sps.t.ppf(1 - alpha / 2, n - 1) + sps.t.ppf(power, n - 1))
    return factor * sd / math.sqrt(n)


@dataclass(frozen=True)
class VarianceComponents:
    """Variance between stimuli and within a stimulus, estimated from a pilot.

    Attributes:
        between: sigma_b^2.
        within: sigma_w^2; None when no stimulus had two runs.
        stimuli: Stimuli in the pilot.
        runs: Mean runs per stimulus in the pilot.
    """

    between: float
    within: float | None
    stimuli: int
    runs: float

    def mean_variance(self, runs: int) -> float:
        """Variance of one stimulus's mean over ``runs`` runs."""
        return self.between + (self.within or 0.0) / runs


def variance_components(
    pairs: Sequence[tuple[Hashable, float]], total_variance: float | None = None
) -> VarianceComponents:
    """sigma_b^2 and sigma_w^2 from ``(stimulus, value)`` pairs of a pilot.

    Args:
        pairs: One value per run.
        total_variance: The variance of the stimulus means to use (for example a padded
            estimate that is never zero); default the plain sample variance.
    """
    groups: dict[Hashable, list[float]] = {}
    for key, value in pairs:
        groups.setdefault(key, []).append(float(value))
    means = [math.fsum(v) / len(v) for v in groups.values()]
    m = len(means)
    if total_variance is None:
        centre = math.fsum(means) / m if m else 0.0
        total_variance = math.fsum((x - centre) ** 2 for x in means) / (m - 1) if m > 1 else 0.0
    repeated = [v for v in groups.values() if len(v) > 1]
    within: float | None = None
    if repeated:
        squares = math.fsum(
            math.fsum((x - math.fsum(v) / len(v)) ** 2 for x in v) for v in repeated
        )
        within = squares / sum(len(v) - 1 for v in repeated)
    shrink = math.fsum(1 / len(v) for v in groups.values()) / m if m else 1.0
    between = max(0.0, total_variance - (within or 0.0) * shrink)
    runs = sum(len(v) for v in groups.values()) / m if m else 0.0
    return VarianceComponents(between, within, m, runs)


def stimuli_needed(
    components: VarianceComponents,
    target: float,
    runs: int = 1,
    alpha: float = ALPHA,
    power: float = POWER,
) -> int | None:
    """Fewest stimuli whose MDE with ``runs`` runs each is at most ``target``; None above
    :data:`MAX_PLAN`."""
    if target <= 0:
        raise ValueError("the target effect must be greater than zero")
    sd = math.sqrt(components.mean_variance(runs))
    low = max(2, min_stimuli(alpha))
    if sd == 0:
        return low
    high = low
    while (smallest_detectable(sd, high, alpha, power) or math.inf) > target:
        if high >= MAX_PLAN:
            return None
        high = min(MAX_PLAN, high * 2)
    while low < high:
        middle = (low + high) // 2
        if (smallest_detectable(sd, middle, alpha, power) or math.inf) <= target:
            high = middle
        else:
            low = middle + 1
    return low
