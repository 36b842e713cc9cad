"""Measure one sign-flip interval (``vally_compare.statistics.signflip``) of per-stimulus
pass-rate differences, the grouped draws made afresh each time.

Usage (from the repository root)::

    python3 bench/signflip_interval.py                         # 10^4 stimuli, 5 runs a side
    python3 bench/signflip_interval.py --intervals 2 --repeat 1

It prints the process CPU time of each interval (min / median / max of ``--repeat``
rounds of ``--intervals`` intervals each, a round's time divided by its intervals) and the
interval. Under ``valgrind --tool=cachegrind`` (with ``OPENBLAS_NUM_THREADS=1``, so that
the counts do not vary with the threads' waits), ``--intervals 2 --repeat 1`` less
``--intervals 1 --repeat 1`` gives the instructions of one interval. Run it with another
checkout's sources first on ``PYTHONPATH`` to compare them.
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    """Time ``--intervals`` intervals of ``--stimuli`` differences, ``--repeat`` times."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stimuli", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5, help="runs a side a stimulus")
    parser.add_argument("--intervals", type=int, default=1, help="intervals a round")
    parser.add_argument("--repeat", type=int, default=5, help="rounds")
    args = parser.parse_args()

    import numpy as np

    from vally_compare.statistics import signflip

    rng = np.random.default_rng(7)
    n, runs = args.stimuli, args.runs
    treatment = rng.binomial(runs, rng.uniform(0.3, 0.9), n)
    baseline = rng.binomial(runs, rng.uniform(0.3, 0.9), n)
    data = (treatment - baseline) / runs
    seconds = []
    interval = None
    for _ in range(args.repeat):
        started = time.process_time()
        for _ in range(args.intervals):
            signflip._LAST_GROUPED = None  # made afresh, as for values met first
            interval = signflip.sign_flip_interval(data)
        seconds.append((time.process_time() - started) / args.intervals)
    spread = (min(seconds), statistics.median(seconds), max(seconds))
    print(f"interval: {' / '.join(f'{s:.3f}' for s in spread)} s CPU; {interval}")


if __name__ == "__main__":
    main()
