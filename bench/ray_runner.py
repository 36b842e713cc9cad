"""Measure ``--runner ray`` against the local runner on the same machine.

Usage (from the repository root, as root, with ``vally[ray]`` installed)::

    python3 bench/ray_runner.py                  # 200 trials, 8 in flight
    python3 bench/ray_runner.py --trials 400 --workers 8 --json out.json

A local Ray cluster is started the way the tests start it (a head without CPUs and two
worker nodes with 4 CPUs each, inside a loopback-only network namespace) and stopped
afterwards. The same eval of ``command`` trials (``sh -c 'cat; echo ok'``, one output
grader) runs through ``vally eval``: locally and on the cluster, each with ``--workers N``
(throughput) and ``--workers 1`` (one trial at a time), each with N and 2N trials. Reported
per run: its wall time from its own ``startedAt``/``completedAt`` (the CLI's start-up is
excluded; connecting to the cluster and starting the nodes' worker processes, which Ray does
for every new driver, are included) and trials per second. The marginal numbers, from the
difference between the 2N and the N run, leave the per-run fixed cost out: steady-state
trials/s, and the per-trial overhead Ray adds at ``--workers 1`` (ray's marginal ms per
trial minus local's).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
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


def run(spec: Path, out: Path, workers: int, cluster: Cluster | None) -> dict[str, Any]:
    args = [sys.executable, "-m", "vally", "eval", "-e", str(spec), "--output-dir", str(out),
            "--workers", str(workers)]
    if cluster is not None:
        args = cluster.command([*args, "--runner", "ray", "--ray-address", cluster.address])
    done = subprocess.run(args, capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"})
    if done.returncode != 0:
        raise SystemExit(f"the run failed:\n{done.stderr}")
    folder = max((p for p in out.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
    summary = json.loads((folder / "run-summary.jsonl").read_text().splitlines()[0])
    seconds = _when(summary["completedAt"]) - _when(summary["startedAt"])
    trials = int(summary["trials"])
    return {"trials": trials, "workers": workers, "seconds": round(seconds, 3),
            "trials_per_s": round(trials / seconds, 1)}


def marginal(small: dict[str, Any], large: dict[str, Any]) -> dict[str, float]:
    """Trials/s and ms per trial of the extra trials of ``large`` over ``small`` (the
    per-run fixed cost, such as starting the nodes' worker processes, cancels out)."""
    trials = large["trials"] - small["trials"]
    seconds = large["seconds"] - small["seconds"]
    return {
        "trials_per_s": round(trials / seconds, 1),
        "ms_per_trial": round(1000 * seconds / trials, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--json", type=Path)
    opts = parser.parse_args()
    results: dict[str, Any] = {}
    serial = max(10, opts.trials // 5)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        specs = {}
        for count in (opts.trials, 2 * opts.trials, serial, 2 * serial):
            (base / str(count)).mkdir(exist_ok=True)
            specs[count] = write_spec(base / str(count), count)
        (base / "driver-only").mkdir()
        cluster = start_cluster(base / "driver-only")
        try:
            run(specs[opts.trials], base / "warm", opts.workers, cluster)
            for runner, where in (("local", None), ("ray", cluster)):
                for count, workers in ((opts.trials, opts.workers), (2 * opts.trials, opts.workers),
                                       (serial, 1), (2 * serial, 1)):
                    key = f"{runner}/{count}/w{workers}"
                    results[key] = run(specs[count], base / key.replace("/", "-"), workers, where)
        finally:
            cluster.stop()
    for key, r in results.items():
        print(f"{key:16} {r['seconds']:7.2f} s, {r['trials_per_s']:6.1f} trials/s")
    n, m, w = opts.trials, serial, opts.workers
    for runner in ("local", "ray"):
        results[f"{runner}_marginal_w{w}"] = marginal(
            results[f"{runner}/{n}/w{w}"], results[f"{runner}/{2 * n}/w{w}"]
        )
        results[f"{runner}_marginal_w1"] = marginal(
            results[f"{runner}/{m}/w1"], results[f"{runner}/{2 * m}/w1"]
        )
        print(f"{runner}: marginal {results[f'{runner}_marginal_w{w}']} at --workers {w}, "
              f"{results[f'{runner}_marginal_w1']} at --workers 1")
    overhead = (results["ray_marginal_w1"]["ms_per_trial"]
                - results["local_marginal_w1"]["ms_per_trial"])
    results["ray_overhead_ms_per_trial"] = round(overhead, 1)
    print(f"ray adds {overhead:.1f} ms per trial (one at a time, steady state)")
    if opts.json:
        opts.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
