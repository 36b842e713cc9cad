"""``DockerSandbox.open_fresh``: a new container of the run's image holding a copy of a
trial's workspace and nothing else of the trial's container (what the ``harbor-verifier``
runs a task's tests in), on a real Docker engine; and the archive filter it copies through.
"""

from __future__ import annotations

import io
import os
import tarfile
from typing import Any

import pytest

from vally.contracts.protocols import TrialContext, TrialKey
from vally.models.spec import EnvironmentConfig
from vally_backends.docker.archive import copy_tree_archive
from vally_backends.docker.backend import DockerBackend
from vally_backends.docker.config import Config
from vally_backends.docker.sandbox import DockerSandbox

try:
    from tests.backends.docker_helpers import docker_api, rootonly_image, run_container_ids
except ImportError:  # pragma: no cover - tests/backends is not a package
    from docker_helpers import (  # type: ignore[no-redef]
        docker_api,
        rootonly_image,
        run_container_ids,
    )

__all__ = ["docker_api", "rootonly_image"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


_COUNTER = iter(range(1_000_000))


async def _backend(image: str, **args: Any) -> DockerBackend:
    config = Config.model_validate({"image": image, "pull": "never", "pool": "0", **args})
    backend = DockerBackend(config)
    await backend.start(f"test-fresh-{os.getpid()}-{next(_COUNTER)}")
    return backend


async def _open(backend: DockerBackend) -> DockerSandbox:
    from pathlib import Path

    trial = TrialContext(
        key=TrialKey("default", "ev", "stim", "m", 1),
        run_id=backend.run_id,
        environment=EnvironmentConfig(),
        spec_dir=Path.cwd(),
    )
    return await backend.open(trial)


async def _sh(sandbox: DockerSandbox, script: str) -> str:
    result = await sandbox.exec(["sh", "-c", script])
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    return result.stdout


TAMPER = """
mkdir -p sub && echo answer > sub/answer.txt && printf '#!/bin/sh\\necho ran\\n' > run.sh
chmod 755 run.sh && ln -s /etc/passwd passwd-link && ln -s /bin tools && mkfifo pipe
echo planted > /etc/planted
rm /bin/cat && printf '#!/bin/busybox sh\\necho fake\\n' > /bin/cat && chmod +x /bin/cat
setsid sleep 1000 </dev/null >/dev/null 2>&1 &
echo .
"""


@pytest.mark.anyio
@pytest.mark.docker
@pytest.mark.parametrize("disk", ["4g", "none"])  # the workspace on a volume, or not
async def test_a_fresh_sandbox_holds_the_workspace_and_nothing_else_of_the_trial(
    docker_api: Any, rootonly_image: str, disk: str
) -> None:
    backend = await _backend(rootonly_image, disk=disk)
    try:
        trial = await _open(backend)
        assert await _sh(trial, TAMPER) == ".\n"
        assert await _sh(trial, "[ -L /bin/cat ] || echo replaced") == "replaced\n"
        fresh = await trial.open_fresh()
        assert fresh.container_id != trial.container_id
        assert fresh.workdir == trial.workdir
        listing = await _sh(fresh, "ls -l run.sh; readlink passwd-link; readlink tools; ls")
        assert listing.split("\n")[0].startswith("-rwxr-xr-x"), listing
        assert listing.split("\n")[1:3] == ["/etc/passwd", "/bin"], listing
        assert set(listing.split("\n")[3:-1]) == {"passwd-link", "run.sh", "sub", "tools"}
        assert await fresh.read_file("sub/answer.txt") == b"answer\n"
        assert await _sh(fresh, "./run.sh; cat sub/answer.txt") == "ran\nanswer\n"
        # The image's own programs, none of the trial's changes, none of its processes.
        assert await _sh(fresh, "[ -e /etc/planted ] || echo absent") == "absent\n"
        assert await _sh(fresh, "readlink /bin/cat") == "/bin/busybox\n"
        assert await _sh(fresh, "ps -o args | grep -c '[s]leep 1000' || true") == "0\n"
        assert await _sh(trial, "ps -o args | grep -c '[s]leep 1000'") == "1\n"
        await fresh.close()
        assert run_container_ids(docker_api, backend.run_id) == {trial.container_id}
        # One left open goes with the run.
        await trial.open_fresh()
        assert len(run_container_ids(docker_api, backend.run_id)) == 2
    finally:
        await backend.shutdown()
    assert run_container_ids(docker_api, backend.run_id) == set()


@pytest.mark.anyio
@pytest.mark.docker
async def test_a_workspace_replaced_by_a_link_or_removed_arrives_empty(
    docker_api: Any, rootonly_image: str
) -> None:
    backend = await _backend(rootonly_image, disk="none")
    try:
        for tamper in ("cd / && rm -rf /workspace && ln -s /bin /workspace", "rm -rf /workspace"):
            trial = await _open(backend)
            await _sh(trial, tamper)
            fresh = await trial.open_fresh()
            assert await _sh(fresh, "ls -A /workspace; [ -L /workspace ] || echo folder") == (
                "folder\n"
            )
            await fresh.close()
            await trial.close()
    finally:
        await backend.shutdown()


def _entry(name: str, kind: bytes = tarfile.REGTYPE, **fields: Any) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    for key, value in fields.items():
        setattr(info, key, value)
    return info


def test_the_copied_archive_keeps_files_folders_and_links_only() -> None:
    source = io.BytesIO()
    with tarfile.open(fileobj=source, mode="w") as tar:
        tar.addfile(_entry("app", tarfile.DIRTYPE, mode=0o755))
        tar.addfile(_entry("app/ok", size=2, mode=0o4755, uid=5), io.BytesIO(b"ok"))
        tar.addfile(_entry("app/l", tarfile.SYMTYPE, linkname="/bin"))
        tar.addfile(_entry("app/l/bash", size=1), io.BytesIO(b"x"))
        tar.addfile(_entry("app/../etc/passwd", size=1), io.BytesIO(b"x"))
        tar.addfile(_entry("other/file", size=1), io.BytesIO(b"x"))
        tar.addfile(_entry("app/dev", tarfile.CHRTYPE, devmajor=1, devminor=3))
        tar.addfile(_entry("app/fifo", tarfile.FIFOTYPE))
        tar.addfile(_entry("app/same", tarfile.LNKTYPE, linkname="app/ok"))
        tar.addfile(_entry("app/outside", tarfile.LNKTYPE, linkname="etc/shadow"))
    source.seek(0)
    copied = copy_tree_archive(source, "app")
    with tarfile.open(fileobj=copied, mode="r:") as tar:
        entries = {m.name: m for m in tar.getmembers()}
        assert sorted(entries) == ["app", "app/l", "app/ok", "app/same"]
        assert entries["app/ok"].mode == 0o755 and entries["app/ok"].uid == 5
        ok = tar.extractfile(entries["app/ok"])
        assert ok is not None and ok.read() == b"ok"
        assert entries["app/l"].issym() and entries["app/l"].linkname == "/bin"
        assert entries["app/same"].islnk() and entries["app/same"].linkname == "app/ok"
    source.seek(0)
    link_root = io.BytesIO()
    with tarfile.open(fileobj=link_root, mode="w") as tar:
        tar.addfile(_entry("app", tarfile.SYMTYPE, linkname="/bin"))
    link_root.seek(0)
    with tarfile.open(fileobj=copy_tree_archive(link_root, "app"), mode="r:") as tar:
        assert tar.getmembers() == []
