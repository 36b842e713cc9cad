"""Measure the per-trial overhead of the ``docker`` backend against ``local``.

Usage (from the repository root, with a Docker engine running)::

    python3 bench/docker_overhead.py                    # 20 trials per setting
    python3 bench/docker_overhead.py --trials 50 --image my-image:tag
    python3 bench/docker_overhead.py --json out.json    # also write the numbers as JSON

Each trial does what the run engine does around a trivial agent: ``Backend.open`` (for
docker: create and start a container and its workspace), one ``exec(["true"])`` (the agent)
and ``Sandbox.close`` (remove the container). Trials run through an asyncio pool of 1 and 4
workers. Reported: wall time per trial (total time / trials, what a run pays), the median
latency of each step, and trials per second. The backend's ``start`` (image checks, sweep)
is timed separately: it is paid once per run.

Without ``--image`` the busybox test image (``tests/fixtures/docker/busybox``, built
``FROM scratch`` with ``/bin/busybox``) is built locally; nothing is pulled.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from vally.contracts.protocols import TrialContext, TrialKey
from vally.models.spec import EnvironmentConfig

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "docker" / "busybox"


def build_busybox_image(busybox: Path) -> str:
    """Build (once) the busybox image the tests use and return its tag."""
    import docker

    api = docker.from_env().api
    with tempfile.TemporaryDirectory() as tmp:
        context = Path(tmp) / "ctx"
        shutil.copytree(FIXTURE, context)
        shutil.copy2(busybox, context / "busybox")
        digest = hashlib.sha256()
        for path in sorted(context.iterdir()):
            digest.update(path.name.encode() + path.read_bytes())
        tag = f"vally-test-busybox:{digest.hexdigest()[:16]}"
        try:
            api.inspect_image(tag)
            return tag
        except docker.errors.ImageNotFound:
            pass
        for chunk in api.build(path=str(context), tag=tag, rm=True, decode=True):
            if "error" in chunk:
                raise SystemExit(f"building the busybox image failed: {chunk['error']}")
    return tag


def make_backend(name: str, image: str) -> Any:
    """A fresh backend instance of ``name``."""
    if name == "local":
        from vally_backends.local import LocalBackend

        return LocalBackend()
    from vally_backends.docker import Config, DockerBackend

    return DockerBackend(Config(image=image, pull="never"))


async def one_trial(backend: Any, run_id: str, index: int) -> dict[str, float]:
    """open -> exec(true) -> close; returns the seconds of each step."""
    trial = TrialContext(
        key=TrialKey("default", "bench", f"s{index}", "m", 0),
        run_id=run_id,
        environment=EnvironmentConfig(),
        spec_dir=ROOT,
    )
    t0 = time.perf_counter()
    sandbox = await backend.open(trial)
    t1 = time.perf_counter()
    try:
        result = await sandbox.exec(["true"], timeout=60)
        assert result.exit_code == 0, result
        t2 = time.perf_counter()
    finally:
        await sandbox.close()
    t3 = time.perf_counter()
    return {"open": t1 - t0, "exec": t2 - t1, "close": t3 - t2, "total": t3 - t0}


async def measure(name: str, image: str, trials: int, workers: int) -> dict[str, Any]:
    """Run ``trials`` trials on a fresh backend with ``workers`` concurrent workers."""
    backend = make_backend(name, image)
    run_id = f"bench-{name}-{workers}-{time.time_ns()}"
    s0 = time.perf_counter()
    await backend.start(run_id)
    start_s = time.perf_counter() - s0
    queue: asyncio.Queue[int] = asyncio.Queue()
    for index in range(trials):
        queue.put_nowait(index)
    steps: list[dict[str, float]] = []

    async def worker() -> None:
        while not queue.empty():
            index = queue.get_nowait()
            steps.append(await one_trial(backend, run_id, index))

    w0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(workers)))
    wall = time.perf_counter() - w0
    await backend.shutdown()

    def median_ms(key: str) -> float:
        return round(statistics.median(s[key] for s in steps) * 1000, 1)

    return {
        "backend": name,
        "workers": workers,
        "trials": trials,
        "start_ms": round(start_s * 1000, 1),
        "wall_per_trial_ms": round(wall / trials * 1000, 1),
        "trials_per_s": round(trials / wall, 2),
        "median_open_ms": median_ms("open"),
        "median_exec_ms": median_ms("exec"),
        "median_close_ms": median_ms("close"),
        "median_trial_ms": median_ms("total"),
    }


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a markdown table."""
    header = (
        "| backend | workers | trials | wall/trial (ms) | trials/s | median open | "
        "median exec | median close | start (once) |"
    )
    lines = [header, "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['backend']} | {r['workers']} | {r['trials']} | {r['wall_per_trial_ms']} | "
            f"{r['trials_per_s']} | {r['median_open_ms']} | {r['median_exec_ms']} | "
            f"{r['median_close_ms']} | {r['start_ms']} |"
        )
    return "\n".join(lines)


def main() -> None:
    """Parse flags, run every setting, print a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--image", default=None, help="image for docker (default: busybox)")
    parser.add_argument("--busybox", type=Path, default=Path("/bin/busybox"))
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args()
    image = args.image or build_busybox_image(args.busybox)
    rows = []
    for name in ("local", "docker"):
        for workers in (1, 4):
            rows.append(asyncio.run(measure(name, image, args.trials, workers)))
            print(json.dumps(rows[-1]), flush=True)
    print()
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
