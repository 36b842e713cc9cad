"""Measure vally's orchestrator throughput and CLI start-up time.

Usage (from the repository root)::

    python3 bench/throughput.py                 # default sizes
    python3 bench/throughput.py --trials 5000   # more trials for the mock runs
    python3 bench/throughput.py --json out.json # also write the numbers as JSON

What it measures:

* ``vally eval`` run in-process (``vally.run_eval``, console report off, every
  other output on: results.jsonl, run-summary.jsonl, report.md, per-trial folders) over one
  generated spec, with the ``mock`` executor and with the ``command`` executor running
  ``true``, at ``--workers 1`` and ``--workers 8``, on the ``local`` backend; and the
  ``mock`` executor on an in-memory backend (``bench/null_backend.py``), which isolates
  the orchestrator from workspace and process costs. Each trial has one ``output-contains``
  grader. The time covers planning, the backend, execution, grading and every file write;
  interpreter start-up is excluded.
* ``vally --help`` start-up: the median wall time of N fresh subprocesses.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SPEC = """\
name: bench
defaults:
  runs: {runs}
  timeout: 30s
  executor: {executor}
stimuli:
{stimuli}
"""


def write_spec(folder: Path, executor: str, trials: int, stimuli: int = 10) -> Path:
    runs = max(1, trials // stimuli)
    lines = "\n".join(
        f"  - {{name: s{i}, prompt: 'task {i}', "
        "graders: [{type: output-contains, config: {substring: task}}]}"
        for i in range(stimuli)
    )
    path = folder / "eval.yaml"
    path.write_text(SPEC.format(runs=runs, executor=executor, stimuli=lines), encoding="utf-8")
    return path


NULL_BACKEND = str(Path(__file__).with_name("null_backend.py"))


def measure_eval(
    executor: str,
    trials: int,
    workers: int,
    base: Path | None = None,
    backend: str | None = None,
) -> dict[str, float]:
    """Run one generated eval in-process and time it (imports warmed up beforehand)."""
    from vally import EvalRequest, run_eval

    with tempfile.TemporaryDirectory(prefix="vally-bench-", dir=base) as tmp:
        folder = Path(tmp)
        spec = write_spec(folder, executor, trials)
        opts = EvalRequest(
            eval_specs=[str(spec)],
            output_dir=str(folder / "out"),
            workers=workers,
            backend=backend,
            console=False,
        )
        start = time.perf_counter()
        result = run_eval(opts)
        elapsed = time.perf_counter() - start
        if result.errored or result.cancelled:
            raise SystemExit(f"bench run failed: {result.error or result.failures}")
        done = len((next((folder / "out").iterdir()) / "results.jsonl").read_text().splitlines())
    return {"trials": done, "seconds": elapsed, "trials_per_second": done / elapsed}


def measure_startup(repeats: int) -> dict[str, float]:
    times: list[float] = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", "from vally.cli.app import main; main()", "--help"],
            check=True,
            capture_output=True,
        )
        times.append(time.perf_counter() - start)
    baseline: list[float] = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True, capture_output=True)
        baseline.append(time.perf_counter() - start)
    return {
        "median_seconds": statistics.median(times),
        "min_seconds": min(times),
        "python_baseline_median_seconds": statistics.median(baseline),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=2000, help="trials per mock run")
    parser.add_argument(
        "--command-trials", type=int, default=200, help="trials per 'command: true' run"
    )
    parser.add_argument("--startup-runs", type=int, default=15, help="vally --help samples")
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    parser.add_argument(
        "--dir", type=Path, help="folder for the run outputs (default: the system temp folder)"
    )
    args = parser.parse_args()
    os.environ.setdefault("NO_COLOR", "1")

    mock = "{name: mock, config: {output: 'done: {prompt}'}}"
    command = "{name: command, config: {command: ['true'], output: stdout}}"
    results: dict[str, object] = {"python": sys.version.split()[0], "cpus": os.cpu_count()}
    rows = []
    measure_eval(mock, 20, 1, args.dir)  # warm-up: imports and plugin loading
    for label, executor, trials, backend in (
        ("mock", mock, args.trials, None),
        ("mock, null backend", mock, args.trials, NULL_BACKEND),
        ("command true", command, args.command_trials, None),
    ):
        for workers in (1, 8):
            numbers = measure_eval(executor, trials, workers, args.dir, backend)
            rows.append((label, workers, numbers))
            results[f"{label} / workers {workers}"] = numbers
    startup = measure_startup(args.startup_runs)
    results["vally --help"] = startup

    print(f"{'executor':<20} {'workers':>7} {'trials':>7} {'seconds':>8} {'trials/s':>9}")
    for label, workers, numbers in rows:
        print(
            f"{label:<20} {workers:>7} {numbers['trials']:>7.0f} "
            f"{numbers['seconds']:>8.2f} {numbers['trials_per_second']:>9.0f}"
        )
    print(
        f"vally --help start-up: median {startup['median_seconds'] * 1000:.0f} ms "
        f"(bare python: {startup['python_baseline_median_seconds'] * 1000:.0f} ms)"
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
