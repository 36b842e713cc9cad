"""Measure the per-trial cost of the ``docker`` backend against its limit, a raw
``docker run --rm <image> true`` loop, side by side in one run.

Usage (from the repository root, with a Docker engine running)::

    python3 bench/docker_overhead.py                    # 40 trials per setting, 3 rounds
    python3 bench/docker_overhead.py --trials 100 --rounds 5 --image my-image:tag
    python3 bench/docker_overhead.py --json out.json    # also write the numbers as JSON
    python3 bench/docker_overhead.py --backend-args disk=none   # the docker settings' args

Each trial does what the run engine does around a trivial agent: ``Backend.open`` (for
docker: a started container with its workspace, from the warm pool when one is ready), one
``exec(["true"])`` (the agent), ``Sandbox.stop_processes`` (what the engine does before
grading; ``--no-stop`` leaves it out) and ``Sandbox.close`` (remove the container). Trials run
through an asyncio pool of 1 and 4 workers. The raw loop runs ``docker run --rm <image>
true`` (the CLI: create, attach, start, wait, remove) through the same pool. Settings
alternate within each round (raw, docker with the pool, docker without it, local), so a
busy machine slows all of them alike; the ratios of each round against the raw loop of the
same round are reported with their median. Reported per setting: wall time per trial
(total time / trials, what a run pays), its ratio to the raw loop at the same workers, and
the median latency of each step. The backend's ``start`` (image checks, sweep) is timed
separately: it is paid once per run. The backend is told how many trials come
(``expect_sandboxes``), as the run engine tells it, so its warm pool makes no spare beyond
them; any spare still left at the end is removed inside the timed part.

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
import subprocess
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


SETTINGS = ("raw", "docker", "docker-nopool", "local")
"""What one round measures, in this order: the raw ``docker run --rm`` loop, the docker
backend with its warm pool (the default) and without it (``pool=0``), the local backend."""


def make_backend(name: str, image: str, args: dict[str, str] | None = None) -> Any:
    """A fresh backend instance for the setting ``name`` (``args``: more docker backend
    arguments, as ``--backend-args`` gives them; ``pool`` there sizes the pool of the
    ``docker`` setting)."""
    if name == "local":
        from vally_backends.local import LocalBackend

        return LocalBackend()
    from vally_backends.docker import Config, DockerBackend

    settings: dict[str, Any] = {"image": image, "pull": "never", **(args or {})}
    if name == "docker-nopool":
        settings["pool"] = 0
    return DockerBackend(Config(**settings))


async def raw_trial(image: str) -> dict[str, float]:
    """One ``docker run --rm <image> true``; the whole run counts as ``exec``."""
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        "docker", "run", "--rm", "--network", "none", image, "true",
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    _, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    t1 = time.perf_counter()
    return {"open": 0.0, "exec": t1 - t0, "stop": 0.0, "close": 0.0, "total": t1 - t0}


async def one_trial(backend: Any, run_id: str, index: int, stop: bool) -> dict[str, float]:
    """open -> exec(true) -> stop_processes (when ``stop``) -> close; returns the seconds
    of each step."""
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
        if stop:
            await sandbox.stop_processes()
        t3 = time.perf_counter()
    finally:
        await sandbox.close()
    t4 = time.perf_counter()
    return {"open": t1 - t0, "exec": t2 - t1, "stop": t3 - t2, "close": t4 - t3, "total": t4 - t0}


async def measure(
    name: str,
    image: str,
    trials: int,
    workers: int,
    args: dict[str, str] | None = None,
    stop: bool = True,
) -> dict[str, Any]:
    """Run ``trials`` trials of setting ``name`` with ``workers`` concurrent workers."""
    backend = None if name == "raw" else make_backend(name, image, args)
    run_id = f"bench-{name}-{workers}-{time.time_ns()}"
    s0 = time.perf_counter()
    if backend is not None:
        await backend.start(run_id)
        expect = getattr(backend, "expect_sandboxes", None)
        if expect is not None:
            expect(trials)  # as the run engine does: the warm pool makes no spare beyond them
    start_s = time.perf_counter() - s0
    queue: asyncio.Queue[int] = asyncio.Queue()
    for index in range(trials):
        queue.put_nowait(index)
    steps: list[dict[str, float]] = []

    async def worker() -> None:
        while not queue.empty():
            index = queue.get_nowait()
            if backend is None:
                steps.append(await raw_trial(image))
            else:
                steps.append(await one_trial(backend, run_id, index, stop))

    w0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(workers)))
    if backend is not None:
        await backend.shutdown()  # removes the pool's unused spares: part of the cost
    wall = time.perf_counter() - w0

    def median_ms(key: str) -> float:
        return round(statistics.median(s[key] for s in steps) * 1000, 1)

    return {
        "setting": name,
        "workers": workers,
        "trials": trials,
        "start_ms": round(start_s * 1000, 1),
        "wall_per_trial_ms": round(wall / trials * 1000, 1),
        "trials_per_s": round(trials / wall, 2),
        "median_open_ms": median_ms("open"),
        "median_exec_ms": median_ms("exec"),
        "median_stop_ms": median_ms("stop"),
        "median_close_ms": median_ms("close"),
        "median_trial_ms": median_ms("total"),
    }


def summarise(rounds: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per setting and workers: the median over rounds of the wall time per trial and of
    its ratio to the raw loop of the same round (and the worst ratio)."""
    rows = []
    keys = [(r["setting"], r["workers"]) for r in rounds[0]]
    for setting, workers in keys:
        ratios, walls = [], []
        for results in rounds:
            row = next(r for r in results if (r["setting"], r["workers"]) == (setting, workers))
            raw = next(r for r in results if (r["setting"], r["workers"]) == ("raw", workers))
            walls.append(row["wall_per_trial_ms"])
            ratios.append(row["wall_per_trial_ms"] / raw["wall_per_trial_ms"])
        rows.append(
            {
                "setting": setting,
                "workers": workers,
                "wall_per_trial_ms": round(statistics.median(walls), 1),
                "ratio_to_raw": round(statistics.median(ratios), 2),
                "worst_ratio": round(max(ratios), 2),
            }
        )
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """The summary rows as a markdown table."""
    lines = [
        "| setting | workers | wall/trial (ms) | ratio to raw (median) | worst ratio |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['setting']} | {r['workers']} | {r['wall_per_trial_ms']} | "
            f"{r['ratio_to_raw']} | {r['worst_ratio']} |"
        )
    return "\n".join(lines)


def main() -> None:
    """Parse flags, run every setting round by round, print a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=SETTINGS)
    parser.add_argument("--image", default=None, help="image for docker (default: busybox)")
    parser.add_argument("--busybox", type=Path, default=Path("/bin/busybox"))
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    parser.add_argument(
        "--backend-args",
        nargs="+",
        default=[],
        metavar="K=V",
        help="more docker backend arguments for the docker settings (e.g. disk=none)",
    )
    parser.add_argument(
        "--no-stop",
        action="store_true",
        help="skip stop_processes after the agent's command (the figures before it was timed)",
    )
    args = parser.parse_args()
    backend_args = dict(item.split("=", 1) for item in args.backend_args)
    image = args.image or build_busybox_image(args.busybox)
    settings = ["raw", *(s for s in args.settings if s != "raw")]
    rounds: list[list[dict[str, Any]]] = []
    for _ in range(args.rounds):
        results = []
        for workers in args.workers:
            for name in settings:
                results.append(
                    asyncio.run(
                        measure(name, image, args.trials, workers, backend_args, not args.no_stop)
                    )
                )
                print(json.dumps(results[-1]), flush=True)
        rounds.append(results)
    rows = summarise(rounds)
    print()
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps({"rounds": rounds, "summary": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
