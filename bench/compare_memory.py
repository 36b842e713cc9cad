"""Measure the peak memory of ``vally compare``'s statistics path against the number of pairs.

Usage (from the repository root)::

    python3 bench/compare_memory.py                       # 10^4 and 10^5 pairs
    python3 bench/compare_memory.py --pairs 10000 100000 1000000 --json out.json
    python3 bench/compare_memory.py --stimuli 1000 10000          # 10 trials a stimulus

It writes a baseline and a treatment ``results.jsonl`` (small records with a one-message
trajectory; 100 stimuli, ``pairs / 100`` trials each) and then, for each size, in a fresh
interpreter so the peak resident memory (``VmHWM``, Linux) is its own:

* ``lines``: reads both files' lines once (what any reader pays);
* ``stats``: vally's streamed statistics path without a judge: the two files indexed
  (``vally_compare.pair_index.index_pairs``), each pair's two records read back, given a
  fixed verdict (a fake judge: the judge is not what is measured), counted
  (``vally_compare.judged_tally.PairTally``) and its ``--output`` trial entry written
  (``vally_compare.judged_stream.TrialWriter``), then every figure computed
  (``vally_compare.judged.summarize_tally``);
* ``whole``: the same figures from both runs' records held in memory
  (``load_records``, ``pair_records``, ``summarize``), as ``compare`` did before; only
  up to ``--whole-max`` pairs, since it grows by tens of KB a pair.

With ``--stimuli`` the sizes are numbers of stimuli instead, ``--trials`` trials each
(default 10): what grows is then what the statistics keep per stimulus (the running sums,
the sign-flip test's draws), not per pair.

It prints each peak and time, the ratio of the largest size's ``stats`` peak to the
smallest's (``growth``: 1.0 is flat; the issue's test allows 1.5 from 10^4 to 10^5) and
what each pair and each stimulus beyond the smallest size adds to it
(``marginal_kb_per_pair``, ``marginal_kb_per_stimulus``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from fresh import measure_fresh

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


def generate(folder: Path, pairs: int, stimuli: int = STIMULI) -> None:
    """Write ``baseline.jsonl`` and ``treatment.jsonl`` with ``pairs`` matching trials over
    ``stimuli`` stimuli."""
    for side, length in (("baseline", 40), ("treatment", 60)):
        with (folder / f"{side}.jsonl").open("w", encoding="utf-8") as handle:
            for index in range(pairs):
                stimulus, trial = f"s{index % stimuli}", index // stimuli
                passed = (index + (side == "treatment")) % 3 != 0
                handle.write(record_line(stimulus, trial, "x" * length, passed))


def run_lines(folder: Path) -> None:
    """Read both files' lines once."""
    for side in ("baseline", "treatment"):
        with (folder / f"{side}.jsonl").open(encoding="utf-8") as handle:
            for _line in handle:
                pass


def run_whole(folder: Path) -> None:
    """Read, pair and summarise both runs held in memory, a fixed verdict per pair."""
    from vally.engine.records.run_folder import load_records
    from vally_compare import judged as compare

    baseline = load_records(folder / "baseline.jsonl")
    treatment = load_records(folder / "treatment.jsonl")
    pairing = compare.pair_records(baseline, treatment)
    results = [
        compare.PairResult(pair, verdict(i), "treatment", PASSES)
        for i, pair in enumerate(pairing.pairs)
    ]
    compare.summarize("baseline", "treatment", pairing, results, "fake")


PASSES = ({"winner": "B", "judgeModel": "fake"}, {"winner": "A", "judgeModel": "fake"})
"""The fixed judge passes of every pair."""


def verdict(position: int) -> float:
    """The fixed score of the pair at ``position``."""
    return 1.0 if position % 2 else 0.5


def run_stats(folder: Path) -> None:
    """Index both runs, read each pair back, count a fixed verdict, write its trial entry."""
    from vally_compare import judged as compare, judged_record
    from vally_compare.judged_stream import TrialWriter
    from vally_compare.pair_index import index_pairs

    index = index_pairs(folder / "baseline.jsonl", folder / "treatment.jsonl")
    tally = compare.new_tally()
    writer = TrialWriter(folder / "trials.part")
    with index.reader() as read:
        for position in range(len(index)):
            pair = read(position)
            result = compare.PairResult(pair, verdict(position), "treatment", PASSES)
            tally.add(pair.key[:2], result, pair.baseline, pair.treatment)
            writer.add(position, judged_record.trial_json(result))
    writer.close()
    pairing = compare.Pairing([], index.only_baseline, index.only_treatment)
    compare.summarize_tally("baseline", "treatment", pairing, [], tally, "fake", matched=len(index))


def measure(mode: str, folder: Path) -> tuple[float, float]:
    """Run one mode in a fresh interpreter; its peak resident MB and its seconds."""
    seconds, peak = measure_fresh("compare_memory", f"run_{mode}", folder)
    return peak, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument(
        "--stimuli", type=int, nargs="+", default=None, help="sizes in stimuli instead of pairs"
    )
    parser.add_argument("--trials", type=int, default=10, help="trials a stimulus (--stimuli)")
    parser.add_argument("--whole-max", type=int, default=10_000, help="largest whole run")
    parser.add_argument("--dir", default=None, help="where to write the runs")
    parser.add_argument("--json", default=None, help="also write the numbers here")
    args = parser.parse_args()
    if args.stimuli:
        shapes = [(stimuli * args.trials, stimuli) for stimuli in args.stimuli]
    else:
        shapes = [(pairs, STIMULI) for pairs in args.pairs]
    rows = []
    for pairs, stimuli in shapes:
        with tempfile.TemporaryDirectory(prefix="vally-compare-", dir=args.dir) as tmp:
            folder = Path(tmp)
            generate(folder, pairs, stimuli)
            row: dict[str, float | None] = {"pairs": pairs, "stimuli": stimuli}
            for mode in ("lines", "stats", "whole"):
                if mode == "whole" and pairs > args.whole_max:
                    row[f"{mode}_peak_mb"] = row[f"{mode}_seconds"] = None
                    continue
                peak, seconds = measure(mode, folder)
                row[f"{mode}_peak_mb"], row[f"{mode}_seconds"] = round(peak, 1), round(seconds, 1)
        rows.append(row)
        print(json.dumps(row), flush=True)
    first, last = rows[0], rows[-1]
    span = max(int(last["pairs"] or 0) - int(first["pairs"] or 0), 1)
    low, high = float(first["stats_peak_mb"] or 0), float(last["stats_peak_mb"] or 0)
    result = {
        "rows": rows,
        "growth": round(high / max(low, 1e-9), 2),
        "marginal_kb_per_pair": round((high - low) * 1024 / span, 3),
        "marginal_kb_per_stimulus": round(
            (high - low) * 1024 / max(int(last["stimuli"] or 0) - int(first["stimuli"] or 0), 1), 3
        ),
        "largest_peak_vs_500_mb": round(high / 500, 2),
    }
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
