"""Measure the false-positive rates and the power of vally's comparison decisions.

Usage (from the repository root)::

    python3 bench/stats_error_rates.py               # 2,000 A/A runs per configuration
    python3 bench/stats_error_rates.py --reps 20000  # tighter figures, a few minutes

Prints, for each simulated judge and number of stimuli, the rate at which the
``--fail-on-regression`` gate (one-sided 2.5%) and the labels (two-sided 5%) fire in A/A
runs, where every firing is a false positive; then the power of the test against a judge
that reads a real difference, with the printed smallest detectable effect beside it. The
simulations are the ones ``tests/stats/`` checks (``tests/stats/simulate.py``); the figures
in ``docs/statistics.md`` come from this script.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.stats.simulate import JUDGES, content_judge, judged_scores, two_sided
from vally_compare.statistics import estimates as stats

SIZES = (2, 3, 5, 10, 30)


def false_positives(reps: int) -> None:
    """Gate and label rates of A/A runs, as ``tests/stats/test_false_positives.py`` runs them."""
    print(f"A/A false-positive rates ({reps} runs each)")
    print(f"  {'judge':<16} {'stimuli':>7} {'gate':>7} {'labels':>7}")
    for name in sorted(JUDGES):
        rng = np.random.default_rng(16)
        for n in SIZES:
            runs = 1 if n in (2, 10) else 2
            scores = judged_scores(rng, JUDGES[name], (reps, n, runs)).mean(axis=2)
            p, mean = two_sided(scores), scores.mean(axis=1)
            gate = float(((p <= 0.05) & (mean < 0)).mean())
            labels = float((p <= 0.05).mean())
            print(f"  {name:<16} {n:>7} {gate:>7.2%} {labels:>7.2%}")


def power(reps: int) -> None:
    """Power at a few latent effects, with the MDE a pilot of the same size prints."""
    print(f"Power of the sign-flip test, content-reading judge ({reps} runs each)")
    print(f"  {'stimuli':>7} {'effect':>7} {'power':>7} {'printed MDE':>12}")
    for n in (10, 30):
        rng = np.random.default_rng(n)
        pilots = [judged_scores(rng, content_judge, (n,)) for _ in range(100)]
        mdes = [
            stats.tested_mean([(f"s{i}", float(v)) for i, v in enumerate(p)], (-1, 1)).mde
            for p in pilots
        ]
        printed = float(np.median([m for m in mdes if m is not None]))
        for latent in (0.25, 0.5, 1.0):
            scores = judged_scores(rng, content_judge, (reps, n), latent)
            effect = float(judged_scores(rng, content_judge, (100_000,), latent).mean())
            detected = float((two_sided(scores) <= 0.05).mean())
            print(f"  {n:>7} {effect:>7.3f} {detected:>7.1%} {printed:>12.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000)
    args = parser.parse_args()
    false_positives(args.reps)
    power(args.reps)


if __name__ == "__main__":
    main()
