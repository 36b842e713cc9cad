"""A docker image holding the real Copilot CLI, built ``FROM scratch`` (no registry): static
busybox, the CLI's native binary, the host's CA bundle, the shared libraries the CLI and its
runtime load (copied from the host), and the runtime the CLI unpacks on first start,
unpacked at build time."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.backends.docker_helpers import BUSYBOX, FIXTURES
from vally_builtin.executors.copilot.config import CopilotConfig
from vally_builtin.executors.copilot.setup import resolve_cli

CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
"""The host's CA bundle: the CLI refuses to start its model client without trust roots."""

DOCKERFILE = """\
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
COPY passwd group /etc/
COPY lib64/ /lib64/
COPY lib/ /lib/x86_64-linux-gnu/
COPY copilot /usr/local/bin/copilot
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY cache/ /opt/copilot-cache/
ENV XDG_CACHE_HOME=/opt/copilot-cache
RUN mkdir -p /tmp /home/agent && chmod 1777 /tmp && chown 1000:1000 /home/agent \\
    && chmod -R a+rX /opt/copilot-cache
"""


def _libraries(binaries: list[Path]) -> set[Path]:
    found: set[Path] = set()
    for binary in binaries:
        out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False)
        for match in re.finditer(r"(/\S+\.so[.\d]*)", out.stdout):
            found.add(Path(match.group(1)))
    return found


def build_copilot_image(api: Any, cli: str, tmp: Path) -> str:
    """Build (once per CLI binary) and return the image tag."""
    native = Path(resolve_cli(CopilotConfig(cli_path=cli)))
    stat = native.stat()
    digest = hashlib.sha256(f"{native}:{stat.st_size}:{stat.st_mtime}{DOCKERFILE}".encode())
    tag = f"vally-test-copilot:{digest.hexdigest()[:16]}"
    try:
        api.inspect_image(tag)
        return tag
    except Exception:
        pass
    context = tmp / "copilot-image"
    (context / "lib").mkdir(parents=True)
    (context / "lib64").mkdir()
    cache = context / "cache"
    home = tmp / "home"
    home.mkdir()
    unpack = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "XDG_CACHE_HOME": str(cache)}
    subprocess.run([str(native), "--version"], env=unpack, capture_output=True, check=True)
    shutil.copy2(BUSYBOX, context / "busybox")
    for name in ("passwd", "group"):
        shutil.copy2(FIXTURES / "busybox" / name, context / name)
    shutil.copy2(native, context / "copilot")
    shutil.copy2(CA_BUNDLE, context / "ca-certificates.crt")
    for lib in _libraries([native, *cache.rglob("runtime.node")]):
        target = context / ("lib64" if lib.parent.name == "lib64" else "lib") / lib.name
        shutil.copy2(lib.resolve(), target)
    (context / "Dockerfile").write_text(DOCKERFILE)
    for chunk in api.build(path=str(context), tag=tag, rm=True, forcerm=True, decode=True):
        if "error" in chunk:
            pytest.fail(f"building the copilot test image failed: {chunk['error']}")
    shutil.rmtree(context, ignore_errors=True)
    return tag
