"""Measure where the Docker engine's CPU goes for each call the ``docker`` backend makes.

Usage (from the repository root, on the Docker host, as a user who may read the engine's
``/proc`` entries, on an otherwise idle machine)::

    python3 bench/docker_engine_cpu.py                        # 20 trials, busybox image
    python3 bench/docker_engine_cpu.py --trials 40 --backend-args disk=none
    python3 bench/docker_engine_cpu.py --raw                  # also: docker run --rm loop
    python3 bench/docker_engine_cpu.py --stop engine          # stop_processes via docker top

When several trials run at once on a small machine the engine (``dockerd``, ``containerd``,
the ``containerd-shim`` of each container and the ``runc`` processes they start) is CPU
bound, so what a trial costs is the engine's CPU time, not the latency of its calls. This
script runs trials one after the other (``open`` without the warm pool, ``exec(["true"])``,
``stop_processes`` as the run engine calls it before grading, ``close``), wraps every docker
API call the backend makes, and reads the CPU time of the engine's processes from ``/proc``
before and after each call. Reported per API call: how
many were made, the median latency, and the engine CPU time per call, split into dockerd,
containerd and shims (the live shims plus what init reaped meanwhile: shims exit with their
container and are reaped by process 1, which also reaps other orphans, so keep the machine
otherwise idle). ``--stop`` chooses how ``stop_processes`` learns that nothing is left to
stop: ``cgroup`` (the default: the container's cgroup files on this host), ``engine`` (asks
``docker top``, as on a host that cannot see the engine's cgroups) or ``none`` (no stop, as
before it was timed). ``client`` is this process's own CPU time. With ``--raw`` the same is
measured for ``docker run --rm --network none <image> true``, whose ``client`` is the CPU
time of the docker CLI.

CPU times come in clock ticks (10 ms on most systems): per-call figures are averages over
all calls and are only meaningful with enough trials. Work the engine does after a call has
returned (e.g. the command an ``exec_start`` started) is counted for the next call, or, at
the end of a trial, only in the total per trial.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from docker_overhead import ROOT, build_busybox_image

from vally.contracts.protocols import TrialContext, TrialKey
from vally.models.spec import EnvironmentConfig

TICK = os.sysconf("SC_CLK_TCK")
CALLS = (
    "create_container",
    "put_archive",
    "start",
    "exec_create",
    "exec_start",
    "exec_inspect",
    "top",
    "inspect_container",
    "remove_container",
)
"""The API calls of a trial that are counted (everything else passes through)."""


def _ticks(pid: int, *, children: bool = True) -> int:
    """utime + stime (+ cutime + cstime) of a process, in clock ticks; 0 when gone."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return sum(int(x) for x in fields[11 : 15 if children else 13])


def _comm(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/comm") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def _find(name: str) -> int:
    for pid in os.listdir("/proc"):
        if pid.isdigit() and _comm(pid) == name:
            return int(pid)
    raise SystemExit(f"no {name} process is visible in /proc; run this on the Docker host")


class Engine:
    """Reads the engine's CPU time from ``/proc``."""

    def __init__(self) -> None:
        self.dockerd = _find("dockerd")
        self.containerd = _find("containerd")

    def snapshot(self) -> dict[str, int]:
        """CPU ticks so far of dockerd, containerd, the shims (live ones and what init
        reaped) and this process."""
        shims = sum(
            _ticks(int(pid))
            for pid in os.listdir("/proc")
            if pid.isdigit() and _comm(pid).startswith("containerd-shim")
        )
        with open("/proc/1/stat") as handle:
            init = handle.read().rsplit(")", 1)[1].split()
        times = os.times()
        return {
            "dockerd": _ticks(self.dockerd),
            "containerd": _ticks(self.containerd),
            "shims": shims + int(init[13]) + int(init[14]),
            "client": round((times.user + times.system) * TICK),
            "cli": round((times.children_user + times.children_system) * TICK),
        }


class Tally:
    """Per call name: latencies and engine CPU ticks."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.cpu: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))

    def timed(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` measured under ``name``."""

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            before = self.engine.snapshot()
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.latency[name].append(time.perf_counter() - start)
                after = self.engine.snapshot()
                for key, value in after.items():
                    self.cpu[name][key] += value - before[key]

        return wrapper

    def rows(self) -> list[str]:
        """A markdown table, one row per call, and a total per trial."""
        keys = ("dockerd", "containerd", "shims")
        lines = [
            "| call | calls | median latency (ms) | "
            + " | ".join(f"{k} CPU/call (ms)" for k in keys)
            + " | engine CPU/call (ms) | client CPU/call (ms) |",
            "|---|---:|---:|" + "---:|" * (len(keys) + 2),
        ]
        for name, latencies in self.latency.items():
            n = len(latencies)
            cpu = {k: v * 1000 / TICK / n for k, v in self.cpu[name].items()}
            engine = sum(cpu[k] for k in keys)
            client = cpu["cli"] if name == "docker run" else cpu["client"]
            lines.append(
                f"| {name} | {n} | {statistics.median(latencies) * 1000:.1f} | "
                + " | ".join(f"{cpu[k]:.1f}" for k in keys)
                + f" | {engine:.1f} | {client:.1f} |"
            )
        return lines


async def backend_trials(
    image: str, trials: int, args: dict[str, str], tally: Tally, stop: str
) -> float:
    """Run ``trials`` trials one after the other; returns the engine CPU ms per trial."""
    from vally_backends.docker import Config, DockerBackend
    from vally_backends.docker.cgroups import CgroupLocator

    backend = DockerBackend(Config(**{"image": image, "pull": "never", **args, "pool": 0}))
    if stop == "engine":  # a locator that finds no /proc: every count goes to docker top
        backend._cgroups = CgroupLocator(proc="/nonexistent")
    await backend.start(f"bench-cpu-{time.time_ns()}")
    api = backend.api
    for name in CALLS:
        setattr(api, name, tally.timed(name, getattr(api, name)))
    before = tally.engine.snapshot()
    try:
        for index in range(trials):
            trial = TrialContext(
                key=TrialKey("default", "bench", f"s{index}", "m", 0),
                run_id=backend.run_id,
                environment=EnvironmentConfig(),
                spec_dir=ROOT,
            )
            sandbox = await backend.open(trial)
            try:
                result = await sandbox.exec(["true"], timeout=60)
                assert result.exit_code == 0, result
                if stop != "none":
                    await sandbox.stop_processes()
            finally:
                await sandbox.close()
    finally:
        after = tally.engine.snapshot()
        for name in CALLS:
            vars(api).pop(name, None)
        await backend.shutdown()
    spent = sum(after[k] - before[k] for k in ("dockerd", "containerd", "shims"))
    return spent * 1000 / TICK / trials


def raw_trials(image: str, trials: int, tally: Tally) -> float:
    """``docker run --rm`` ``trials`` times; returns the engine CPU ms per trial."""
    argv = ["docker", "run", "--rm", "--network", "none", image, "true"]
    run = tally.timed("docker run", subprocess.run)
    before = tally.engine.snapshot()
    for _ in range(trials):
        run(argv, check=True, stdout=subprocess.DEVNULL)
    after = tally.engine.snapshot()
    spent = sum(after[k] - before[k] for k in ("dockerd", "containerd", "shims"))
    return spent * 1000 / TICK / trials


def main() -> None:
    """Parse flags, measure, print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--image", default=None, help="image (default: the busybox test image)")
    parser.add_argument("--busybox", type=Path, default=Path("/bin/busybox"))
    parser.add_argument(
        "--backend-args", nargs="+", default=[], metavar="K=V", help="e.g. disk=none"
    )
    parser.add_argument("--raw", action="store_true", help="also measure docker run --rm")
    parser.add_argument(
        "--stop",
        choices=("cgroup", "engine", "none"),
        default="cgroup",
        help="how stop_processes counts what is left (or no stop at all)",
    )
    args = parser.parse_args()
    image = args.image or build_busybox_image(args.busybox)
    backend_args = dict(item.split("=", 1) for item in args.backend_args)
    with open("/proc/loadavg") as handle:
        print(f"load average before: {' '.join(handle.read().split()[:3])}")
    tally = Tally(Engine())
    per_trial = asyncio.run(backend_trials(image, args.trials, backend_args, tally, args.stop))
    print(
        f"\ndocker backend {backend_args or ''} (stop: {args.stop}): "
        f"engine CPU {per_trial:.0f} ms per trial\n"
    )
    print("\n".join(tally.rows()))
    if args.raw:
        raw = Tally(tally.engine)
        per_raw = raw_trials(image, args.trials, raw)
        print(f"\ndocker run --rm: engine CPU {per_raw:.0f} ms per trial\n")
        print("\n".join(raw.rows()))


if __name__ == "__main__":
    main()
