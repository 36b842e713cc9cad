"""Measure ``vally experiment merge`` against streaming the shards' lines once.

Usage (from the repository root)::

    python3 bench/merge_memory.py                                  # 10^5 records, 100 stimuli
    python3 bench/merge_memory.py --records 100000 --stimuli 1000  # the issue's sizes
    python3 bench/merge_memory.py --records 1000000 --stimuli 10000 --repeat 1
    python3 bench/merge_memory.py --records 100000 --stimuli 1000 --template <run>/results.jsonl

It writes a sharded run's shard folders (``results.jsonl`` of one variant and one eval,
small records, or copies of the trial records of a results file given as ``--template``;
``shard-manifest.json``; ``plan-snapshot.json``; ``--shards`` shards) twice:
``unsealed/`` as written and ``sealed/``, the same files with each shard sealed as a
finished shard seals itself (``shard-seal.json``, see ``vally_experiment.seal``). Then, each
in a fresh interpreter so its peak resident memory (``VmHWM``, Linux) is its own, with vally
imported before the clock starts (a constant, whatever the size):

* ``lines``: reads every shard's lines and writes them to one file (the physical limit of
  a merge: streaming the lines once);
* ``merge``: vally's merge path over the sealed shards: the seals read and checked against
  one another, the results files copied and checked against their seals, the sealed tallies
  added up, the summaries written;
* ``command``: the whole ``vally experiment merge`` of the sealed shards, as a user runs it
  (the merge path, the summaries, ``report.md``, the console's summary and comparison;
  console output to ``/dev/null``);
* ``parse``: ``lines`` with every line also parsed as JSON (``json.loads``): the floor of
  any merge that reads the records, as a merge of unsealed shards must (they hold no
  counts to add up), with the standard library's parser;
* ``read``: ``lines`` with every line parsed as the merge parses it
  (``vally.models.jsontext.loads_bounded`` under the record depth limit: ``orjson`` when
  it is installed, ``json`` otherwise): the floor with the parser the merge really uses;
* ``unsealed``: the merge path over the unsealed shards (every record parsed, checked
  against its shard's manifest, passed through and counted);
* ``command_unsealed``: the whole command over the unsealed shards;
* ``plan`` (once): what a merge of unsealed shards holds before it reads a record (the
  manifests and plan snapshots, and the trial index);
* ``seal`` (once): one shard sealing itself (its time per record and its peak).

Each mode runs right after a ``lines`` run, ``--repeat`` times in turn (3 by default), and
the script prints per mode the ratio of its time to that ``lines`` run's and its peak, as
min/median/max over the pairs (load on the machine moves both alike).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from fresh import measure_fresh

VARIANT = "a"
EVAL = "ev"
STIMULI = 100
SEALED, UNSEALED = "sealed", "unsealed"
"""The folders of the two copies of the shards (see :func:`prepare`)."""


TEMPLATES: list[dict[str, Any]] = []
"""Trial records to copy instead of the small one (``--template``), used in turn."""


def template_record(index: int, stimulus: str, trial: int) -> dict[str, Any]:
    """A copy of the ``index``-th template (in turn) as the trial of ``stimulus``."""
    data = json.loads(json.dumps(TEMPLATES[index % len(TEMPLATES)]))
    data.update(
        runId="bench",
        evalName=EVAL,
        stimulusName=stimulus,
        variant=VARIANT,
        model=None,
        trialIndex=trial,
        trialId=f"{stimulus}/{trial}",
        experiment=None,
    )
    data["stimulus"]["name"] = stimulus
    if data.get("trajectory") and isinstance(data["trajectory"].get("stimulus"), dict):
        data["trajectory"]["stimulus"]["name"] = stimulus
    return data


def record_line(index: int, stimuli: int = STIMULI) -> tuple[str, str]:
    """A small trial record (as a ``results.jsonl`` line), or a copy of a template, and its
    trial key, of one of ``stimuli`` stimuli."""
    stimulus = f"s{index % stimuli}"
    trial = index // stimuli
    key = f"{VARIANT}/{EVAL}/{stimulus}/default/{trial}"
    data: dict[str, Any]
    if TEMPLATES:
        data = template_record(index, stimulus, trial)
        return json.dumps(data, separators=(",", ":")) + "\n", key
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
    return json.dumps(data, separators=(",", ":")) + "\n", key


def generate(folder: Path, records: int, shards: int, stimuli: int = STIMULI) -> None:
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
        line, key = record_line(index, stimuli)
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


def seal(folder: Path, only: str = "shard-*") -> None:
    """Seal every generated shard (those matching ``only``), as a finished shard seals
    itself."""
    from vally.engine.shards.partition import MANIFEST_FILE, SNAPSHOT_FILE
    from vally_experiment.seal import seal as seal_shard

    for shard_dir in sorted(folder.glob(only)):
        manifest = json.loads((shard_dir / MANIFEST_FILE).read_text(encoding="utf-8"))
        snapshot = json.loads((shard_dir / SNAPSHOT_FILE).read_text(encoding="utf-8"))
        if not seal_shard(shard_dir, manifest, snapshot):
            raise SystemExit(f"{shard_dir} could not be sealed")


def prepare(folder: Path, records: int, shards: int, stimuli: int = STIMULI) -> None:
    """The two copies of one run's shards the modes read: ``unsealed/`` as written and
    ``sealed/`` (the same files, hard-linked, each shard then sealed)."""
    unsealed, sealed = folder / UNSEALED, folder / SEALED
    unsealed.mkdir()
    generate(unsealed, records, shards, stimuli)
    shutil.copytree(unsealed, sealed, copy_function=os.link)
    seal(sealed)


def shard_dirs(folder: Path, copy: str) -> list[Path]:
    """The shard folders of one copy (``sealed`` or ``unsealed``), in order."""
    return sorted((folder / copy).glob("shard-*"))


def run_seal(folder: Path) -> None:
    """Seal the first sealed shard again, as a finished shard seals itself."""
    seal(folder / SEALED, only="shard-1")


WARM_MODULES = (
    "vally.cli.app",
    "vally_builtin.reporters.console",
    "vally_builtin.reporters.markdown",
    "vally_experiment.merge",
)


def warm(folder: Path) -> None:
    """Import what the merge modes use (outside their time: once per process, whatever
    the number of records)."""
    import importlib

    for name in WARM_MODULES:
        importlib.import_module(name)


def run_lines(folder: Path) -> None:
    """Stream every shard's lines once into one file."""
    with (folder / "lines.jsonl").open("w", encoding="utf-8") as out:
        for path in sorted((folder / UNSEALED).glob("shard-*/*/results.jsonl")):
            with path.open(encoding="utf-8") as handle:
                for line in handle:
                    out.write(line)


def run_parse(folder: Path) -> None:
    """Stream every shard's lines once into one file, parsing each as JSON on the way."""
    loads = json.loads
    with (folder / "parsed.jsonl").open("w", encoding="utf-8") as out:
        for path in sorted((folder / UNSEALED).glob("shard-*/*/results.jsonl")):
            with path.open(encoding="utf-8") as handle:
                for line in handle:
                    loads(line)
                    out.write(line)


def run_read(folder: Path) -> None:
    """Stream every shard's lines once into one file, parsing each as the merge does."""
    from vally.models.jsontext import loads_bounded
    from vally.models.limits import record_depth

    depth = record_depth()
    with (folder / "read.jsonl").open("w", encoding="utf-8") as out:
        for path in sorted((folder / UNSEALED).glob("shard-*/*/results.jsonl")):
            with path.open(encoding="utf-8") as handle:
                for line in handle:
                    loads_bounded(line, max_depth=depth)
                    out.write(line)


def _prepare(folder: Path) -> tuple[Any, ...]:
    """What a merge of unsealed shards holds before it reads a record: the shards'
    manifests and plan snapshots, read and validated as ``vally experiment merge`` does,
    and the trial index (all of them grow with the plan)."""
    from vally_experiment.merge import read_full_shards
    from vally_experiment.validation import TrialIndex

    shards = read_full_shards(shard_dirs(folder, UNSEALED))
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
    """vally's merge path over the unsealed shards, read in full."""
    from vally_experiment.merge import read_full_shards

    _merge_path(folder, read_full_shards(shard_dirs(folder, UNSEALED)), "merged-unsealed")


def run_merge(folder: Path) -> None:
    """vally's merge path as a merge takes it: over the sealed shards."""
    from vally_experiment.seal import read_sealed_shards

    shards = read_sealed_shards(shard_dirs(folder, SEALED))
    if shards is None:
        raise SystemExit("the generated shards are not sealed")
    _merge_path(folder, shards, "merged")


def _command(folder: Path, copy: str, out: str) -> None:
    """``vally experiment merge`` over one copy of the shards, as from a shell."""
    import contextlib

    from vally.cli.app import app

    shards = [str(path) for path in shard_dirs(folder, copy)]
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        try:
            app(["experiment", "merge", *shards, "-o", str(folder / out)], "vally")
        except SystemExit as exit_:
            if exit_.code not in (0, 1, None):  # 1: the merged verdict failed
                raise


def run_command(folder: Path) -> None:
    """The whole ``vally experiment merge`` of the sealed shards."""
    _command(folder, SEALED, "merged-command")


def run_command_unsealed(folder: Path) -> None:
    """The whole ``vally experiment merge`` of the unsealed shards."""
    _command(folder, UNSEALED, "merged-command-unsealed")


MODES = ("merge", "command", "parse", "read", "unsealed", "command_unsealed")
"""The modes timed against ``lines``, each in turn with it."""

OUTPUTS = (
    "lines.jsonl",
    "parsed.jsonl",
    "read.jsonl",
    "merged",
    "merged-unsealed",
    "merged-command",
    "merged-command-unsealed",
)


def measure(mode: str, folder: Path) -> dict[str, float]:
    """Run one mode in a fresh interpreter, vally imported first (outside the time, not
    for ``lines``): wall seconds and peak resident MB."""
    before = None if mode == "lines" else "warm"
    seconds, peak = measure_fresh("merge_memory", f"run_{mode}", folder, before)
    return {"seconds": seconds, "peak_mb": peak}


def clean(folder: Path) -> None:
    """Remove what the modes wrote, so each run writes into an empty place."""
    for name in OUTPUTS:
        path = folder / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


def spread(values: list[float], digits: int = 2) -> list[float]:
    """``[min, median, max]`` of ``values``."""
    ordered = sorted(values)
    return [round(ordered[i], digits) for i in (0, len(ordered) // 2, -1)]


def compare(folder: Path, repeat: int) -> dict[str, Any]:
    """Every mode of :data:`MODES` timed against ``lines`` measured just before it, in
    turn, ``repeat`` times: per mode the time ratios and peaks (min/median/max)."""
    runs: dict[str, list[tuple[dict[str, float], dict[str, float]]]] = {m: [] for m in MODES}
    for _ in range(repeat):  # alternating, so load changes hit every mode alike
        for mode in MODES:
            lines = measure("lines", folder)
            clean(folder)
            taken = measure(mode, folder)
            clean(folder)
            runs[mode].append((lines, taken))
    result: dict[str, Any] = {}
    for mode, pairs in runs.items():
        result[mode] = {
            "time_ratio": spread([t["seconds"] / max(ln["seconds"], 1e-9) for ln, t in pairs]),
            "seconds": spread([t["seconds"] for _, t in pairs], 3),
            "lines_seconds": spread([ln["seconds"] for ln, _ in pairs], 3),
            "peak_mb": spread([t["peak_mb"] for _, t in pairs], 1),
        }
    result["lines_peak_mb"] = spread([ln["peak_mb"] for p in runs.values() for ln, _ in p], 1)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--stimuli", type=int, default=STIMULI)
    parser.add_argument("--dir", default=None, help="where to write the shards")
    parser.add_argument("--json", default=None, help="also write the numbers here")
    parser.add_argument(
        "--repeat", type=int, default=3, help="pairs of lines and each mode (min/median/max)"
    )
    parser.add_argument(
        "--template",
        default=None,
        help="a results.jsonl whose trial records are copied (in turn) instead of the small one",
    )
    args = parser.parse_args()
    if args.template:
        with open(args.template, encoding="utf-8") as handle:
            TEMPLATES.extend(
                data for data in map(json.loads, handle) if data.get("type") == "trial-result"
            )
    with tempfile.TemporaryDirectory(prefix="vally-merge-", dir=args.dir) as tmp:
        folder = Path(tmp)
        start = time.perf_counter()
        prepare(folder, args.records, args.shards, args.stimuli)
        prepared = time.perf_counter() - start
        seal_bytes = sum(p.stat().st_size for p in (folder / SEALED).glob("*/shard-seal.json"))
        result: dict[str, Any] = {
            "records": args.records,
            "shards": args.shards,
            "stimuli": args.stimuli,
            "prepare_seconds": round(prepared, 2),
            "seal_mb": round(seal_bytes / 2**20, 2),
            "plan_peak_mb": round(measure("plan", folder)["peak_mb"], 1),
        }
        sealing = measure("seal", folder)
        result["seal_one_shard"] = {
            "us_per_record": round(sealing["seconds"] * 1e6 * args.shards / args.records, 1),
            "peak_mb": round(sealing["peak_mb"], 1),
        }
        result.update(compare(folder, args.repeat))
    print(json.dumps(result, indent=1))
    print(f"{'mode':<17} {'/ lines (min/median/max)':<26} peak MB (min/median/max)")
    for mode in MODES:
        ratio, peak = result[mode]["time_ratio"], result[mode]["peak_mb"]
        print(f"{mode:<17} {' / '.join(f'{r:.2f}x' for r in ratio):<26} {peak}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
