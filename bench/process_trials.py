"""Process trials against the limit: ``command true`` trials next to a bare asyncio spawn.

Usage (from the repository root)::

    python3 bench/process_trials.py                     # 1000 processes per row, 3 rounds
    python3 bench/process_trials.py --count 300 --rounds 1
    python3 bench/process_trials.py --json out.json     # also write the numbers as JSON
    python3 bench/process_trials.py --parts whole start-up   # only the whole processes

Rows, each at ``--workers`` concurrent processes (default 8), measured in alternating
rounds in one process so every row sees the same machine load:

* ``bare spawn``: ``asyncio.create_subprocess_exec("true")`` and ``wait()``, nothing else:
  the limit.
* ``sandbox exec``: ``LocalSandbox.exec(["true"])`` on one ``local`` sandbox: the backend's
  per-command cost (keeper, containment marker, pipes, output capture).
* ``spawn + files``: the bare spawn run in a fresh temporary folder, plus the file-system
  work every trial's outputs need: that folder made and removed (the workspace), and a
  trial folder with two small files (``metadata.json`` and ``events.jsonl``). The limit
  for a trial that keeps its outputs; on a disk where creating a file or folder is slow
  it is well above the bare spawn.
* ``command true``: ``vally eval`` run in-process (``vally.run_eval``, console off, every
  other output on) with the ``command`` executor running ``true``, one ``output-contains``
  grader per trial, on the ``local`` backend: a whole trial.

Per row it prints the wall time per process (or trial) and its ratios to ``bare spawn`` and
to ``spawn + files`` in the same round (the medians over the rounds). Only the work itself
is timed: interpreter start-up and imports are excluded (a warm-up round comes first), and
so is removing the temporary folders afterwards. CPU time is not reported: the keepers of
the ``local`` backend are long-lived children, whose CPU time the operating system charges
to this process only when they exit.

Then whole processes, each started fresh (interpreter start-up included), in alternating
rounds (``--whole-rounds``): ``vally eval`` of the same spec (the console report on, as a
user runs it, off a terminal) against the peers of ``bench/spawn_peers.py``: ``bare`` (the
bare spawn above), ``same-work`` (a workspace folder made and removed, the process in a new
session, the prompt on its standard input, its output read) and ``same-work-files`` (plus a
trial folder with two small files). It prints the wall and CPU time of each and the ratios
of ``vally eval`` to each peer, min / median / max over the rounds. The CPU time is that of
the process and of every process below it: this script makes itself a child subreaper, so
the processes a run leaves running as it exits (the ``local`` backend's keepers, which end
once vally closes their sockets) come to it and are reaped, their CPU time and their
commands' with them (on systems without subreapers only the children a process waited for
count, and ``vally eval``'s keepers are missed).

Last, start-up: ``vally --help`` against ``python -c pass`` and ``python -c 'import vally'``,
alternating (``--start-rounds``), the CPU time of each fresh process and the ratios, min /
median / max.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput import write_spec

COMMAND = "{name: command, config: {command: ['true'], output: stdout}}"


async def _pool(count: int, workers: int, one: Callable[[], Awaitable[None]]) -> None:
    """Run ``one`` ``count`` times with at most ``workers`` at once."""
    gate = asyncio.Semaphore(workers)

    async def _guarded() -> None:
        async with gate:
            await one()

    await asyncio.gather(*(_guarded() for _ in range(count)))


async def _bare() -> None:
    proc = await asyncio.create_subprocess_exec("true")
    await proc.wait()


def bare_spawn(count: int, workers: int) -> float:
    """Seconds for ``count`` bare asyncio spawns of ``true``."""
    start = time.perf_counter()
    asyncio.run(_pool(count, workers, _bare))
    return time.perf_counter() - start


def spawn_with_files(count: int, workers: int) -> float:
    """Seconds for ``count`` bare spawns, each in its own new folder, removed after, and each
    followed by a trial folder with two small files."""

    async def _run(out: Path) -> None:
        numbers = iter(range(count))

        async def _one() -> None:
            index = next(numbers)
            workspace = tempfile.mkdtemp(prefix="vally-eval-")
            try:
                proc = await asyncio.create_subprocess_exec("true", cwd=workspace)
                await proc.wait()
            finally:
                os.rmdir(workspace)
            trial = out / f"trial-{index}"
            trial.mkdir()
            (trial / "events.jsonl").write_text('{"type":"turn_end"}\n', encoding="utf-8")
            (trial / "metadata.json").write_text('{"exitCode":0}\n', encoding="utf-8")

        await _pool(count, workers, _one)

    with tempfile.TemporaryDirectory(prefix="vally-bench-") as tmp:
        start = time.perf_counter()
        asyncio.run(_run(Path(tmp)))
        return time.perf_counter() - start


def sandbox_exec(count: int, workers: int) -> float:
    """Seconds for ``count`` ``LocalSandbox.exec(["true"])`` calls on one sandbox (its
    creation and closing included)."""
    from vally import TrialContext  # noqa: F401  (imports warmed up)
    from vally_backends.local import LocalSandbox

    async def _run() -> float:
        with tempfile.TemporaryDirectory(prefix="vally-bench-") as tmp:
            start = time.perf_counter()
            sandbox = LocalSandbox(Path(tmp), base_env={"PATH": os.environ["PATH"]}, keep=True)

            async def _one() -> None:
                result = await sandbox.exec(["true"])
                if result.exit_code != 0:
                    raise SystemExit(f"'true' failed: {result}")

            try:
                await _pool(count, workers, _one)
            finally:
                await sandbox.close()
            return time.perf_counter() - start

    return asyncio.run(_run())


def command_trials(count: int, workers: int) -> float:
    """Seconds of a ``vally eval`` of ``count`` ``command true`` trials."""
    from vally import EvalRequest, run_eval

    with tempfile.TemporaryDirectory(prefix="vally-bench-") as tmp:
        folder = Path(tmp)
        spec = write_spec(folder, COMMAND, count)
        request = EvalRequest(
            eval_specs=[str(spec)], output_dir=str(folder / "out"), workers=workers, console=False
        )
        start = time.perf_counter()
        result = run_eval(request)
        elapsed = time.perf_counter() - start
        if result.errored or result.cancelled:
            raise SystemExit(f"bench run failed: {result.error or result.failures}")
        return elapsed


ROWS: dict[str, Callable[[int, int], float]] = {
    "bare spawn": bare_spawn,
    "spawn + files": spawn_with_files,
    "sandbox exec": sandbox_exec,
    "command true": command_trials,
}


def measure(row: str, count: int, workers: int) -> float:
    """Wall milliseconds per process (or trial) of one row."""
    return ROWS[row](count, workers) * 1000 / count


PEERS = ("bare", "same-work", "same-work-files")
"""The whole-process peers of ``vally eval`` (``bench/spawn_peers.py``)."""

START_UP: dict[str, list[str]] = {
    "python -c pass": ["-c", "pass"],
    "import vally": ["-c", "import vally"],
    "vally --help": ["-c", "from vally.cli.app import main; main()", "--help"],
}
"""The start-up rows: arguments of a fresh ``python``."""


PR_SET_CHILD_SUBREAPER = 36


def adopt_orphans() -> bool:
    """Make this process a child subreaper (Linux), so that the processes a measured
    process leaves running when it exits (the ``local`` backend's keepers, which end once
    vally closes their sockets) come to this process, which reaps them and so counts
    their CPU time and their children's. False where that is not available (or where
    ``/proc`` does not list a thread's children)."""
    if not os.path.exists(f"/proc/self/task/{os.getpid()}/children"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


ADOPTING = adopt_orphans()
"""Whether the CPU times below count every descendant of a measured process."""


def _children() -> set[int]:
    """This process's children now (every thread's)."""
    found: set[int] = set()
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children", encoding="ascii") as fh:
            found.update(int(pid) for pid in fh.read().split())
    return found


def timed_process(argv: list[str], cwd: Path) -> tuple[float, float]:
    """Run ``argv`` to its end; its wall seconds (until it exited) and the CPU seconds of
    it and of every process below it: the children it waited for and, with
    :data:`ADOPTING`, those it left running, reaped here once they end.

    Raises:
        SystemExit: The process failed.
    """
    already = _children() if ADOPTING else set()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=os.environ
    )
    assert proc.stderr is not None
    errors = proc.stderr.read()
    _, status, _ = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    while ADOPTING and (left := _children() - already):
        for pid in left:
            os.waitpid(pid, 0)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{argv} failed ({proc.returncode}):\n{errors.decode()[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def whole_round(count: int, workers: int) -> dict[str, dict[str, float]]:
    """Each peer and ``vally eval`` once, as whole processes, one after the other."""
    peers = str(Path(__file__).with_name("spawn_peers.py"))
    results: dict[str, dict[str, float]] = {}
    for row in (*PEERS, "vally eval"):
        with tempfile.TemporaryDirectory(prefix="vally-bench-") as tmp:
            folder = Path(tmp)
            out = folder / "out"
            out.mkdir()
            if row == "vally eval":
                spec = write_spec(folder, COMMAND, count)
                argv = [
                    sys.executable, "-c", "from vally.cli.app import main; main()", "eval",
                    "-e", str(spec), "--output-dir", str(out), "--workers", str(workers),
                ]  # fmt: skip
            else:
                argv = [sys.executable, peers, row, str(count), str(workers), str(out)]
            wall, cpu = timed_process(argv, folder)
            if row == "vally eval":
                check_whole_run(out, count)
            results[row] = {"wall_s": wall, "cpu_s": cpu}
    return results


def check_whole_run(out: Path, count: int) -> None:
    """Fail unless the run folder under ``out`` holds ``count`` trials, none errored.

    Raises:
        SystemExit: It does not.
    """
    (summary_file,) = out.glob("*/run-summary.jsonl")
    summary = json.loads(summary_file.read_text(encoding="utf-8").splitlines()[0])
    if summary["trials"] != count or summary["errored"]:
        raise SystemExit(f"the vally run did not run every trial cleanly: {summary}")


def start_up_round() -> dict[str, float]:
    """CPU seconds of each start-up row once, in a fresh interpreter."""
    here = Path.cwd()
    return {row: timed_process([sys.executable, *args], here)[1] for row, args in START_UP.items()}


def spread(values: list[float]) -> str:
    """``min / median / max`` of ``values``, two decimals."""
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


def report_whole(rounds: list[dict[str, dict[str, float]]], count: int) -> dict[str, object]:
    """Print the whole-process table; return its figures."""
    print(f"\nwhole processes, {count} trials each, {len(rounds)} rounds (min / median / max)")
    print(f"{'row':<16} {'wall s':>6} {'cpu s':>6}")
    for row in (*PEERS, "vally eval"):
        wall = statistics.median(r[row]["wall_s"] for r in rounds)
        cpu = statistics.median(r[row]["cpu_s"] for r in rounds)
        print(f"{row:<16} {wall:>6.2f} {cpu:>6.2f}")
    figures: dict[str, object] = {"rounds": rounds}
    for peer in PEERS:
        walls = [r["vally eval"]["wall_s"] / r[peer]["wall_s"] for r in rounds]
        cpus = [r["vally eval"]["cpu_s"] / r[peer]["cpu_s"] for r in rounds]
        print(f"vally eval x {peer:<16} wall {spread(walls)}   cpu {spread(cpus)}")
        figures[f"x_{peer}"] = {"wall": walls, "cpu": cpus}
    return figures


def report_start_up(rounds: list[dict[str, float]]) -> dict[str, object]:
    """Print the start-up table; return its figures."""
    print(f"\nstart-up CPU, {len(rounds)} fresh processes each (min / median / max)")
    for row in START_UP:
        ms = [r[row] * 1000 for r in rounds]
        print(f"{row:<16} {spread(ms)} ms")
    figures: dict[str, object] = {"rounds": rounds}
    for peer in ("python -c pass", "import vally"):
        ratios = [r["vally --help"] / r[peer] for r in rounds if r[peer] > 0]
        print(f"vally --help x {peer:<14} {spread(ratios)}")
        figures[f"help_x_{peer}"] = ratios
    return figures


def main() -> None:
    """Measure every part in alternating rounds and print the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1000, help="processes or trials per row")
    parser.add_argument("--workers", type=int, default=8, help="concurrent processes")
    parser.add_argument("--rounds", type=int, default=3, help="alternating in-process rounds")
    parser.add_argument("--whole-rounds", type=int, default=3, help="whole-process rounds")
    parser.add_argument("--start-rounds", type=int, default=10, help="start-up rounds")
    parser.add_argument(
        "--parts",
        nargs="+",
        choices=("in-process", "whole", "start-up"),
        default=["in-process", "whole", "start-up"],
        help="what to measure",
    )
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    args = parser.parse_args()
    os.environ.setdefault("NO_COLOR", "1")
    # Every process measured keeps the bytecode it compiles, as an installed vally has it:
    # the warm-up round writes it (see bench/promptfoo.py, vally_env).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    results: dict[str, object] = {
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "count": args.count,
        "workers": args.workers,
    }
    if "in-process" in args.parts:
        results["in_process"] = measure_in_process(args.count, args.workers, args.rounds)
    if "whole" in args.parts:
        whole_round(20, args.workers)  # warm-up: compiled modules, the disk's caches
        rounds = [whole_round(args.count, args.workers) for _ in range(args.whole_rounds)]
        results["whole"] = report_whole(rounds, args.count)
    if "start-up" in args.parts:
        start_up_round()
        results["start_up"] = report_start_up([start_up_round() for _ in range(args.start_rounds)])
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


def measure_in_process(count: int, workers: int, rounds_count: int) -> dict[str, object]:
    """The in-process rows in alternating rounds; print their table and return it."""
    for row in ROWS:  # warm-up: imports, plugin loading, the keeper host
        measure(row, 20, workers)
    rounds: list[dict[str, float]] = []
    for _ in range(rounds_count):
        rounds.append({row: measure(row, count, workers) for row in ROWS})
    results: dict[str, object] = {"rounds": rounds}
    print(f"{count} per row, {workers} workers, {rounds_count} rounds (medians)")
    print(f"{'row':<14} {'ms each':>8} {'x bare':>7} {'x files':>8}   per round (x bare)")
    for row in ROWS:
        wall = statistics.median(r[row] for r in rounds)
        ratios = [r[row] / r["bare spawn"] for r in rounds]
        to_files = statistics.median(r[row] / r["spawn + files"] for r in rounds)
        results[row] = {
            "ms": wall,
            "x_bare": statistics.median(ratios),
            "x_bare_rounds": ratios,
            "x_spawn_files": to_files,
        }
        each = " ".join(f"{x:.2f}" for x in ratios)
        print(f"{row:<14} {wall:>8.2f} {statistics.median(ratios):>7.2f} {to_files:>8.2f}   {each}")
    return results


if __name__ == "__main__":
    main()
