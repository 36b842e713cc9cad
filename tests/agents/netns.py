"""Network namespaces with only loopback, for running agent CLIs offline for real.

A test runs a driver (:mod:`tests.agents.loopback`) under ``unshare -n`` (``unshare -rn``
when not root); the driver brings ``lo`` up, starts the scripted model server on 127.0.0.1
inside the namespace and runs the command. Any connection to another address fails at once
(there is no other interface), so a stray request fails the test instead of leaving the
machine.

Tests that need a namespace or an agent CLI skip with the reason when it is missing, unless
``VALLY_REQUIRE_AGENT_CLIS=1`` (CI), which makes them fail instead.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import struct
import subprocess
from functools import cache

import pytest

REQUIRE_ENV = "VALLY_REQUIRE_AGENT_CLIS"

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
def namespace_prefix() -> tuple[str, ...] | None:
    """The ``unshare`` argv that gives a private network namespace, or None when this
    machine cannot make one."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    argv = (unshare, "-n") if os.geteuid() == 0 else (unshare, "-rn")
    probe = subprocess.run([*argv, "true"], capture_output=True, timeout=30, check=False)
    return argv if probe.returncode == 0 else None


def require_or_skip(reason: str) -> None:
    """Skip with ``reason``, or fail when ``VALLY_REQUIRE_AGENT_CLIS=1`` says the agent-CLI
    tests must run."""
    if os.environ.get(REQUIRE_ENV, "") not in ("", "0"):
        pytest.fail(f"{REQUIRE_ENV}=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def require_namespace() -> tuple[str, ...]:
    """The namespace argv; skips (or fails under ``VALLY_REQUIRE_AGENT_CLIS=1``) when no
    loopback-only network namespace can be made here."""
    prefix = namespace_prefix()
    if prefix is None:
        require_or_skip("no network namespace can be made here (unshare -n / -rn)")
    assert prefix is not None
    return prefix
