"""``vally compare --plan EFFECT``: how many stimuli and runs a target effect needs.

The comparison just made is the pilot: its judged pairs give the variance between stimuli
and within a stimulus (:func:`vally_compare.statistics.power.variance_components`; the spread of the
stimulus means is taken in the bounded, padded form so that a pilot of all ties does not
promise that one stimulus is enough). For each number of runs per stimulus the plan is the
fewest stimuli whose smallest detectable effect at 80% power is at most the target.
"""

from __future__ import annotations

from collections.abc import Hashable

from vally_compare.judged import ComparisonResult
from vally_compare.statistics.estimates import SCORE_BOUNDS, group_means
from vally_compare.statistics.power import VarianceComponents, stimuli_needed, variance_components

RUN_OPTIONS = (1, 2, 3, 5)
"""Runs per stimulus the plan is given for."""


def pilot_components(result: ComparisonResult) -> VarianceComponents | None:
    """The variance components of a comparison's judged scores; None below two stimuli."""
    if result.tally is not None:
        pairs: list[tuple[Hashable, float]] = list(result.tally.score_pairs())
    else:
        pairs = [(r.pair.key[:2], r.score) for r in result.judged if r.score is not None]
    means = list(group_means(pairs).values())
    if len(means) < 2:
        return None
    padded = [*means, *SCORE_BOUNDS]
    centre = sum(padded) / len(padded)
    total = sum((x - centre) ** 2 for x in padded) / (len(padded) - 1)
    return variance_components(pairs, total_variance=total)


def plan(result: ComparisonResult, target: float) -> list[tuple[int, int | None]]:
    """``(runs per stimulus, stimuli needed)`` for each of :data:`RUN_OPTIONS`; runs beyond
    one are planned only when the pilot had repeated runs (else within-stimulus variance is
    unknown). Empty when the pilot has fewer than two stimuli."""
    components = pilot_components(result)
    if components is None:
        return []
    options = RUN_OPTIONS if components.within is not None else (1,)
    return [(runs, stimuli_needed(components, target, runs)) for runs in options]


def plan_lines(result: ComparisonResult, target: float) -> list[str]:
    """The plan as printed under the comparison."""
    rows = plan(result, target)
    if not rows:
        return [f"Plan for ±{target:.2f}: a pilot needs at least 2 judged stimuli"]
    lines = [f"Plan to detect ±{target:.2f} with 80% power (5% two-sided), from this pilot:"]
    for runs, stimuli in rows:
        needed = "more than 100000" if stimuli is None else str(stimuli)
        lines.append(f"  {runs} run(s) per stimulus: {needed} stimuli")
    components = pilot_components(result)
    if components is not None and components.within is None:
        lines.append("  (the pilot had one run per stimulus: rerun it with --runs 2 to plan runs)")
    return lines
