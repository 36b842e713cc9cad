"""The docker backend's ``disk`` limit beyond the workspace, on this machine's real engine:
many files each under the limit cannot add up past it in ``/tmp`` or ``/var/tmp``; what the
limit cannot bound on this engine is a warning in the run's output and in every trial's
record; ``read_only=true`` closes the gap. Limits are a few MiB, writes just past them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.export.helpers import vally
from vally.contracts.protocols import TrialContext, TrialKey
from vally.models.spec import EnvironmentConfig
from vally_backends.docker.backend import DockerBackend
from vally_backends.docker.config import Config
from vally_backends.docker.disk import StorageFacts, disk_plan, quota_possible, storage_facts
from vally_backends.docker.sandbox import DockerSandbox

try:
    from tests.backends.docker_helpers import docker_api, rootonly_image
except ImportError:  # pragma: no cover - tests/backends is not a package
    from docker_helpers import docker_api, rootonly_image  # type: ignore[no-redef]

__all__ = ["docker_api", "rootonly_image"]

_COUNTER = iter(range(1_000_000))

# Three files of 4 MiB: each is under disk=8m (the per-file limit lets it through), together
# they are past it.
THREE_FILES = (
    "mkdir -p {folder} && cd {folder} && for i in 1 2 3; do "
    "dd if=/dev/zero of=part$i bs=1M count=4 2>/dev/null || {{ echo full at $i; exit 0; }}; "
    "done; echo all written"
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _open(image: str, **args: Any) -> tuple[DockerBackend, DockerSandbox]:
    config = Config.model_validate({"image": image, "pull": "never", "pool": "0", **args})
    backend = DockerBackend(config)
    await backend.start(f"test-disk-{os.getpid()}-{next(_COUNTER)}")
    trial = TrialContext(
        key=TrialKey("default", "ev", "stim", "m", 1),
        run_id=backend.run_id,
        environment=EnvironmentConfig(),
        spec_dir=Path.cwd(),
    )
    return backend, await backend.open(trial)


async def _sh(sandbox: DockerSandbox, script: str) -> str:
    result = await sandbox.exec(["sh", "-c", script], timeout=120)
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    return result.stdout


@pytest.mark.anyio
@pytest.mark.docker
async def test_files_under_the_limit_cannot_add_up_past_it_outside_the_workspace(
    docker_api: Any, rootonly_image: str
) -> None:
    info = docker_api.info()
    backend, sandbox = await _open(rootonly_image, disk="8m")
    try:
        for folder in ("/workspace", "/tmp", "/var/tmp"):
            assert await _sh(sandbox, THREE_FILES.format(folder=folder)) != "all written\n"
        # A program run from /tmp still runs.
        assert await _sh(sandbox, "rm /tmp/part*; printf '#!/bin/sh\\necho ran\\n' > /tmp/x.sh; "
                         "chmod +x /tmp/x.sh; /tmp/x.sh") == "ran\n"  # fmt: skip
        disk = sandbox.metadata["disk"]
        assert disk["limit"] == "8m"
        assert disk["storageDriver"] == info["Driver"]
        elsewhere = await _sh(sandbox, THREE_FILES.format(folder="/srv/data"))
        if backend.storage_quota:  # the engine bounds the whole writable layer
            assert disk["enforcement"] == "storage-quota" and disk["covers"] == ["/"]
            assert elsewhere != "all written\n"
            assert not [w for w in backend.warnings if "disk=" in w]
        else:  # only the mounts are bounded, and the run is told so
            assert disk["enforcement"] == "tmpfs"
            assert disk["covers"] == ["/workspace", "/tmp", "/var/tmp"]
            assert elsewhere == "all written\n"
            [warning] = [w for w in backend.warnings if "disk=" in w]
            assert "bounds only /workspace, /tmp, /var/tmp" in warning
            assert info["Driver"] in warning and "read_only=true" in warning
            assert warning in sandbox.metadata["warnings"]
    finally:
        await sandbox.close()
        await backend.shutdown()


@pytest.mark.anyio
@pytest.mark.docker
async def test_a_read_only_root_leaves_nothing_unbounded(
    docker_api: Any, rootonly_image: str
) -> None:
    backend, sandbox = await _open(rootonly_image, disk="8m", read_only="true")
    try:
        for folder in ("/workspace", "/tmp", "/var/tmp"):
            assert await _sh(sandbox, THREE_FILES.format(folder=folder)) != "all written\n"
        denied = await sandbox.exec(["sh", "-c", "mkdir -p /srv/data"])
        assert denied.exit_code != 0 and "Read-only" in denied.stderr, denied
        assert sandbox.metadata["disk"]["covers"] == ["/"]
        assert not [w for w in backend.warnings if "disk=" in w]
    finally:
        await sandbox.close()
        await backend.shutdown()


@pytest.mark.docker
def test_the_run_output_and_every_record_say_what_the_limit_covers(
    tmp_path: Path, docker_api: Any, rootonly_image: str
) -> None:
    (tmp_path / "eval.yaml").write_text(
        "name: disk\n"
        'defaults:\n  executor: {name: command, config: {command: [sh, -c, "{prompt}"]}}\n'
        "stimuli:\n  - name: writes\n    prompt: echo hi > a.txt\n"
        "    graders: [{type: file-exists, config: {path: a.txt}}]\n",
        encoding="utf-8",
    )
    done = vally(
        "eval", "-e", "eval.yaml", "--output-dir", "out", "--backend", "docker",
        "--backend-args", f"image={rootonly_image}", "--backend-args", "pull=never",
        "--backend-args", "disk=8m", cwd=tmp_path,
    )  # fmt: skip
    assert done.code == 0, done.stderr
    [results] = (tmp_path / "out").rglob("results.jsonl")
    [record] = [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines()]
    facts = record["trajectory"]["metadata"]["extra"]["sandbox"]
    assert facts["backend"] == "docker" and facts["disk"]["limit"] == "8m", facts
    assert facts["disk"]["storageDriver"] == docker_api.info()["Driver"]
    warned = [w for w in facts["warnings"] if "disk=8m" in w]
    if facts["disk"]["enforcement"] == "tmpfs":
        assert warned and warned[0] in done.stderr, (facts, done.stderr)
    else:
        assert warned == []


@pytest.mark.parametrize(
    ("info", "facts"),
    [
        (
            {"Driver": "overlay2", "DriverStatus": [["Backing Filesystem", "xfs"], ["x", "y"]]},
            StorageFacts("overlay2", "xfs"),
        ),
        ({"Driver": "btrfs", "DriverStatus": None}, StorageFacts("btrfs", None)),
        ({}, StorageFacts("", None)),
    ],
)
def test_the_storage_driver_is_read_from_the_engine_info(
    info: dict[str, Any], facts: StorageFacts
) -> None:
    assert storage_facts(info) == facts


def test_what_the_limit_covers_follows_the_quota_and_the_read_only_root() -> None:
    facts = StorageFacts("overlay2", "extfs")

    def plan(limit: str | None, *, quota: bool, read_only: bool) -> Any:
        size = None if limit is None else 8 * 1024**2
        return disk_plan(limit, size, quota=quota, read_only=read_only, workdir="/app", facts=facts)

    quota = plan("8m", quota=True, read_only=False)
    assert (quota.enforcement, quota.covers, quota.tmpfs(), quota.warning()) == (
        "storage-quota", ("/",), None, None,
    )  # fmt: skip
    mounts = plan("8m", quota=False, read_only=False)
    assert mounts.covers == ("/app", "/tmp", "/var/tmp")
    assert mounts.tmpfs() == dict.fromkeys(
        ("/tmp", "/var/tmp"), f"rw,exec,nosuid,nodev,mode=1777,size={8 * 1024**2}"
    )
    warning = mounts.warning()
    assert warning is not None and "overlay2 on extfs" in warning
    sealed = plan("8m", quota=False, read_only=True)
    assert sealed.covers == ("/",) and sealed.warning() is None
    unlimited = plan(None, quota=False, read_only=True)
    assert unlimited.enforcement == "none" and unlimited.warning() is None
    assert (
        unlimited.tmpfs() is not None and plan(None, quota=False, read_only=False).tmpfs() is None
    )


@pytest.mark.parametrize(
    ("driver", "backing", "possible"),
    [
        ("overlay2", "extfs", False),
        ("overlay2", "xfs", True),
        ("vfs", "extfs", False),
        ("btrfs", "btrfs", True),
        ("zfs", None, True),
        ("", None, True),
    ],
)
def test_a_quota_is_tried_only_where_the_storage_driver_may_take_one(
    driver: str, backing: str | None, possible: bool
) -> None:
    assert quota_possible(StorageFacts(driver, backing)) is possible
