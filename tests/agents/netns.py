"""Run a command in a network namespace of its own with only loopback up.

Agent CLIs are tested for real, offline: the test starts a driver (:mod:`tests.agents.driver`)
under ``unshare -n``; the driver brings ``lo`` up, starts the scripted model server on
127.0.0.1 inside the namespace and runs ``vally eval``. Any connection to another address
fails at once (there is no other interface), so a stray request fails the test instead of
leaving the machine.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import struct
import subprocess
from collections.abc import Mapping, Sequence
from functools import cache

import pytest

_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1


def bring_loopback_up() -> None:
    """Set ``lo`` up in the current network namespace (what ``ip link set lo up`` does)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock.fileno(), _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock.fileno(), _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP))


@cache
def namespace_problem() -> str | None:
    """Why commands cannot run in a private network namespace here (None when they can)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return "the unshare command (util-linux) is not installed"
    probe = subprocess.run(
        [unshare, "-n", "true"], capture_output=True, text=True, timeout=30, check=False
    )
    if probe.returncode != 0:
        return f"unshare -n failed: {probe.stderr.strip() or probe.returncode}"
    return None


def require_namespace() -> None:
    """Skip the test when network namespaces are unavailable (fail with
    ``VALLY_REQUIRE_AGENT_CLIS=1``, as CI sets)."""
    problem = namespace_problem()
    if problem is not None:
        require_or_skip(f"needs a private network namespace: {problem}")


def require_or_skip(reason: str) -> None:
    """Skip with ``reason``, or fail when ``VALLY_REQUIRE_AGENT_CLIS=1`` says the agent-CLI
    tests must run."""
    if os.environ.get("VALLY_REQUIRE_AGENT_CLIS") == "1":
        pytest.fail(f"{reason} (VALLY_REQUIRE_AGENT_CLIS=1 requires these tests to run)")
    pytest.skip(reason)


def run_isolated(
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike[str],
    env: Mapping[str, str],
    timeout: float,
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` under ``unshare -n`` (no network but the namespace's own loopback)."""
    unshare = shutil.which("unshare")
    assert unshare is not None
    return subprocess.run(
        [unshare, "-n", *argv],
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
