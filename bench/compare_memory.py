"""Measure the peak memory of ``vally compare``'s statistics path against the number of pairs.

Usage (from the repository root)::

    python3 bench/compare_memory.py                       # 10^3 and 10^4 pairs
    python3 bench/compare_memory.py --pairs 1000 10000 100000 --json out.json

It writes a baseline and a treatment ``results.jsonl`` (small records with a one-message
trajectory; 100 stimuli, ``pairs / 100`` trials each) and then, for each size, in a fresh
interpreter so the peak resident memory (``VmHWM``, Linux) is its own:

* ``lines``: reads both files' lines once (what any reader pays);
* ``stats``: vally's statistics path without a judge: both runs' records read
  (``vally.engine.rundir.load_records``), paired (``vally.tools.compare.pair_records``),
  each pair given a fixed verdict (a fake judge: the judge is not what is measured) and
  the figures computed (``vally.tools.compare.summarize``: win rate, score, McNemar, metric
  deltas, agreement).

It prints each peak, ``stats``' peak above ``lines`` per pair, the ratio of the largest
size's added peak to the smallest's (``growth``: 1.0 would be flat) and what each pair
beyond the smallest size adds (``marginal_kb_per_pair``: the imports of numpy, scipy and
vally are in every size's peak and cancel out).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

STIMULI = 100


def record_line(stimulus: str, trial: int, output: str, passed: bool) -> str:
    """One trial record with a one-message trajectory, as a ``results.jsonl`` line."""
    stim = {"name": stimulus, "prompt": f"do {stimulus}"}
    data = {
        "type": "trial-result",
        "schemaVersion": 1,
        "runId": "bench",
        "evalName": "ev",
        "evalFile": None,
        "stimulusName": stimulus,
        "stimulus": stim,
        "variant": None,
        "model": None,
        "trialIndex": trial,
        "trialId": f"{stimulus}/{trial}",
        "status": "success",
        "error": None,
        "startedAt": "2026-01-01T00:00:00.000Z",
        "completedAt": "2026-01-01T00:00:01.000Z",
        "durationMs": 1000,
        "gradeResult": {
            "passed": passed,
            "score": 1.0 if passed else 0.0,
            "threshold": None,
            "mode": "binary",
            "hasGraders": True,
            "errored": False,
        },
        "trajectory": {
            "stimulus": stim,
            "events": [
                {
                    "type": "assistant_message",
                    "timestamp": "2026-01-01T00:00:00.500Z",
                    "data": {"content": output},
                }
            ],
            "metrics": {"tokenUsage": {"totalTokens": 100 + trial % 7}, "wallTimeMs": 1000},
            "output": output,
        },
    }
    return json.dumps(data, separators=(",", ":")) + "\n"


def generate(folder: Path, pairs: int) -> None:
    """Write ``baseline.jsonl`` and ``treatment.jsonl`` with ``pairs`` matching trials."""
    for side, length in (("baseline", 40), ("treatment", 60)):
        with (folder / f"{side}.jsonl").open("w", encoding="utf-8") as handle:
            for index in range(pairs):
                stimulus, trial = f"s{index % STIMULI}", index // STIMULI
                passed = (index + (side == "treatment")) % 3 != 0
                handle.write(record_line(stimulus, trial, "x" * length, passed))


def run_lines(folder: Path) -> None:
    """Read both files' lines once."""
    for side in ("baseline", "treatment"):
        with (folder / f"{side}.jsonl").open(encoding="utf-8") as handle:
            for _line in handle:
                pass


def run_stats(folder: Path) -> None:
    """Read, pair and summarise both runs with a fixed verdict per pair."""
    from vally.engine.rundir import load_records
    from vally.tools import compare

    baseline = load_records(folder / "baseline.jsonl")
    treatment = load_records(folder / "treatment.jsonl")
    pairing = compare.pair_records(baseline, treatment)
    passes = ({"winner": "B", "judgeModel": "fake"}, {"winner": "A", "judgeModel": "fake"})
    results = [
        compare.PairResult(pair, 1.0 if i % 2 else 0.5, "treatment", passes)
        for i, pair in enumerate(pairing.pairs)
    ]
    compare.summarize("baseline", "treatment", pairing, results, "fake")


def measure(mode: str, folder: Path) -> float:
    """Run one mode in a fresh interpreter; its peak resident MB."""
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the forking parent.
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "import compare_memory as m; from pathlib import Path;"
        f"m.run_{mode}(Path(sys.argv[2]));"
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0];"
        "print(int(hwm.split()[1]) / 1024)"
    )
    here = str(Path(__file__).parent)
    done = subprocess.run(
        [sys.executable, "-c", code, here, str(folder)], capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(f"{mode} failed:\n{done.stderr}")
    return float(done.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--dir", default=None, help="where to write the runs")
    parser.add_argument("--json", default=None, help="also write the numbers here")
    args = parser.parse_args()
    rows = []
    for pairs in args.pairs:
        with tempfile.TemporaryDirectory(prefix="vally-compare-", dir=args.dir) as tmp:
            folder = Path(tmp)
            generate(folder, pairs)
            lines, stats = measure("lines", folder), measure("stats", folder)
        rows.append(
            {
                "pairs": pairs,
                "lines_peak_mb": round(lines, 1),
                "stats_peak_mb": round(stats, 1),
                "kb_per_pair": round((stats - lines) * 1024 / pairs, 2),
            }
        )
    added = [r["stats_peak_mb"] - r["lines_peak_mb"] for r in rows]
    span = max(rows[-1]["pairs"] - rows[0]["pairs"], 1)
    result = {
        "rows": rows,
        "growth": round(added[-1] / max(added[0], 1e-9), 1),
        "marginal_kb_per_pair": round((added[-1] - added[0]) * 1024 / span, 2),
    }
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
