"""Measure the report rows' aggregate (``vally_builtin.reporters.aggregate``): the time to
feed it a trial's facts, and the bytes it keeps a stimulus.

Usage (from the repository root)::

    python3 bench/report_aggregate.py                     # feed 10^5 facts, 10^4 stimuli kept
    python3 bench/report_aggregate.py --facts 100000 --stimuli 1000 --repeat 7
    python3 bench/report_aggregate.py --only report --facts 20000 --repeat 3

The last, under ``valgrind --tool=cachegrind`` with ``PYTHONHASHSEED=0``, less the same
with ``--repeat 1``, over two feeds of ``--facts``, gives the instructions a fact.

``feed``: ``--facts`` trials' facts of ``--stimuli`` stimuli (one in ten failed), read from
records once before the clock starts, fed to a fresh ``ReportAggregate`` with
``add_facts``, as a merge feeds the console's aggregate (``keep_failures`` off: every
trial counted) and the Markdown report's (on: a failed trial is declined, to be counted
from its record); the best of ``--repeat`` feeds, in nanoseconds a fact. ``bytes``: the
traced bytes (``tracemalloc``) one aggregate of ``--kept`` passing stimuli (one trial
each) holds, a stimulus. Run it with another checkout's sources first on ``PYTHONPATH``
to compare them.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _facts(count: int, stimuli: int, failing: bool = True) -> list[Any]:
    """``count`` trials' facts over ``stimuli`` stimuli, one in ten failed (``failing``),
    else all passed."""
    from tests.reporters.reporter_helpers import make_record
    from vally import TrialFacts

    return [
        TrialFacts.of_record(
            make_record(f"s{i % stimuli}", trial=i // stimuli, passed=not failing or i % 10 != 3)
        )
        for i in range(count)
    ]


def _feed(facts: list[Any], keep_failures: bool, repeat: int) -> float:
    """The best time of ``repeat`` feeds of ``facts``, in nanoseconds a fact."""
    from vally_builtin.reporters.aggregate import ReportAggregate

    best = float("inf")
    for _ in range(repeat):
        aggregate = ReportAggregate(keep_failures)
        add = aggregate.add_facts
        gc.disable()
        started = time.perf_counter_ns()
        for one in facts:
            add(one)
        elapsed = time.perf_counter_ns() - started
        gc.enable()
        best = min(best, elapsed / len(facts))
    return best


def _bytes(stimuli: int) -> float:
    """Traced bytes a stimulus of one aggregate of ``stimuli`` passing stimuli."""
    from vally_builtin.reporters.aggregate import ReportAggregate

    facts = _facts(stimuli, stimuli, failing=False)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    aggregate = ReportAggregate()
    for one in facts:
        aggregate.add_facts(one)
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert aggregate.trials == stimuli
    return held / stimuli


def main() -> None:
    """Print the feed's nanoseconds a fact and the aggregate's bytes a stimulus."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--stimuli", type=int, default=1_000)
    parser.add_argument("--kept", type=int, default=10_000, help="stimuli of the bytes figure")
    parser.add_argument("--repeat", type=int, default=5, help="feeds; the best is printed")
    parser.add_argument(
        "--only",
        choices=("console", "report", "bytes"),
        action="append",
        help="measure only this (again for more): the feed with keep_failures off "
        "(console) or on (report), or the bytes a stimulus; default: all",
    )
    args = parser.parse_args()
    only = set(args.only or ("console", "report", "bytes"))
    feeds = [keep for keep, name in ((False, "console"), (True, "report")) if name in only]
    facts = _facts(args.facts, args.stimuli) if feeds else []
    for keep_failures in feeds:
        ns = _feed(facts, keep_failures, args.repeat)
        print(f"feed keep_failures={keep_failures}: {ns:.0f} ns a fact")
    if "bytes" in only:
        print(f"bytes: {_bytes(args.kept):.0f} a stimulus ({args.kept} passing stimuli)")


if __name__ == "__main__":
    main()
