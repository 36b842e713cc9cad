"""Process trials against the limit: ``command true`` trials next to a bare asyncio spawn.

Usage (from the repository root)::

    python3 bench/process_trials.py                     # 1000 processes per row, 3 rounds
    python3 bench/process_trials.py --count 300 --rounds 1
    python3 bench/process_trials.py --json out.json     # also write the numbers as JSON

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
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
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


def main() -> None:
    """Measure every row in alternating rounds and print the ratios to ``bare spawn``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1000, help="processes or trials per row")
    parser.add_argument("--workers", type=int, default=8, help="concurrent processes")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    args = parser.parse_args()
    os.environ.setdefault("NO_COLOR", "1")
    for row in ROWS:  # warm-up: imports, plugin loading, the keeper host
        measure(row, 20, args.workers)
    rounds: list[dict[str, float]] = []
    for _ in range(args.rounds):
        rounds.append({row: measure(row, args.count, args.workers) for row in ROWS})
    results: dict[str, object] = {
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "count": args.count,
        "workers": args.workers,
        "rounds": rounds,
    }
    print(f"{args.count} per row, {args.workers} workers, {args.rounds} rounds (medians)")
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
        print(
            f"{row:<14} {wall:>8.2f} {statistics.median(ratios):>7.2f} {to_files:>8.2f}   {each}"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
