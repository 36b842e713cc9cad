"""A whole ``vally eval`` against promptfoo on the same N-case eval: wall and CPU ratios.

Usage (from the repository root)::

    python3 bench/promptfoo.py                          # N = 1000 and 3000, 3 rounds
    python3 bench/promptfoo.py --cases 1000 --rounds 5
    python3 bench/promptfoo.py --install                # install promptfoo first (once)
    python3 bench/promptfoo.py --json out.json          # also write the numbers as JSON

Both sides run the same N cases at the same concurrency (``--workers``, default 8), as
whole processes started by this script, with their result files written:

* **promptfoo** (:data:`VERSION`): one prompt ``{{task}}``, the ``echo`` provider (it
  answers the prompt itself) and N tests, case ``i`` with ``task: "task i"`` and one
  ``contains: task`` assertion; ``promptfoo eval --no-cache --no-table --no-progress-bar
  -j W -o results.json``. Its results also go to its database (``promptfoo.db``), as by
  default: with ``--no-write`` its result file holds no results at all.
* **vally**: N stimuli, stimulus ``i`` with the prompt ``task i`` and one
  ``output-contains: task`` grader, the ``mock`` executor answering ``{prompt}``;
  ``vally eval --workers W --quiet`` with every default output (``results.jsonl``,
  ``run-summary.jsonl``, ``report.md``, the trial folders). ``--quiet`` is the peer of
  promptfoo's ``--no-table``: no per-case table, the totals and the verdict only.

vally runs with its bytecode kept (``PYTHONDONTWRITEBYTECODE`` is removed from its
environment), as an installed package has it; the warm-up round writes it. Each run starts
from fresh state (a new promptfoo config folder, so a new database; a new
vally output folder). The rounds alternate which side goes first. Wall time is measured
around each process, CPU time from the children's resource usage (user + system). After
every run the script checks that the side wrote N passing results, and fails otherwise.
It prints, per N, the median seconds of each side and the ratios vally / promptfoo
(min / median / max over the rounds): under 1 is vally ahead, 0.5 is twice as fast.

promptfoo runs offline: ``PROMPTFOO_DISABLE_TELEMETRY=1``, ``PROMPTFOO_DISABLE_UPDATE=1``
and ``PROMPTFOO_DISABLE_SHARING=1``. Even so, version 0.118.17 posts one "telemetry
disabled" event per run to ``r.promptfoo.app`` (``dist/src/telemetry.js``:
``recordTelemetryDisabled``); no variable turns that off, so the script sets ``HTTPS_PROXY``
and ``HTTP_PROXY`` to a closed port of 127.0.0.1 (the request fails at once and nothing
leaves the machine) and clears ``NO_PROXY``.

Installing promptfoo (``--install``, into ``--promptfoo-dir``, default
``${XDG_CACHE_HOME:-~/.cache}/vally-bench/promptfoo``): ``npm install --ignore-scripts``
of the pinned version, so no package's install script runs. promptfoo needs one native
module, ``better-sqlite3``, which ships no binary and builds it in its install script
(``prebuild-install || node-gyp rebuild --release``; the first step downloads a prebuilt
binary from GitHub). The least-bad way found: run that one package's own script alone,
``npm rebuild better-sqlite3 --build-from-source``, which, as its documentation describes
for building from source, skips the download and compiles the SQLite it bundles with
node-gyp; ``--nodedir`` points node-gyp at this machine's Node.js headers when they are
installed (``/usr/include/node``), so it downloads no headers either. It needs a C++
compiler, ``make`` and Python, and takes a few minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

VERSION = "0.118.17"
"""The promptfoo version measured."""

PROMPTFOO_ENV = {
    "PROMPTFOO_DISABLE_TELEMETRY": "1",
    "PROMPTFOO_DISABLE_UPDATE": "1",
    "PROMPTFOO_DISABLE_SHARING": "1",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "HTTP_PROXY": "http://127.0.0.1:9",
    "NO_PROXY": "",
    "NO_COLOR": "1",
}
"""Offline and quiet: see the module's docstring."""

VALLY_SPEC = """\
name: bench
defaults:
  executor: {{name: mock, config: {{output: '{{prompt}}'}}}}
stimuli:
{stimuli}
"""


def default_promptfoo_dir() -> Path:
    """``${XDG_CACHE_HOME:-~/.cache}/vally-bench/promptfoo``."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "vally-bench" / "promptfoo"


def promptfoo_bin(folder: Path) -> Path:
    """The installed ``promptfoo`` command of ``folder``."""
    return folder / "node_modules" / ".bin" / "promptfoo"


def install_promptfoo(folder: Path) -> None:
    """Install :data:`VERSION` into ``folder`` with install scripts off, then build
    ``better-sqlite3`` from source (see the module's docstring).

    Raises:
        SystemExit: npm or the build failed.
    """
    folder.mkdir(parents=True, exist_ok=True)
    npm = ["npm", "--prefix", str(folder), "--no-audit", "--no-fund"]
    steps = [[*npm, "install", "--ignore-scripts", f"promptfoo@{VERSION}"]]
    rebuild = [*npm, "rebuild", "better-sqlite3", "--build-from-source"]
    headers = Path("/usr/include/node/node_api.h")
    if headers.is_file():
        rebuild.append(f"--nodedir={headers.parent.parent.parent}")
    steps.append(rebuild)
    for argv in steps:
        print("$", " ".join(argv), flush=True)
        if subprocess.run(argv).returncode:
            raise SystemExit(f"failed: {' '.join(argv)}")


def write_promptfoo_config(folder: Path, cases: int) -> Path:
    """promptfoo's config of ``cases`` tests (JSON is YAML)."""
    tests = [
        {"vars": {"task": f"task {i}"}, "assert": [{"type": "contains", "value": "task"}]}
        for i in range(cases)
    ]
    config = {"description": "bench", "prompts": ["{{task}}"], "providers": ["echo"]}
    path = folder / "promptfooconfig.yaml"
    path.write_text(json.dumps({**config, "tests": tests}), encoding="utf-8")
    return path


def write_vally_spec(folder: Path, cases: int) -> Path:
    """vally's spec of ``cases`` stimuli."""
    stimuli = "\n".join(
        f"  - {{name: s{i}, prompt: 'task {i}', "
        "graders: [{type: output-contains, config: {substring: task}}]}"
        for i in range(cases)
    )
    path = folder / "eval.yaml"
    path.write_text(VALLY_SPEC.format(stimuli=stimuli), encoding="utf-8")
    return path


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> dict[str, float]:
    """Run ``argv`` to its end; its wall seconds and CPU seconds (user + system).

    Raises:
        SystemExit: It exited with a non-zero status.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{argv[0]} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3)}


def run_promptfoo(folder: Path, binary: Path, cases: int, workers: int) -> dict[str, float]:
    """One promptfoo eval of ``cases`` tests, from a fresh config folder, checked."""
    config = write_promptfoo_config(folder, cases)
    out = folder / "results.json"
    env = {**os.environ, **PROMPTFOO_ENV, "PROMPTFOO_CONFIG_DIR": str(folder / "state")}
    argv = [
        str(binary), "eval", "-c", str(config), "--no-cache", "--no-table",
        "--no-progress-bar", "-j", str(workers), "-o", str(out),
    ]  # fmt: skip
    measured = timed(argv, folder, env)
    results = json.loads(out.read_text(encoding="utf-8"))["results"]
    passed = sum(1 for r in results["results"] if r["success"])
    if passed != cases or results["stats"]["successes"] != cases:
        raise SystemExit(f"promptfoo passed {passed} of {cases} cases: {out}")
    return measured


def vally_env() -> dict[str, str]:
    """This process's environment for ``vally eval``, with colours off and Python allowed to
    keep the bytecode it compiles (``PYTHONDONTWRITEBYTECODE`` removed): an installed vally
    has its modules' bytecode, so a run does not compile its ~130 modules first (about 0.1 s
    of CPU a run when the variable is set and no bytecode is there yet, as in some shells
    and containers)."""
    env = {**os.environ, "NO_COLOR": "1"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_vally(folder: Path, cases: int, workers: int) -> dict[str, float]:
    """One ``vally eval`` of ``cases`` stimuli, into a fresh output folder, checked."""
    spec = write_vally_spec(folder, cases)
    out = folder / "out"
    argv = [
        sys.executable, "-c", "from vally.cli.app import main; main()", "eval",
        "-e", str(spec), "--output-dir", str(out), "--workers", str(workers), "--quiet",
    ]  # fmt: skip
    measured = timed(argv, folder, vally_env())
    (results,) = out.glob("*/results.jsonl")
    passed = 0
    with results.open(encoding="utf-8") as lines:
        for line in lines:
            passed += json.loads(line)["gradeResult"]["passed"] is True
    if passed != cases:
        raise SystemExit(f"vally passed {passed} of {cases} stimuli: {results}")
    return measured


def one_round(
    base: Path, binary: Path, cases: int, workers: int, vally_first: bool
) -> dict[str, Any]:
    """Both sides once at ``cases``, in the given order, each in its own new folder."""
    measured: dict[str, Any] = {"cases": cases, "vally_first": vally_first}
    order = ["vally", "promptfoo"] if vally_first else ["promptfoo", "vally"]
    for side in order:
        folder = Path(tempfile.mkdtemp(prefix=f"{side}-", dir=base))
        try:
            if side == "vally":
                measured[side] = run_vally(folder, cases, workers)
            else:
                measured[side] = run_promptfoo(folder, binary, cases, workers)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return measured


def spread(values: list[float]) -> list[float]:
    """min, median and max, rounded."""
    ordered = sorted(values)
    return [round(ordered[0], 2), round(statistics.median(ordered), 2), round(ordered[-1], 2)]


def summarise(rounds: list[dict[str, Any]], cases: int) -> dict[str, Any]:
    """Median seconds of each side and the vally / promptfoo ratios at ``cases``."""
    mine = [r for r in rounds if r["cases"] == cases]
    summary: dict[str, Any] = {"cases": cases}
    for key in ("wall_s", "cpu_s"):
        for side in ("vally", "promptfoo"):
            summary[f"{side}_{key}"] = round(statistics.median(r[side][key] for r in mine), 3)
        summary[f"{key[:-2]}_ratio"] = spread([r["vally"][key] / r["promptfoo"][key] for r in mine])
    return summary


def main() -> None:
    """Parse flags, run the alternating rounds, print the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, nargs="+", default=[1000, 3000])
    parser.add_argument("--workers", type=int, default=8, help="concurrency of both sides")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--promptfoo-dir", type=Path, default=default_promptfoo_dir())
    parser.add_argument("--install", action="store_true", help=f"install promptfoo {VERSION}")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args()
    if args.install:
        install_promptfoo(args.promptfoo_dir)
    binary = promptfoo_bin(args.promptfoo_dir)
    if not binary.exists():
        raise SystemExit(f"promptfoo is not installed in {args.promptfoo_dir}: run with --install")
    rounds: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="vally-bench-") as tmp:
        for cases in args.cases:  # warm-up: file caches, Python's bytecode, Node's
            one_round(Path(tmp), binary, min(cases, 50), args.workers, vally_first=False)
        for index in range(args.rounds):
            for cases in args.cases:
                rounds.append(one_round(Path(tmp), binary, cases, args.workers, index % 2 == 1))
                print(json.dumps(rounds[-1]), flush=True)
    summary = [summarise(rounds, cases) for cases in args.cases]
    print()
    print(
        f"| N | promptfoo wall / CPU (s) | vally wall / CPU (s) "
        f"| wall ratio min/med/max | CPU ratio min/med/max |  ({args.workers} workers)"
    )
    print("|---:|---:|---:|---|---|")
    for row in summary:
        print(
            f"| {row['cases']} | {row['promptfoo_wall_s']} / {row['promptfoo_cpu_s']} "
            f"| {row['vally_wall_s']} / {row['vally_cpu_s']} "
            f"| {' / '.join(map(str, row['wall_ratio']))} "
            f"| {' / '.join(map(str, row['cpu_ratio']))} |"
        )
    if args.json:
        args.json.write_text(json.dumps({"rounds": rounds, "summary": summary}, indent=2) + "\n")


if __name__ == "__main__":
    main()
