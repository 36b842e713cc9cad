"""Measure ``vally experiment merge``'s streaming path against streaming the lines once.

Usage (from the repository root)::

    python3 bench/merge_memory.py                          # 10^5 records, 16 shards
    python3 bench/merge_memory.py --records 1000000        # the 10^6 goal
    python3 bench/merge_memory.py --records 10000 --json out.json

It writes a sharded run's shard folders (``results.jsonl`` of one variant and one eval,
small records; ``shard-manifest.json``; ``plan-snapshot.json``; ``--shards`` shards), seals
each one as a finished shard seals itself (``shard-seal.json``, see
``vally_experiment.seal``; ``seal_seconds`` is what that costs all shards together) and
then, each in a fresh interpreter so the peak resident memory is its own:

* ``lines``: reads every shard's lines and writes them to one file (the physical limit of
  a merge: streaming the lines once);
* ``plan``: what a merge of unsealed shards holds before it reads a record (the shards'
  manifests and plan snapshots, read and validated in full, and the trial index), with
  vally imported: memory that grows with the plan;
* ``unsealed``: vally's merge path over the shards read in full, seals ignored
  (``vally_experiment.merge.merge_records``): every record parsed, checked against its shard's
  manifest, passed through to the merged file and counted into the run summaries, which
  are then written;
* ``merge``: the same path as a merge takes it, over the sealed shards: the seals read and
  checked against one another, the results files copied and checked against their seals,
  the sealed tallies added up, the summaries written;
* ``command``: the whole ``vally experiment merge`` command, as a user runs it (start-up,
  the merge path, the summaries, ``report.md`` and the console's summary and comparison;
  console output to ``/dev/null``).

``lines``, ``merge`` and ``command`` run ``--repeat`` times in turn (3 by default) and the
run of median time is kept. It prints the wall time and peak resident memory (``VmHWM``,
Linux) of each and the time ratios to ``lines`` of ``merge`` (``time_ratio``; it includes
importing vally), ``unsealed`` (``unsealed_time_ratio``) and ``command``
(``command_time_ratio``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from fresh import measure_fresh

VARIANT = "a"
EVAL = "ev"
STIMULI = 100


def record_line(index: int) -> tuple[str, str]:
    """A small trial record (as a ``results.jsonl`` line) and its trial key."""
    stimulus = f"s{index % STIMULI}"
    trial = index // STIMULI
    data = {
        "type": "trial-result",
        "schemaVersion": 1,
        "runId": "bench",
        "evalName": EVAL,
        "evalFile": None,
        "stimulusName": stimulus,
        "stimulus": {"name": stimulus, "prompt": "p", "graders": [{"type": "completed"}]},
        "variant": VARIANT,
        "model": None,
        "trialIndex": trial,
        "trialId": f"{stimulus}/{trial}",
        "status": "success",
        "error": None,
        "startedAt": "2026-01-01T00:00:00.000Z",
        "completedAt": "2026-01-01T00:00:01.000Z",
        "durationMs": 1,
        "gradeResult": {
            "passed": index % 3 != 0,
            "score": 1.0 if index % 3 else 0.0,
            "threshold": None,
            "mode": "binary",
            "hasGraders": True,
            "errored": False,
        },
        "trajectory": None,
    }
    key = f"{VARIANT}/{EVAL}/{stimulus}/default/{trial}"
    return json.dumps(data, separators=(",", ":")) + "\n", key


def generate(folder: Path, records: int, shards: int) -> None:
    """Write the shard folders of one run: each shard's results file, its manifest and
    its copy of the plan snapshot (the same file in every shard, as a run writes them)."""
    from vally.engine.shards.partition import MANIFEST_FILE, SNAPSHOT_FILE, plan_digest

    keys: list[list[str]] = [[] for _ in range(shards)]
    handles = []
    for shard in range(shards):
        path = folder / f"shard-{shard + 1}" / VARIANT / "results.jsonl"
        path.parent.mkdir(parents=True)
        handles.append(path.open("w", encoding="utf-8"))
    plan: list[str] = []
    for index in range(records):
        line, key = record_line(index)
        handles[index % shards].write(line)
        keys[index % shards].append(key)
        plan.append(key)
    for handle in handles:
        handle.close()
    snapshot = {
        "experiment": "bench",
        "baseline": VARIANT,
        "variants": [VARIANT],
        "evals": [{"variant": VARIANT, "name": EVAL, "file": "ev.yaml"}],
        "trials": plan,
    }
    snapshot_text = json.dumps(snapshot)
    digest = plan_digest(snapshot)
    for i, selected in enumerate(keys):
        shard_dir = folder / f"shard-{i + 1}"
        manifest = {
            "runId": "bench",
            "experiment": "bench",
            "shard": {"index": i + 1, "total": shards},
            "strategy": "round-robin",
            "planDigest": digest,
            "selectedKeys": selected,
            "completedKeys": selected,
            "finished": True,
        }
        (shard_dir / MANIFEST_FILE).write_text(json.dumps(manifest), encoding="utf-8")
        (shard_dir / SNAPSHOT_FILE).write_text(snapshot_text, encoding="utf-8")


def seal(folder: Path) -> None:
    """Seal every generated shard, as a finished shard seals itself."""
    from vally.engine.shards.partition import MANIFEST_FILE, SNAPSHOT_FILE
    from vally_experiment.seal import seal as seal_shard

    for shard_dir in sorted(folder.glob("shard-*")):
        manifest = json.loads((shard_dir / MANIFEST_FILE).read_text(encoding="utf-8"))
        snapshot = json.loads((shard_dir / SNAPSHOT_FILE).read_text(encoding="utf-8"))
        if not seal_shard(shard_dir, manifest, snapshot):
            raise SystemExit(f"{shard_dir} could not be sealed")


def run_lines(folder: Path) -> None:
    """Stream every shard's lines once into one file."""
    with (folder / "lines.jsonl").open("w", encoding="utf-8") as out:
        for path in sorted(folder.glob("shard-*/*/results.jsonl")):
            with path.open(encoding="utf-8") as handle:
                for line in handle:
                    out.write(line)


def _prepare(folder: Path) -> tuple[Any, ...]:
    """What a merge of unsealed shards holds before it reads a record: the shards'
    manifests and plan snapshots, read and validated as ``vally experiment merge`` does,
    and the trial index (all of them grow with the plan)."""
    from vally_experiment.merge import read_full_shards
    from vally_experiment.validation import TrialIndex

    shards = read_full_shards(sorted(folder.glob("shard-*")))
    return shards, TrialIndex(shards[0].snapshot, shards, shards[0].plan_keys)


def run_plan(folder: Path) -> None:
    """Only the plan state of an unsealed merge (see :func:`_prepare`), vally imported."""
    import vally_experiment.merge  # noqa: F401

    _prepare(folder)


def _merge_path(folder: Path, shards: Any, out: str) -> None:
    from vally.engine.trials.summaries import VariantSummaries
    from vally_experiment.merge import merge_records

    target = folder / out
    summarizer = VariantSummaries(shards[0].snapshot, run_id="bench", run_dir=target)
    _shards, _files, tallies = merge_records(shards, summarizer, target, print)
    summarizer.write(summarizer.finish(tallies))


def run_unsealed(folder: Path) -> None:
    """vally's merge path over the shards read in full, their seals ignored."""
    from vally_experiment.merge import read_full_shards

    _merge_path(folder, read_full_shards(sorted(folder.glob("shard-*"))), "merged-unsealed")


def run_merge(folder: Path) -> None:
    """vally's merge path as a merge takes it: over the sealed shards."""
    from vally_experiment.seal import read_sealed_shards

    shards = read_sealed_shards(sorted(folder.glob("shard-*")))
    if shards is None:
        raise SystemExit("the generated shards are not sealed")
    _merge_path(folder, shards, "merged")


def run_command(folder: Path) -> None:
    """``vally experiment merge`` over the generated shards, as from a shell."""
    import contextlib
    import os

    from vally.cli.app import app

    shards = [str(path) for path in sorted(folder.glob("shard-*"))]
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        try:
            app(["experiment", "merge", *shards, "-o", str(folder / "merged-command")], "vally")
        except SystemExit as exit_:
            if exit_.code not in (0, 1, None):  # 1: the merged verdict failed
                raise


def measure(mode: str, folder: Path) -> dict[str, float]:
    """Run one mode in a fresh interpreter: wall seconds and peak resident MB."""
    seconds, peak = measure_fresh("merge_memory", f"run_{mode}", folder)
    return {"seconds": seconds, "peak_mb": peak}


def clean(folder: Path) -> None:
    """Remove what the modes wrote, so each run writes into an empty place."""
    for name in ("lines.jsonl", "merged", "merged-unsealed", "merged-command"):
        path = folder / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


def median(runs: list[dict[str, float]]) -> dict[str, Any]:
    """The run of median time (its time and peak), with every run's time."""
    ordered = sorted(runs, key=lambda run: run["seconds"])
    middle: dict[str, Any] = dict(ordered[len(ordered) // 2])
    middle["all_seconds"] = [round(run["seconds"], 3) for run in runs]
    return middle


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--dir", default=None, help="where to write the shards")
    parser.add_argument("--json", default=None, help="also write the numbers here")
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of lines, merge and command (median)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vally-merge-", dir=args.dir) as tmp:
        folder = Path(tmp)
        start = time.perf_counter()
        generate(folder, args.records, args.shards)
        generated = time.perf_counter() - start
        start = time.perf_counter()
        seal(folder)
        sealed = time.perf_counter() - start
        runs: dict[str, list[dict[str, float]]] = {"lines": [], "merge": [], "command": []}
        for _ in range(args.repeat):  # alternating, so load changes hit every mode alike
            for mode, taken in runs.items():
                taken.append(measure(mode, folder))
                clean(folder)
        lines, merged, command = (median(runs[mode]) for mode in ("lines", "merge", "command"))
        plan = measure("plan", folder)
        unsealed = measure("unsealed", folder)
    result = {
        "records": args.records,
        "shards": args.shards,
        "generate_seconds": round(generated, 2),
        "seal_seconds": round(sealed, 2),
        "lines": lines,
        "plan": plan,
        "unsealed": unsealed,
        "merge": merged,
        "command": command,
        "time_ratio": round(merged["seconds"] / max(lines["seconds"], 1e-9), 2),
        "unsealed_time_ratio": round(unsealed["seconds"] / max(lines["seconds"], 1e-9), 1),
        "command_time_ratio": round(command["seconds"] / max(lines["seconds"], 1e-9), 1),
    }
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
