"""A real Ray cluster for tests: a head and two worker nodes, separate ``ray start``
processes with their own CPUs and custom resources, all inside a network namespace that
has only loopback (Ray would otherwise advertise the machine's routable address), so no
packet leaves the machine. Each worker node runs in a mount namespace of its own with an
empty tmpfs over the cluster's ``hidden`` folder: files the driver keeps there are out of
the workers' sight, as on separate machines.

When Ray, root or ``ip netns`` is missing the tests skip, unless ``VALLY_REQUIRE_RAY=1``
(CI): then they fail.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

HEAD_PORT = 6380
WORKER_PORTS = {1: 40101, 2: 40201}
"""Each worker node's raylet port (``--node-manager-port``), by which the tests find it."""
WORKER_CPUS = 4


def require_ray() -> None:
    """Skip (or fail under ``VALLY_REQUIRE_RAY=1``) when a local cluster cannot start."""
    reason = None
    try:
        import ray  # noqa: F401
    except ImportError:
        reason = "ray is not installed (pip install 'vally[ray]')"
    if reason is None and os.geteuid() != 0:
        reason = "network namespaces need root"
    if reason is None and shutil.which("ip") is None:
        reason = "the `ip` command (iproute2) is missing"
    if reason is None and (shutil.which("unshare") is None or shutil.which("nsenter") is None):
        reason = "the `unshare` and `nsenter` commands (util-linux) are missing"
    if reason is None:
        return
    if os.environ.get("VALLY_REQUIRE_RAY", "") not in ("", "0"):
        pytest.fail(f"VALLY_REQUIRE_RAY=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def _ray_command() -> list[str]:
    """Ray's command line run by this interpreter, so every node's worker processes use it
    too and import the vally under test (not whichever the machine's ``ray`` program
    would)."""
    main = "import sys; from ray.scripts.scripts import main; sys.argv[0] = 'ray'; main()"
    return [sys.executable, "-c", main]


@dataclass
class Cluster:
    """A running local cluster inside network namespace ``ns``."""

    ns: str
    temp_dir: Path
    hidden: Path
    """A folder the driver sees and the worker nodes do not."""
    nodes: dict[int, str] = field(default_factory=dict)
    """Worker number -> Ray node id."""

    @property
    def address(self) -> str:
        """The head's GCS address."""
        return f"127.0.0.1:{HEAD_PORT}"

    def command(self, args: Sequence[str]) -> list[str]:
        """``args`` run inside the namespace."""
        return ["ip", "netns", "exec", self.ns, *args]

    def run(self, args: Sequence[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        """Run ``args`` inside the namespace to completion."""
        return subprocess.run(  # type: ignore[call-overload,no-any-return]
            self.command(args), capture_output=True, text=True, check=False, **kwargs
        )

    def start_head(self) -> None:
        """Start the head node (no CPUs: trials go to the workers)."""
        self._start(
            "--head", f"--port={HEAD_PORT}", "--num-cpus=0", "--include-dashboard=false",
            f"--temp-dir={self.temp_dir}",
        )

    def start_worker(self, number: int) -> None:
        """Start worker node ``number`` with its CPUs and a custom resource ``w<number>``,
        in a mount namespace where ``hidden`` is an empty tmpfs."""
        private = [
            "unshare", "--mount", "--propagation", "private", "sh", "-c",
            'mount -t tmpfs vally-hidden "$0" && exec "$@"', str(self.hidden),
        ]
        self._start(
            f"--address={self.address}", f"--num-cpus={WORKER_CPUS}",
            f"--node-manager-port={WORKER_PORTS[number]}",
            f"--resources={json.dumps({f'w{number}': 1, 'vally_test': 100})}",
            prefix=private,
        )
        self.nodes[number] = self._node_id(number, replaced=self.nodes.get(number))

    def sees(self, number: int, path: Path) -> bool:
        """True when worker node ``number``'s processes see ``path``."""
        raylet = str(self.raylet_pid(number))
        done = subprocess.run(["nsenter", "-t", raylet, "-m", "test", "-e", str(path)],
                              check=False)
        return done.returncode == 0

    def _start(self, *args: str, prefix: Sequence[str] = ()) -> None:
        result = self.run(
            [*prefix, *_ray_command(), "start", "--node-ip-address=127.0.0.1",
             "--disable-usage-stats", *args],
            timeout=120,
        )
        assert result.returncode == 0, result.stdout + result.stderr

    def _node_id(self, number: int, replaced: str | None = None) -> str:
        """The node id of worker ``number``. A restarted worker has the same port as the
        node it replaces, which the head lists as alive until it misses its heartbeats, so
        the ``replaced`` id is never the answer."""
        script = (
            "import json, ray\n"
            f"ray.init(address={self.address!r}, logging_level='ERROR')\n"
            "print(json.dumps([[n['NodeManagerPort'], n['NodeID']] for n in ray.nodes() "
            "if n['Alive']]))\n"
        )
        deadline = time.monotonic() + 120
        while True:
            result = self.run([sys.executable, "-c", script], timeout=120)
            assert result.returncode == 0, result.stderr
            listed = json.loads(result.stdout.strip().splitlines()[-1])
            ids = [str(node) for port, node in listed
                   if port == WORKER_PORTS[number] and node != replaced]
            if ids:
                return ids[0]
            assert time.monotonic() < deadline, f"worker {number} never joined: {listed}"
            time.sleep(0.5)

    def raylet_pid(self, number: int) -> int:
        """The pid of worker node ``number``'s raylet."""
        needle = f"--node_manager_port={WORKER_PORTS[number]}"
        for pid in self.pids():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if b"raylet" in cmdline and needle.encode() in cmdline:
                return pid
        raise AssertionError(f"no raylet for worker {number}")

    def pids(self) -> list[int]:
        """Every process inside the namespace."""
        result = subprocess.run(
            ["ip", "netns", "pids", self.ns], capture_output=True, text=True, check=False
        )
        return [int(p) for p in result.stdout.split()]

    def kill_worker(self, number: int) -> list[int]:
        """SIGKILL worker node ``number``: its raylet and every process below it (its Ray
        workers and the trials' agents). Returns the killed pids."""
        root = self.raylet_pid(number)
        tree = [*descendants(root), root]
        for pid in tree:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return tree

    def stop(self) -> None:
        """Kill every process of the namespace and delete it."""
        for _ in range(3):
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while any(alive(p) for p in pids) and time.monotonic() < deadline:
                time.sleep(0.05)
        subprocess.run(["ip", "netns", "delete", self.ns], check=False)
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def descendants(root: int) -> list[int]:
    """Every process below ``root`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out: list[int] = []
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child)
    return out


def start_cluster(hidden: Path) -> Cluster:
    """Start a head and two workers in a fresh namespace (stopped again on failure); the
    workers do not see the folder ``hidden``."""
    ns = f"vally-ray-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    cluster = Cluster(ns, Path(tempfile.mkdtemp(prefix="vray-")), hidden)
    try:
        subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"], check=True)
        cluster.start_head()
        cluster.start_worker(1)
        cluster.start_worker(2)
    except BaseException:
        cluster.stop()
        raise
    return cluster
