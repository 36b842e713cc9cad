"""Seeded simulations of comparisons, vectorised so that thousands of runs take seconds.

Judges answer each of the two position-swapped passes of a pair with A, B or tie and a
magnitude; :func:`combine` scores the two passes exactly as ``vally_compare.judged.combine``
does (a test checks every input against it). In an A/A run the baseline and the treatment
are the same agent, so any "difference" a judge reports is noise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from vally_compare.statistics.signflip import sign_flip_pvalues

A, B, TIE = 0, 1, 2
"""Answer codes."""

Judge = Callable[[np.random.Generator, tuple[int, ...], Any], tuple[Any, Any]]
"""(rng, shape, latent quality difference treatment - baseline) -> (answers, much flags)
for one pass where the treatment is shown as ``B`` (pass 1) or ``A`` (pass 2)."""


def random_judge(rng: np.random.Generator, shape: tuple[int, ...], latent: Any, *, first: bool):
    """Answers A, B or tie uniformly at random, either magnitude."""
    return rng.integers(0, 3, size=shape), rng.random(shape) < 0.5


def position_biased_judge(
    rng: np.random.Generator, shape: tuple[int, ...], latent: Any, *, first: bool
):
    """Prefers position A (70% A, 20% B, 10% tie), whatever it reads."""
    u = rng.random(shape)
    answers = np.where(u < 0.7, A, np.where(u < 0.9, B, TIE))
    return answers, rng.random(shape) < 0.5


def slightly_judge(rng: np.random.Generator, shape: tuple[int, ...], latent: Any, *, first: bool):
    """Reads the content (a noisy view of the quality difference) and only says "slightly"."""
    seen = latent + rng.normal(0.0, 1.0, shape)
    treatment_letter = B if first else A
    baseline_letter = A if first else B
    answers = np.where(seen > 0.5, treatment_letter, np.where(seen < -0.5, baseline_letter, TIE))
    return answers, np.zeros(shape, dtype=bool)


JUDGES = {
    "random": random_judge,
    "position-biased": position_biased_judge,
    "only-slightly": slightly_judge,
}


def combine(first: Any, first_much: Any, second: Any, second_much: Any) -> Any:
    """Vectorised ``compare.combine``: pass 1 shows the treatment as B, pass 2 as A."""
    side1 = np.where(first == B, 1, np.where(first == A, -1, 0))
    side2 = np.where(second == A, 1, np.where(second == B, -1, 0))
    agree = (side1 == side2) & (side1 != 0)
    magnitude = np.where(first_much & second_much, 1.0, 0.4)
    return np.where(agree, side1 * magnitude, 0.0)


def judged_scores(
    rng: np.random.Generator, judge: Any, shape: tuple[int, ...], effect: float = 0.0
) -> Any:
    """Pair scores of an A/A run (``effect`` 0) with the given judge.

    The latent quality difference of a pair is ``effect`` plus the difference of two
    exchangeable draws, so that with ``effect`` 0 the two sides are the same agent.
    """
    latent = effect + rng.normal(0.0, 1.0, shape) - rng.normal(0.0, 1.0, shape)
    first, first_much = judge(rng, shape, latent, first=True)
    second, second_much = judge(rng, shape, latent, first=False)
    return combine(first, first_much, second, second_much)


def two_sided(rows: Any) -> Any:
    """The two-sided sign-flip p-value of each row."""
    less, greater = sign_flip_pvalues(rows)
    return np.minimum(1.0, 2.0 * np.minimum(less, greater))


def holm_rows(p: Any) -> Any:
    """Holm-adjusted p-values along the last axis (one family per row)."""
    m = p.shape[-1]
    order = np.argsort(p, axis=-1)
    ranked = np.take_along_axis(p, order, axis=-1) * (m - np.arange(m))
    adjusted_sorted = np.minimum(1.0, np.maximum.accumulate(ranked, axis=-1))
    adjusted = np.empty_like(p)
    np.put_along_axis(adjusted, order, adjusted_sorted, axis=-1)
    return adjusted


def upper_bound(reps: int, alpha: float, confidence: float = 0.999) -> float:
    """The largest false-positive rate a level-``alpha`` test shows in ``reps`` runs with
    probability ``confidence`` (the binomial upper quantile, as a rate)."""
    from scipy import stats as sps

    return float(sps.binom.ppf(confidence, reps, alpha)) / reps


def lower_bound(reps: int, alpha: float, confidence: float = 0.999) -> float:
    """The matching lower quantile."""
    from scipy import stats as sps

    return float(sps.binom.ppf(1 - confidence, reps, alpha)) / reps


def content_judge(rng: np.random.Generator, shape: tuple[int, ...], latent: Any, *, first: bool):
    """Reads the content with noise; "much" when the difference it sees is large."""
    seen = latent + rng.normal(0.0, 0.7, shape)
    treatment_letter = B if first else A
    baseline_letter = A if first else B
    answers = np.where(seen > 0.4, treatment_letter, np.where(seen < -0.4, baseline_letter, TIE))
    return answers, np.abs(seen) > 1.5
