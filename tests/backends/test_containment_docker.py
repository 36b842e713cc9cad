"""Containment on the ``docker`` backend, attacked for real: the same shell-script agents as
``test_containment.py`` run in busybox containers of the real engine; nothing they leave
behind may run while the verifier runs, a crash by signal is recorded as one, and the
workspace cannot fill the host's disk."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.backends.containment_helpers import ATTACKS, run_vally, verifier, write_project
from tests.backends.docker_helpers import busybox_image, docker_api
from vally.contracts.protocols import TrialContext, TrialKey
from vally.models.spec import EnvironmentConfig
from vally_backends.docker.backend import DockerBackend
from vally_backends.docker.config import Config

__all__ = ["busybox_image", "docker_api"]

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _docker_args(image: str) -> list[str]:
    return ["--backend", "docker", "--backend-args", f"image={image}",
            "--backend-args", "pull=never"]  # fmt: skip


def test_no_agent_process_survives_into_grading(
    docker_api: Any, busybox_image: str, tmp_path: Path
) -> None:
    attacks = [*ATTACKS, "segv"]
    spec = write_project(tmp_path, attacks)
    proc, records = run_vally(tmp_path, spec, *_docker_args(busybox_image))
    assert set(records) == set(attacks), proc.stderr
    for name in ATTACKS:
        record = records[name]
        assert record["status"] == "success", (name, record["error"], proc.stderr)
        result = verifier(record)
        stdout = result["metadata"]["stdout"]
        assert "REAL-VERIFIER alive:[]" in stdout, (name, stdout)
        assert "FAKE" not in stdout, (name, stdout)
        assert result["passed"] is False, (name, result)
    # An agent killed by a signal is a crash, with the signal recorded.
    trajectory = records["segv"]["trajectory"]
    assert trajectory["endReason"] == "error", trajectory["endReason"]
    assert trajectory["metadata"]["extra"]["signals"] == [signal.SIGSEGV]
    errors = [e["data"]["code"] for e in trajectory["events"] if e["type"] == "error"]
    assert errors == ["killed_by_signal"]


def test_the_workspace_cannot_fill_the_host_disk(docker_api: Any, busybox_image: str) -> None:
    async def scenario() -> tuple[Any, Any, int]:
        backend = DockerBackend(Config(image=busybox_image, pull="never", disk="64m"))
        await backend.start(f"test-disk-{os.getpid()}")
        trial = TrialContext(
            key=TrialKey("default", "ev", "stim", "m", 1),
            run_id=backend.run_id,
            environment=EnvironmentConfig(),
            spec_dir=Path.cwd(),
        )
        sandbox = await backend.open(trial)
        try:
            big = await sandbox.exec(["dd", "if=/dev/zero", "of=big", "bs=1M", "count=256"])
            many = await sandbox.exec(
                ["sh", "-c", "for i in 1 2 3 4 5 6; do "
                 "dd if=/dev/zero of=part$i bs=1M count=16 || exit 1; done"],
                timeout=120,
            )  # fmt: skip
            used = await sandbox.exec(["sh", "-c", "du -sk . | cut -f1"])
        finally:
            await sandbox.close()
            await backend.shutdown()
        return big, many, int(used.stdout.strip())

    big, many, used_kb = asyncio.run(scenario())
    # One big file hits the file size limit (SIGXFSZ), many smaller ones the workspace's.
    assert big.exit_code != 0, big
    assert many.exit_code != 0, many
    assert "No space left" in many.stderr, many.stderr
    assert used_kb <= 64 * 1024 + 64, used_kb
