"""Benchmark the dashboard's heaviest pages on an experiment of 100,000 outcomes: the
experiment comparison and the run page, through a real ``vally serve``, over HTTP and in
a real headless Chromium.

Usage (from the repository root, with the ``serve`` extra installed)::

    python3 bench/dashboard.py                       # 5 variants x 20,000 trials
    python3 bench/dashboard.py --trials 2 --json out.json

The data is the synthetic history of the tests and of ``bench/history.py``
(``tests/history/synth.py``): one experiment of 5 variants, each 250 stimuli x 2 models x
``--trials`` trials (40: 20,000 trials a variant, 100,000 outcomes), each record with a
full trajectory and a grader verdict, each variant's ``run-summary`` with its 500
per-stimulus entries. Reported: the ingest time (the comparison is computed there), then
for each request the first answer after the server started (nothing warm), and the median
and slowest of ``--repeat`` more, with the size of the answer; then the time from opening
the run page and the experiment page in Chromium to the page being shown (``data-ready``),
when Debian's chromium and chromedriver are installed.
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

STIMULI = 250
MODELS = ("model-a", "model-b")
# 500 (stimulus, model) units: vally_compare's sign-flip interval fails beyond 1,023 units
VARIANTS = ("baseline", "v1", "v2", "v3", "v4")
RUN = "bench-exp"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def _requests() -> dict[str, tuple[str, dict[str, Any]]]:
    run = f"/api/runs/{RUN}"
    return {
        "experiment comparison": (run + "/experiment", {}),
        "run detail": (run, {}),
        "stimulus summaries, first page": (run + "/stimulus-summaries", {"limit": 50}),
        "ranking": (run + "/ranking", {}),
        "score matrix, first page": (run + "/matrix", {"limit": 25}),
        "outcomes, first page": (run + "/outcomes", {"limit": 25}),
    }


def _api(url: str, repeat: int) -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    with httpx.Client(base_url=url, timeout=120) as client:
        for name, (path, params) in _requests().items():  # first calls, nothing warm
            started = time.perf_counter()
            response = client.get(path, params=params)
            if response.status_code == 404:  # an endpoint older versions did not have
                continue
            response.raise_for_status()
            first = (time.perf_counter() - started) * 1000
            results[name] = {"firstMs": round(first, 1), "bytes": len(response.content)}
        for name, (path, params) in _requests().items():
            if name not in results:
                continue
            samples = []
            for _ in range(repeat):
                started = time.perf_counter()
                client.get(path, params=params).raise_for_status()
                samples.append((time.perf_counter() - started) * 1000)
            results[name]["medianMs"] = round(statistics.median(samples), 1)
            results[name]["maxMs"] = round(max(samples), 1)
    return results


def _pages(url: str, repeat: int, profile: Path) -> dict[str, dict[str, Any]] | None:
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        return None
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--no-first-run", "--window-size=1400,1000",
                 f"--user-data-dir={profile}"):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    pages = {"run page": f"/runs/{RUN}", "experiment page": f"/runs/{RUN}/experiment"}
    results: dict[str, dict[str, Any]] = {}
    try:
        for name, route in pages.items():
            samples = []
            for _ in range(repeat):
                driver.get("about:blank")
                started = time.perf_counter()
                driver.get(f"{url}#{route}")
                WebDriverWait(driver, 120).until(
                    lambda d, r=route: d.execute_script("return document.body.dataset.ready") == r
                )
                samples.append((time.perf_counter() - started) * 1000)
            results[name] = {
                "firstMs": round(samples[0], 1),
                "medianMs": round(statistics.median(samples), 1),
                "maxMs": round(max(samples), 1),
            }
    finally:
        driver.quit()
    return results


def main() -> None:
    """Run the benchmark and print (and optionally write) the numbers."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=40, help="per stimulus, model, variant")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--page-repeat", type=int, default=5)
    parser.add_argument("--dir", help="working folder (default: a temporary one)")
    parser.add_argument("--json", help="write the numbers to this file")
    args = parser.parse_args()
    outcomes = STIMULI * len(MODELS) * len(VARIANTS) * args.trials
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        work = Path(tmp)
        started = time.perf_counter()
        spec = RunSpec(
            run_id=RUN,
            stimuli=STIMULI,
            models=MODELS,
            trials=args.trials,
            variants=VARIANTS,
            baseline="baseline",
            experiment="bench",
            trial_dirs=False,
            pass_bias={"baseline": 0.6, "v1": 0.7, "v2": 0.5, "v3": 0.62, "v4": 0.9},
        )
        run = write_run(work / "run", spec)
        print(f"wrote {outcomes} outcomes in {time.perf_counter() - started:.1f}s")
        db = work / "history.db"
        store = open_store(str(db))
        started = time.perf_counter()
        report = ingest(store, [run])
        ingest_seconds = time.perf_counter() - started
        store.close()
        print(f"ingest (comparison included): {report.added} outcomes in {ingest_seconds:.1f}s")
        results: dict[str, Any] = {"outcomes": outcomes, "ingestSeconds": round(ingest_seconds, 1)}
        with Served("--store", str(db), cwd=work) as served:
            results["api"] = _api(served.url, args.repeat)
            results["pages"] = _pages(served.url, args.page_repeat, work / "profile")
            served.stop()
    width = max(len(name) for name in results["api"])
    for name, n in results["api"].items():
        print(
            f"  {name:<{width}}  first {n['firstMs']:7.1f} ms  median {n['medianMs']:7.1f} ms"
            f"  max {n['maxMs']:7.1f} ms  {n['bytes'] / 1000:8.1f} KB"
        )
    for name, n in (results["pages"] or {}).items():
        print(
            f"  {name + ' (Chromium)':<{width}}  first {n['firstMs']:7.1f} ms  median "
            f"{n['medianMs']:7.1f} ms  max {n['maxMs']:7.1f} ms"
        )
    print(f"load average at the end: {os.getloadavg()} (2 CPUs)")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
