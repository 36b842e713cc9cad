"""A whole ``vally eval`` on the ``docker`` backend against its limit, an
``xargs -P W docker run --rm`` loop, side by side as whole processes, idle and under load.

Usage (from the repository root, with a Docker engine running)::

    python3 bench/docker_eval.py                       # 40 trials, 4 workers, 3 rounds
    python3 bench/docker_eval.py --load 0 2            # idle, then 2 busy processes
    python3 bench/docker_eval.py --trials 80 --json out.json

Both commands run ``true`` in ``--trials`` fresh containers of the busybox test image
(``tests/fixtures/docker/busybox``, built locally ``FROM scratch``; nothing is pulled), at
most ``--workers`` at a time, without a network:

* ``raw``: ``xargs -P W`` running ``docker run --rm --network none <image> true`` once per
  trial (the CLI: create, attach, start, wait, remove);
* ``vally``: ``vally eval`` (a fresh interpreter: start-up, plan, the docker backend with its
  warm pool, the ``command`` executor running ``true``, a ``completed`` grader, every output
  file, the console report) with ``--workers W``.

``--load N`` starts N processes that spin on the CPU for the whole round (0: an idle
machine, as far as this benchmark's own load goes), so "under load" is the same load for
both commands. Commands alternate within a round. Per load it prints the wall time of each
command, the CPU time of the two processes and their children (the docker CLI's; the
engine's own CPU is not counted for either) and the ratios ``vally / raw``, min / median /
max over the rounds.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from docker_overhead import build_busybox_image

SPEC = """\
name: dockerbench
defaults:
  runs: 1
  timeout: 60s
  executor: {{name: command, config: {{command: ['true'], output: stdout}}}}
stimuli:
{stimuli}
"""


def write_spec(folder: Path, image: str, trials: int) -> Path:
    """An eval of ``trials`` stimuli, each one trial of ``true`` in a container."""
    stimuli = "\n".join(
        f"  - {{name: s{i}, prompt: 'p', graders: [{{type: completed}}]}}" for i in range(trials)
    )
    path = folder / "eval.yaml"
    path.write_text(SPEC.format(stimuli=stimuli), encoding="utf-8")
    return path


def _spin() -> None:
    while True:
        pass


def timed(argv: list[str], cwd: Path, stdin: str | None = None) -> dict[str, float]:
    """Run ``argv`` to completion; its wall time and the CPU time of it and its children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.time()
    start = time.perf_counter()
    result = subprocess.run(
        argv,
        cwd=cwd,
        input=stdin,
        text=True,
        capture_output=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(
            f"{argv[0]} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
        )
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "started": started}


def one_round(folder: Path, image: str, trials: int, workers: int, load: int) -> dict[str, Any]:
    """Both commands once, under ``load`` spinning processes."""
    spec = write_spec(folder, image, trials)
    raw_argv = [
        "xargs", "-P", str(workers), "-I{}",
        "docker", "run", "--rm", "--network", "none", image, "true",
    ]  # fmt: skip
    vally_argv = [
        sys.executable, "-c", "from vally.cli.app import main; main()", "eval",
        "-e", str(spec), "--output-dir", str(folder / "out"), "--workers", str(workers),
        "--backend", "docker", "--backend-args", f"image={image}",
        "--backend-args", "pull=never",
    ]  # fmt: skip
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(load)]
    for spinner in spinners:
        spinner.start()
    try:
        raw = timed(raw_argv, folder, stdin="".join(f"{i}\n" for i in range(trials)))
        del raw["started"]
        vally = timed(vally_argv, folder)
    finally:
        for spinner in spinners:
            spinner.terminate()
            spinner.join()
    vally["before_first_trial_s"] = check_run(folder / "out", trials, vally["started"])
    del vally["started"]
    return {"load": load, "raw": raw, "vally": vally}


def check_run(out: Path, trials: int, started: float) -> float:
    """Fail unless the run recorded ``trials`` trials in containers, none of them errored;
    return the seconds from the process start to the first trial's start (start-up, plan
    and the backend's start: what the run pays once)."""
    (summary_file,) = out.glob("*/run-summary.jsonl")
    summary = json.loads(summary_file.read_text(encoding="utf-8").splitlines()[0])
    if summary["trials"] != trials or summary["errored"]:
        raise SystemExit(f"the vally run did not run every trial cleanly: {summary_file}")
    starts = []
    for line in summary_file.with_name("results.jsonl").open(encoding="utf-8"):
        record = json.loads(line)
        if not record["trajectory"]["workDir"].startswith("/workspace"):
            raise SystemExit(f"a trial did not run in a container: {summary_file}")
        starts.append(datetime.fromisoformat(record["startedAt"].replace("Z", "+00:00")))
    return round(min(starts).timestamp() - started, 3)


def summarise(rounds: list[dict[str, Any]], load: int) -> dict[str, Any]:
    """min / median / max of the wall and CPU ratios of ``vally`` to ``raw`` at ``load``."""
    mine = [r for r in rounds if r["load"] == load]

    def spread(key: str) -> list[float]:
        ratios = sorted(r["vally"][key] / r["raw"][key] for r in mine)
        return [round(ratios[0], 2), round(statistics.median(ratios), 2), round(ratios[-1], 2)]

    return {
        "load": load,
        "raw_wall_s": statistics.median(r["raw"]["wall_s"] for r in mine),
        "vally_wall_s": statistics.median(r["vally"]["wall_s"] for r in mine),
        "vally_before_first_trial_s": statistics.median(
            r["vally"]["before_first_trial_s"] for r in mine
        ),
        "wall_ratio": spread("wall_s"),
        "cpu_ratio": spread("cpu_s"),
    }


def main() -> None:
    """Parse flags, run the rounds at every load, print the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--load", type=int, nargs="+", default=[0, 2], help="spinning processes")
    parser.add_argument("--busybox", type=Path, default=Path("/bin/busybox"))
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args()
    image = build_busybox_image(args.busybox)
    rounds: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(args.rounds):
            for load in args.load:
                folder = Path(tmp) / f"r{index}-l{load}"
                folder.mkdir()
                rounds.append(one_round(folder, image, args.trials, args.workers, load))
                print(json.dumps(rounds[-1]), flush=True)
    summary = [summarise(rounds, load) for load in args.load]
    print()
    print(
        "| load | raw wall (s) | vally wall (s) | of it before the first trial (s) "
        "| wall ratio min/med/max | CPU ratio min/med/max |"
    )
    print("|---:|---:|---:|---:|---|---|")
    for row in summary:
        wall = " / ".join(map(str, row["wall_ratio"]))
        cpu = " / ".join(map(str, row["cpu_ratio"]))
        print(
            f"| {row['load']} | {row['raw_wall_s']} | {row['vally_wall_s']} "
            f"| {row['vally_before_first_trial_s']} | {wall} | {cpu} |"
        )
    if args.json:
        args.json.write_text(json.dumps({"rounds": rounds, "summary": summary}, indent=2) + "\n")


if __name__ == "__main__":
    main()
