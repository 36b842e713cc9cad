"""Measure ``--runner ray`` against the local runner on the same machine, side by side.

Usage (from the repository root, as root, with ``vally[ray]`` installed)::

    python3 bench/ray_runner.py                          # 200 and 400 trials, 8 in flight
    python3 bench/ray_runner.py --trials 400 --rounds 5 --json out.json
    python3 bench/ray_runner.py --also trials_per_worker=1   # a second Ray setting

A local Ray cluster is started the way the tests start it (a head without CPUs and two
worker nodes with 4 CPUs each, inside a loopback-only network namespace) and stopped
afterwards. The same eval of ``command`` trials (``sh -c 'cat; echo ok'``, one output
grader) runs through ``vally eval --workers W`` with N and 2N trials: locally, on the
cluster, and on the cluster with the ``--also`` runner arguments when given, alternating
in every round so each ratio compares runs made under the same load. Per run: the whole
process's wall time and the run's own ``startedAt``..``completedAt`` (connecting to the
cluster and starting the trial hosts included, the CLI's start-up not).

Printed, as min / median / max over the rounds:

- each Ray setting's wall and run time against the local runner's in the same round, at N
  and at 2N trials;
- the marginal milliseconds per trial (the median 2N run minus the median N run, over N),
  which leave out what a run pays once, and Ray's against the local runner's;
- Ray's fixed cost per run: its median N-trial run time minus N marginal trials.
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
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.runners.cluster import Cluster, start_cluster  # noqa: E402

SPEC = """\
name: bench
defaults:
  runs: {runs}
  timeout: 60s
  executor:
    name: command
    config: {{command: ["sh", "-c", "cat; echo ok"], prompt_via: stdin}}
stimuli:
{stimuli}
"""


def write_spec(folder: Path, trials: int) -> Path:
    """An eval of ``trials`` trials over 10 stimuli in ``folder``."""
    stimuli = 10
    lines = "\n".join(
        f"  - {{name: s{i}, prompt: p{i}, graders: "
        "[{type: output-contains, config: {substring: ok}}]}"
        for i in range(stimuli)
    )
    spec = folder / "eval.yaml"
    spec.write_text(SPEC.format(runs=max(1, trials // stimuli), stimuli=lines))
    return spec


def _when(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def run(
    spec: Path, out: Path, workers: int, cluster: Cluster | None, runner_args: list[str]
) -> dict[str, float]:
    """One ``vally eval``: its process wall time and its run time, in seconds."""
    args = [sys.executable, "-m", "vally", "eval", "-e", str(spec), "--output-dir", str(out),
            "--workers", str(workers)]
    if cluster is not None:
        args = cluster.command([*args, "--runner", "ray", "--ray-address", cluster.address,
                                *(a for item in runner_args for a in ("--runner-args", item))])
    began = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"})
    wall = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"the run failed:\n{done.stderr}")
    folder = max((p for p in out.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
    summary = json.loads((folder / "run-summary.jsonl").read_text().splitlines()[0])
    return {"wall": wall, "run": _when(summary["completedAt"]) - _when(summary["startedAt"])}


def spread(values: list[float], digits: int = 2) -> str:
    """``min / median / max``."""
    return " / ".join(f"{v:.{digits}f}" for v in (min(values), statistics.median(values),
                                                   max(values)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200, help="N (the runs have N and 2N)")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ray-args", action="append", default=[], metavar="KEY=VALUE",
                        help="--runner-args of the Ray runs (repeatable)")
    parser.add_argument("--also", action="append", default=[], metavar="KEY=VALUE",
                        help="--runner-args of a second Ray setting measured alongside")
    parser.add_argument("--json", type=Path)
    opts = parser.parse_args()
    n = opts.trials
    settings: dict[str, list[str] | None] = {"local": None, "ray": opts.ray_args}
    if opts.also:
        settings["ray " + " ".join(opts.also)] = [*opts.ray_args, *opts.also]
    times: dict[str, dict[int, list[dict[str, float]]]] = {
        name: {n: [], 2 * n: []} for name in settings
    }
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        specs = {}
        for count in (n, 2 * n):
            (base / str(count)).mkdir()
            specs[count] = write_spec(base / str(count), count)
        (base / "driver-only").mkdir()
        cluster = start_cluster(base / "driver-only")
        try:
            run(specs[n], base / "warm", opts.workers, cluster, opts.ray_args)
            for round_ in range(opts.rounds):
                for count in (n, 2 * n):
                    for name, args in settings.items():
                        out = base / f"{round_}-{count}-{len(times[name][count])}-{name[:3]}"
                        where = None if args is None else cluster
                        got = run(specs[count], out, opts.workers, where, args or [])
                        times[name][count].append(got)
                        print(f"round {round_ + 1} {name:28} {count:5} trials: "
                              f"wall {got['wall']:6.2f} s, run {got['run']:6.2f} s", flush=True)
        finally:
            cluster.stop()
    results: dict[str, Any] = {"trials": n, "workers": opts.workers, "times": times}
    local = times["local"]
    rounds = range(opts.rounds)

    def median_run(name: str, count: int) -> float:
        return statistics.median(t["run"] for t in times[name][count])

    def marginal_ms(name: str) -> float:
        return 1000 * (median_run(name, 2 * n) - median_run(name, n)) / n

    print(f"\n{n} and {2 * n} trials at --workers {opts.workers}, {opts.rounds} rounds "
          "(min / median / max of the per-round ratios)")
    local_ms = marginal_ms("local")
    print(f"local: marginal {local_ms:.1f} ms per trial (from the median runs)")
    for name in settings:
        if name == "local":
            continue
        entry: dict[str, Any] = {}
        for count in (n, 2 * n):
            for what in ("wall", "run"):
                ratios = [times[name][count][i][what] / local[count][i][what] for i in rounds]
                entry[f"{what}_ratio_{count}"] = ratios
                print(f"{name}: {what} {spread(ratios)}x the local runner's at {count} trials")
        ms = marginal_ms(name)
        fixed = median_run(name, n) - n * ms / 1000
        entry.update(marginal_ms=ms, marginal_ratio=ms / local_ms, fixed_s=fixed)
        print(f"{name}: marginal {ms:.1f} ms per trial ({ms / local_ms:.1f}x local), "
              f"fixed {fixed:.2f} s per run (from the median runs)")
        results[name] = entry
    if opts.json:
        opts.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
