"""Benchmark the history store: ingest 100,000 outcomes, then time the pages of the
dashboard through a real ``vally serve``.

Usage (from the repository root, with the ``serve`` extra installed)::

    python3 bench/history.py                                  # 100,000 outcomes into SQLite
    python3 bench/history.py --outcomes 20000 --trial-dirs    # with a trial folder per outcome
    python3 bench/history.py --postgres postgresql://postgres@127.0.0.1:55432/vally_test
    python3 bench/history.py --json out.json                  # also write the numbers as JSON

The data is synthetic but in the on-disk format of ``vally eval`` (``tests/history/synth.py``):
one run of 500 stimuli x 4 models x N trials (N from ``--outcomes``), each record with a full
trajectory (tool calls and results, reasoning, token usage) and a grader verdict, about
3.5 KB a line. Reported: the ingest rate (outcomes per second, the whole ``vally ingest``
work: reading, parsing, inserting, committing), the store size, and for each API request
the dashboard makes for the run page, a filtered outcomes page, a deep page, an outcome
and its trajectory: the median and the slowest of ``--repeat`` requests over HTTP.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from tests.history.serving import Served  # noqa: E402
from tests.history.synth import RunSpec, write_run  # noqa: E402
from vally_serve.ingest import ingest  # noqa: E402
from vally_serve.store import open_store  # noqa: E402

STIMULI = 500
MODELS = ("model-a", "model-b", "model-c", "model-d")


def _ingest(run: Path, target: str) -> dict[str, Any]:
    store = open_store(target)
    started, cpu = time.perf_counter(), time.process_time()
    report = ingest(store, [run])
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    store.close()
    return {
        "added": report.added,
        "read": report.read,
        "seconds": round(seconds, 2),
        "cpuSeconds": round(cpu, 2),
        "perSecond": round(report.read / seconds),
        "perCpuSecond": round(report.read / cpu) if cpu else None,
    }


def _time(url: str, path: str, params: dict[str, Any], repeat: int) -> dict[str, Any]:
    samples = []
    with httpx.Client(base_url=url, timeout=60) as client:
        client.get(path, params=params).raise_for_status()  # warm the caches once
        for _ in range(repeat):
            started = time.perf_counter()
            client.get(path, params=params).raise_for_status()
            samples.append((time.perf_counter() - started) * 1000)
    return {"medianMs": round(statistics.median(samples), 1), "maxMs": round(max(samples), 1)}


def _pages(url: str, run_id: str, repeat: int) -> dict[str, dict[str, Any]]:
    outcomes = f"/api/runs/{run_id}/outcomes"
    with httpx.Client(base_url=url, timeout=60) as client:
        page = client.get(outcomes, params={"limit": 50}).json()
        for _ in range(100):  # walk 100 pages to get a deep cursor
            page = client.get(
                outcomes, params={"limit": 50, "cursor": page["page"]["nextCursor"]}
            ).json()
        deep_cursor = page["page"]["nextCursor"]
        outcome_id = page["outcomes"][0]["id"]
    run = f"/api/runs/{run_id}"
    requests = {
        "metric definitions (no database)": ("/api/metrics", {}),
        "runs list": ("/api/runs", {}),
        "run detail (stats, histogram)": (run, {}),
        "ranking": (run + "/ranking", {}),
        "grader failures": (run + "/graders", {}),
        "tool usage": (run + "/tools", {}),
        "score matrix, first page": (run + "/matrix", {"limit": 25}),
        "score matrix, tokens": (run + "/matrix", {"limit": 25, "metric": "tokens"}),
        "outcomes, first page": (outcomes, {"limit": 25}),
        "outcomes filtered (verdict, model)": (
            outcomes,
            {"limit": 25, "verdict": "fail", "model": "model-c"},
        ),
        "outcomes filtered (stimulus text)": (outcomes, {"limit": 25, "q": "task-4"}),
        "outcomes, page 101": (outcomes, {"limit": 50, "cursor": deep_cursor}),
        "outcomes across runs, newest": ("/api/outcomes", {"limit": 25, "order": "desc"}),
        "one outcome": (f"/api/outcomes/{outcome_id}", {}),
        "its trajectory": (f"/api/outcomes/{outcome_id}/trajectory", {}),
        "stimulus history": ("/api/history", {"stimulus": "task-123"}),
    }
    return {name: _time(url, path, params, repeat) for name, (path, params) in requests.items()}


def main() -> None:
    """Run the benchmark and print (and optionally write) the numbers."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--outcomes", type=int, default=100_000)
    parser.add_argument("--trial-dirs", action="store_true", help="write a trial folder each")
    parser.add_argument("--postgres", help="also ingest into this PostgreSQL database URL")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--dir", help="working folder (default: a temporary one)")
    parser.add_argument("--json", help="write the numbers to this file")
    args = parser.parse_args()
    trials = max(1, args.outcomes // (STIMULI * len(MODELS)))
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        work = Path(tmp)
        started = time.perf_counter()
        run = write_run(
            work / "run",
            RunSpec(
                run_id="bench",
                stimuli=STIMULI,
                models=MODELS,
                trials=trials,
                trial_dirs=args.trial_dirs,
            ),
        )
        size = (run / "results.jsonl").stat().st_size
        print(
            f"wrote {STIMULI * len(MODELS) * trials} outcomes ({size / 1e6:.0f} MB of "
            f"results.jsonl) in {time.perf_counter() - started:.1f}s"
        )
        results: dict[str, Any] = {
            "outcomes": STIMULI * len(MODELS) * trials,
            "resultsBytes": size,
            "trialDirs": args.trial_dirs,
        }
        db = work / "history.db"
        results["sqliteIngest"] = _ingest(run, str(db))
        results["sqliteBytes"] = db.stat().st_size
        print(f"SQLite ingest: {results['sqliteIngest']}  store {db.stat().st_size / 1e6:.0f} MB")
        results["sqliteReingest"] = _ingest(run, str(db))
        print(f"SQLite re-ingest (nothing new): {results['sqliteReingest']}")
        if args.postgres:
            results["postgresIngest"] = _ingest(run, args.postgres)
            print(f"PostgreSQL ingest: {results['postgresIngest']}")
        with Served("--store", str(db), cwd=work) as served:
            results["pages"] = _pages(served.url, "bench", args.repeat)
            served.stop()
        width = max(len(name) for name in results["pages"])
        for name, numbers in results["pages"].items():
            print(
                f"  {name:<{width}}  median {numbers['medianMs']:7.1f} ms   "
                f"max {numbers['maxMs']:7.1f} ms"
            )
    print(f"load average at the end: {os.getloadavg()} (2 CPUs)")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
