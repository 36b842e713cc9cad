"""Peak memory of a large mock ``vally eval`` or ``vally experiment run``: does it grow
with the number of trials?

Usage (from the repository root)::

    python3 bench/eval_memory.py                         # 10^5 trials against the 300 MB limit
    python3 bench/eval_memory.py --trials 10000 100000   # several sizes, side by side
    python3 bench/eval_memory.py --experiment --trials 10000 100000   # 2 variants, same sizes
    python3 bench/eval_memory.py --stimuli 1000 10000    # 1 run of each of 10^3, then 10^4 stimuli
    python3 bench/eval_memory.py --experiment --stimuli 1000 10000
    python3 bench/eval_memory.py --no-console --json out.json

Each size runs in a fresh interpreter, so each peak (``VmHWM``, Linux) is its own: one
generated spec (100 stimuli, ``runs`` = trials / 100, the ``mock`` executor, one
``output-contains`` grader), through ``vally.run_eval`` on the in-memory backend of
``bench/null_backend.py``, with every default output on (``results.jsonl``,
``run-summary.jsonl``, ``report.md``, trial folders, the console report sent to
``/dev/null``). ``import`` is the same interpreter's peak after importing vally and its
built-in plugins, before any run: what a run adds is the difference.

With ``--stimuli`` the sizes are numbers of stimuli instead, each run ``--runs`` times
(default 1; with ``--experiment`` in each variant): what grows is then the state a run keeps
per stimulus (the plan, the summaries' tallies, the reports' rows), not per trial.

It prints the wall time and peak of each size, the ratio of each peak to the limit
(300 MB) and the ratio of the largest size's peak to the smallest's.

With ``--experiment`` each size is an experiment of two variants over the same spec (the
mock answers differently in each; half of the trials per variant, so ``trials`` is the
total), through ``vally.run_experiment``, with the same outputs (per-variant
``results.jsonl``, the experiment's ``report.md``, the console's comparison).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

LIMIT_MB = 300.0
"""The goal: a 100,000-trial mock eval peaks under this."""

STIMULI = 100

SPEC = """\
name: memory
defaults:
  runs: {runs}
  timeout: 30s
  executor: {{name: mock, config: {{output: 'done: {{prompt}}'}}}}
stimuli:
{stimuli}
"""

NULL_BACKEND = str(Path(__file__).with_name("null_backend.py"))

EXPERIMENT = """\
name: memory
evals: [eval.yaml]
vary: [/defaults/executor/config/output]
baseline: base
variants:
  base: {}
  other:
    defaults:
      executor: {config: {output: 'no answer'}}
"""
VARIANTS = 2


def write_spec(folder: Path, trials: int, stimuli: int = STIMULI) -> Path:
    """A spec of ``stimuli`` stimuli with ``trials`` trials in all (one grader each)."""
    lines = "\n".join(
        f"  - {{name: s{i}, prompt: 'task {i}', "
        "graders: [{type: output-contains, config: {substring: task}}]}"
        for i in range(stimuli)
    )
    path = folder / "eval.yaml"
    runs = max(1, trials // stimuli)
    path.write_text(SPEC.format(runs=runs, stimuli=lines), encoding="utf-8")
    return path


def _options(folder: Path, console: bool) -> dict[str, Any]:
    """The options both runs share: the null backend, 8 workers, output in ``folder``."""
    return {
        "output_dir": str(folder / "out"),
        "workers": 8,
        "backend": NULL_BACKEND,
        "console": console,
    }


def _written(result: Any) -> int:
    """How many records a finished run wrote (a failed run stops the benchmark)."""
    if result.errored or result.cancelled:
        raise SystemExit(f"the run failed: {result.error or result.failures}")
    return len(result.records)


def run_eval(folder: Path, trials: int, console: bool, stimuli: int = STIMULI) -> int:
    """Run the generated eval in this process; returns the number of records written."""
    from vally import EvalRequest, run_eval

    spec = write_spec(folder, trials, stimuli)
    return _written(run_eval(EvalRequest(eval_specs=[str(spec)], **_options(folder, console))))


def run_experiment(folder: Path, trials: int, console: bool, stimuli: int = STIMULI) -> int:
    """Run the generated experiment (:data:`VARIANTS` variants, ``trials`` trials in all)
    in this process; returns the number of records written."""
    from vally import ExperimentRequest, run_experiment

    write_spec(folder, trials // VARIANTS, stimuli)
    experiment = folder / "experiment.yaml"
    experiment.write_text(EXPERIMENT, encoding="utf-8")
    request = ExperimentRequest(experiment_file=str(experiment), **_options(folder, console))
    return _written(run_experiment(request))


def measure(
    folder: Path, trials: int, console: bool, experiment: bool = False, stimuli: int = STIMULI
) -> dict[str, float]:
    """Run one size (an eval, or an experiment with ``experiment``) of ``stimuli`` stimuli
    and ``trials`` trials in all, in a fresh interpreter: wall seconds, peak resident MB,
    and the peak after importing vally (before the run)."""
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the forking parent.
    code = (
        "import sys, time; sys.path.insert(0, sys.argv[1]);"
        "from pathlib import Path; import eval_memory as m;"
        "import vally, vally_builtin.reporters.console, vally_builtin.reporters.markdown;"
        "hwm = lambda: int([l for l in open('/proc/self/status')"
        " if l.startswith('VmHWM')][0].split()[1]) / 1024;"
        "imported = hwm(); start = time.perf_counter();"
        "run = m.run_experiment if sys.argv[5] == '1' else m.run_eval;"
        "n = run(Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == '1', int(sys.argv[6]));"
        "took = time.perf_counter() - start;"
        "print('RESULT', n, took, hwm(), imported, file=sys.stderr)"
    )
    here = str(Path(__file__).parent)
    flags = ["1" if console else "0", "1" if experiment else "0", str(stimuli)]
    argv = [sys.executable, "-c", code, here, str(folder), str(trials), *flags]
    done = subprocess.run(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False
    )
    lines = [line for line in done.stderr.splitlines() if line.startswith("RESULT ")]
    if done.returncode or not lines:
        raise SystemExit(f"the {trials}-trial run failed:\n{done.stderr[-3000:]}")
    _, records, seconds, peak, imported = lines[-1].split()
    return {
        "stimuli": stimuli,
        "trials": int(records),
        "seconds": round(float(seconds), 1),
        "peak_mb": round(float(peak), 1),
        "import_peak_mb": round(float(imported), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, nargs="+", default=[100_000])
    parser.add_argument(
        "--stimuli",
        type=int,
        nargs="+",
        default=None,
        help="sizes in stimuli instead of trials (each run --runs times)",
    )
    parser.add_argument("--runs", type=int, default=1, help="runs per stimulus with --stimuli")
    parser.add_argument(
        "--no-console", action="store_true", help="run without the console reporter"
    )
    parser.add_argument(
        "--experiment", action="store_true", help="run a two-variant experiment instead"
    )
    parser.add_argument("--dir", default=None, help="where the runs write their folders")
    parser.add_argument("--json", default=None, help="also write the numbers here")
    args = parser.parse_args()
    per_stimulus = args.runs * (VARIANTS if args.experiment else 1)
    if args.stimuli:
        shapes = [(stimuli * per_stimulus, stimuli) for stimuli in args.stimuli]
    else:
        shapes = [(trials, STIMULI) for trials in args.trials]
    sizes: list[dict[str, float]] = []
    for trials, stimuli in shapes:
        with tempfile.TemporaryDirectory(prefix="vally-eval-memory-", dir=args.dir) as tmp:
            start = time.perf_counter()
            console = not args.no_console
            numbers = measure(Path(tmp), trials, console, args.experiment, stimuli)
        numbers["peak_vs_limit"] = round(numbers["peak_mb"] / LIMIT_MB, 2)
        numbers["total_seconds"] = round(time.perf_counter() - start, 1)
        sizes.append(numbers)
        print(json.dumps(numbers), flush=True)
    mode = "experiment" if args.experiment else "eval"
    result: dict[str, object] = {"mode": mode, "limit_mb": LIMIT_MB, "sizes": sizes}
    if len(sizes) > 1:
        result["largest_vs_smallest_peak"] = round(sizes[-1]["peak_mb"] / sizes[0]["peak_mb"], 2)
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
