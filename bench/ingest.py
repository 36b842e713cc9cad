"""Measure a whole ``vally ingest`` process against a plain read of the same JSON lines.

Usage (from the repository root, with the ``serve`` extra installed)::

    python3 bench/ingest.py                          # 10^5 records of one eval run, SQLite
    python3 bench/ingest.py --experiment             # 10^5 records of a 5-variant experiment
    python3 bench/ingest.py --records 20000 --rounds 5 --json out.json

The data is the synthetic history of the tests and of ``bench/history.py`` and
``bench/dashboard.py`` (``tests/history/synth.py``), in the on-disk format of ``vally eval``:
by default one run of 500 stimuli x 4 models (``--records`` / 2,000 trials each), each
record with a full trajectory and a grader verdict, about 3.8 KB a line; with
``--experiment``, the experiment of ``bench/dashboard.py`` (5 variants x 250 stimuli x 2
models), whose comparison with its baseline the ingest computes and keeps.

Then, in ``--rounds`` alternating pairs, each a fresh interpreter:

* ``lines``: the limit: every ``results.jsonl`` and ``run-summary.jsonl`` line of the run
  read and parsed with ``json.loads``, nothing kept;
* ``ingest``: ``python -m vally ingest RUN --store FILE`` into a new SQLite file, start-up
  included.

It prints the wall and CPU seconds and the peak resident memory (``VmHWM``) of each, and the
ratio of ingest to lines (wall and CPU): min / median / max over the rounds.
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
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.history.synth import RunSpec, write_run  # noqa: E402

STIMULI = 500
MODELS = ("model-a", "model-b", "model-c", "model-d")
EXPERIMENT_STIMULI = 250
EXPERIMENT_MODELS = ("model-a", "model-b")
VARIANTS = ("baseline", "v1", "v2", "v3", "v4")

_LAUNCH = (
    "import atexit, sys\n"
    "def _peak(target=sys.argv[1]):\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM'):\n"
    "            open(target, 'w').write(line.split()[1])\n"
    "atexit.register(_peak)\n"
    "mode, sys.argv = sys.argv[2], sys.argv[3:]\n"
    "if mode == 'lines':\n"
    "    import json\n"
    "    for name in sys.argv:\n"
    "        with open(name, 'rb') as handle:\n"
    "            for line in handle:\n"
    "                if line.strip():\n"
    "                    json.loads(line)\n"
    "else:\n"
    "    import runpy\n"
    "    sys.argv = ['vally', *sys.argv]\n"
    "    runpy.run_module('vally', run_name='__main__')\n"
)
"""A fresh interpreter that runs one mode and writes its peak resident KB (``VmHWM``) to
the file ``argv[1]`` as it exits."""


def generate(folder: Path, records: int, experiment: bool) -> Path:
    """Write the run (an experiment's folder with ``experiment``); returns its folder."""
    if experiment:
        per_cell = max(1, records // (EXPERIMENT_STIMULI * len(EXPERIMENT_MODELS) * len(VARIANTS)))
        spec = RunSpec(
            run_id="bench-exp",
            stimuli=EXPERIMENT_STIMULI,
            models=EXPERIMENT_MODELS,
            trials=per_cell,
            variants=VARIANTS,
            baseline="baseline",
            experiment="bench",
            trial_dirs=False,
            pass_bias={"baseline": 0.6, "v1": 0.7, "v2": 0.5, "v3": 0.62, "v4": 0.9},
        )
    else:
        per_cell = max(1, records // (STIMULI * len(MODELS)))
        spec = RunSpec(
            run_id="bench", stimuli=STIMULI, models=MODELS, trials=per_cell, trial_dirs=False
        )
    return write_run(folder / "run", spec)


def run_fresh(mode: str, args: list[str], peak_file: Path) -> dict[str, float]:
    """One mode in a fresh interpreter: wall and CPU seconds, peak resident MB.

    Raises:
        SystemExit: The mode failed (with its output).
    """
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-c", _LAUNCH, str(peak_file), mode, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "NO_COLOR": "1"},
    )
    output = process.stdout.read() if process.stdout else b""
    _pid, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise SystemExit(f"{mode} failed ({process.returncode}):\n{output.decode()[-4000:]}")
    return {
        "seconds": seconds,
        "cpuSeconds": usage.ru_utime + usage.ru_stime,
        "peakMb": int(peak_file.read_text()) / 1024,
    }


def spread(values: list[float]) -> dict[str, float]:
    """Min, median and max of ``values``."""
    return {
        "min": round(min(values), 2),
        "median": round(statistics.median(values), 2),
        "max": round(max(values), 2),
    }


def main() -> None:
    """Generate the run, time the rounds, print (and optionally write) the numbers."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--experiment", action="store_true", help="a 5-variant experiment")
    parser.add_argument("--rounds", type=int, default=3, help="alternating pairs")
    parser.add_argument("--dir", help="working folder (default: a temporary one)")
    parser.add_argument("--json", help="also write the numbers to this file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vally-ingest-", dir=args.dir) as tmp:
        work = Path(tmp)
        started = time.perf_counter()
        run = generate(work, args.records, args.experiment)
        files = sorted(str(p) for p in run.rglob("*.jsonl"))
        size = sum(Path(f).stat().st_size for f in files)
        lines = sum(1 for f in files for _ in open(f, "rb"))  # noqa: SIM115
        print(
            f"wrote {lines:,} lines ({size / 1e6:.0f} MB) in {time.perf_counter() - started:.1f}s",
            flush=True,
        )
        rounds: dict[str, list[dict[str, float]]] = {"lines": [], "ingest": []}
        store_bytes = 0
        for number in range(args.rounds):
            rounds["lines"].append(run_fresh("lines", files, work / "peak"))
            store = work / f"history-{number}.db"
            rounds["ingest"].append(
                run_fresh("ingest", ["ingest", str(run), "--store", str(store)], work / "peak")
            )
            store_bytes = store.stat().st_size
            for leftover in work.glob(f"history-{number}.db*"):
                leftover.unlink()
            print(
                f"round {number + 1}: lines {rounds['lines'][-1]['seconds']:.1f}s, "
                f"ingest {rounds['ingest'][-1]['seconds']:.1f}s",
                flush=True,
            )
    result: dict[str, Any] = {
        "records": lines,
        "shape": "experiment" if args.experiment else "eval",
        "resultsMb": round(size / 1e6),
        "storeMb": round(store_bytes / 1e6),
        "rounds": rounds,
        "wallRatio": spread(
            [
                i["seconds"] / r["seconds"]
                for i, r in zip(rounds["ingest"], rounds["lines"], strict=True)
            ]
        ),
        "cpuRatio": spread(
            [
                i["cpuSeconds"] / r["cpuSeconds"]
                for i, r in zip(rounds["ingest"], rounds["lines"], strict=True)
            ]
        ),
        "linesSeconds": spread([r["seconds"] for r in rounds["lines"]]),
        "ingestSeconds": spread([r["seconds"] for r in rounds["ingest"]]),
        "ingestPeakMb": spread([r["peakMb"] for r in rounds["ingest"]]),
        "linesPeakMb": spread([r["peakMb"] for r in rounds["lines"]]),
        "loadAverage": os.getloadavg(),
    }
    for name in ("wallRatio", "cpuRatio", "linesSeconds", "ingestSeconds", "ingestPeakMb",
                 "linesPeakMb"):  # fmt: skip
        numbers = result[name]
        print(f"{name:>14}: min {numbers['min']}  median {numbers['median']}  max {numbers['max']}")
    print(f"store {result['storeMb']} MB for {result['resultsMb']} MB of lines; "
          f"load average {result['loadAverage']} (2 CPUs)")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
