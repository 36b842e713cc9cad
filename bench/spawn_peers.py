"""The peers of a whole ``vally eval`` of ``command true`` trials, each a whole process of
its own (interpreter start-up included), for ``bench/process_trials.py``.

Usage::

    python3 bench/spawn_peers.py bare COUNT WORKERS OUT
    python3 bench/spawn_peers.py same-work COUNT WORKERS OUT
    python3 bench/spawn_peers.py same-work-files COUNT WORKERS OUT

Each runs ``true`` COUNT times through an asyncio pool of WORKERS:

* ``bare``: ``asyncio.create_subprocess_exec("true")`` and ``wait()``, nothing else.
* ``same-work``: what a ``command`` trial on the ``local`` backend does around the process,
  and no more: a new workspace folder in the temporary folder (removed after), the process
  started in it in a new session, its standard input a pipe given the prompt, its standard
  output and error pipes read to the end.
* ``same-work-files``: ``same-work`` plus the trial's own outputs: a trial folder under OUT
  with two small files (``metadata.json`` and ``events.jsonl``), as every trial of a run
  that keeps its outputs writes.

It imports only the standard library modules it uses, so its start-up is the interpreter's.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

PROMPT = b"task 0"


async def _pool(count: int, workers: int, one: Callable[[int], Awaitable[None]]) -> None:
    """Run ``one(index)`` for every index below ``count``, at most ``workers`` at once."""
    numbers = iter(range(count))

    async def _worker() -> None:
        for index in numbers:
            await one(index)

    await asyncio.gather(*(_worker() for _ in range(workers)))


async def _bare(index: int) -> None:
    proc = await asyncio.create_subprocess_exec("true")
    await proc.wait()


async def _same_work(index: int) -> None:
    workspace = tempfile.mkdtemp(prefix="vally-eval-")
    try:
        proc = await asyncio.create_subprocess_exec(
            "true",
            cwd=workspace,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        await proc.communicate(PROMPT)
    finally:
        os.rmdir(workspace)


def _with_files(out: Path) -> Callable[[int], Awaitable[None]]:
    async def _one(index: int) -> None:
        await _same_work(index)
        trial = out / f"trial-{index}"
        trial.mkdir()
        (trial / "events.jsonl").write_text('{"type":"turn_end"}\n', encoding="utf-8")
        (trial / "metadata.json").write_text('{"exitCode":0}\n', encoding="utf-8")

    return _one


def main() -> None:
    """Run the peer named on the command line."""
    peer, count, workers, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    ones: dict[str, Callable[[int], Awaitable[None]]] = {
        "bare": _bare,
        "same-work": _same_work,
        "same-work-files": _with_files(Path(out)),
    }
    asyncio.run(_pool(count, workers, ones[peer]))


if __name__ == "__main__":
    main()
