"""Measure the memory and time of planning a large run, before any trial starts.

Usage (from the repository root)::

    python3 bench/plan_memory.py                  # 1,000,000 trials: 2 stimuli x 2 models
    python3 bench/plan_memory.py --runs 10000     # 40,000 trials

The plan is built the way ``vally eval`` builds it (spec loaded, environments resolved),
then the first and last trials are taken. Reported: the peak memory traced while planning,
the time to plan, and the time to walk every trial's key (what sharding does).
``VALLY_MAX_TRIALS`` is raised for the measurement.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import tracemalloc
from pathlib import Path

SPEC = """\
name: many
defaults: {runs: 1, executor: mock}
stimuli:
  - {name: one, prompt: hi}
  - {name: two, prompt: there}
"""


def main() -> None:
    """Plan ``--runs`` trials of two stimuli on two models and print the numbers."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=250_000)
    args = parser.parse_args()
    total = args.runs * 4
    os.environ["VALLY_MAX_TRIALS"] = str(total)

    from vally.engine.planning.plan import PlanInput, PlanOptions
    from vally.engine.planning.planner import build_plan
    from vally.models.project import ProjectConfig
    from vally.specs.environments import resolve_environment
    from vally.specs.loading import load_eval_file

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "many.eval.yaml"
        path.write_text(SPEC, encoding="utf-8")
        loaded = load_eval_file(path, project=ProjectConfig())
        tracemalloc.start()
        started = time.perf_counter()
        plan = build_plan(
            [PlanInput(loaded)],
            PlanOptions(runs=args.runs, models=["m1", "m2"]),
            resolve_environment=lambda item, s: resolve_environment(item, s, ProjectConfig()),
        )
        first, last = plan.trials[0], plan.trials[-1]
        planned = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        started = time.perf_counter()
        keys = sum(1 for _ in plan.keys)
        walked = time.perf_counter() - started
    assert keys == len(plan.trials) == total and last.key.trial == args.runs - 1, first
    print(f"trials planned:        {total:,}")
    print(f"peak memory planning:  {peak / 1e6:.2f} MB")
    print(f"time to plan:          {planned * 1000:.1f} ms")
    print(f"time to list all keys: {walked:.2f} s")


if __name__ == "__main__":
    main()
