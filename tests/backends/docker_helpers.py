"""Fixtures for the docker backend's tests: a reachable engine and busybox images built
``FROM scratch`` once per session (no registry is ever contacted).

When no engine answers the tests skip, unless ``VALLY_REQUIRE_DOCKER=1`` (CI): then they fail.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "docker"
BUSYBOX = Path(os.environ.get("VALLY_TEST_BUSYBOX", "/bin/busybox"))


def _require() -> bool:
    return os.environ.get("VALLY_REQUIRE_DOCKER", "") not in ("", "0")


def _unavailable(reason: str) -> None:
    if _require():
        pytest.fail(f"VALLY_REQUIRE_DOCKER=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def docker_api() -> Iterator[Any]:
    """A pinged docker ``APIClient``; skips (or fails under VALLY_REQUIRE_DOCKER=1)."""
    try:
        import docker

        client = docker.from_env()
        client.ping()
    except Exception as exc:
        _unavailable(f"no Docker engine is reachable ({type(exc).__name__}: {exc})")
    yield client.api
    client.close()


def _build(api: Any, name: str, tmp: Path) -> str:
    if not BUSYBOX.is_file():
        _unavailable(f"a static busybox is needed at {BUSYBOX} to build the test image")
    source = FIXTURES / name
    context = tmp / name
    shutil.copytree(source, context)
    shutil.copy2(BUSYBOX, context / "busybox")
    digest = hashlib.sha256()
    for path in sorted(context.iterdir()):
        digest.update(path.name.encode() + path.read_bytes())
    tag = f"vally-test-{name}:{digest.hexdigest()[:16]}"
    try:
        api.inspect_image(tag)
        return tag
    except Exception:
        pass
    for chunk in api.build(path=str(context), tag=tag, rm=True, forcerm=True, decode=True):
        if "error" in chunk:
            pytest.fail(f"building the {name} test image failed: {chunk['error']}")
    return tag


@pytest.fixture(scope="session")
def busybox_image(docker_api: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A busybox image with a user ``agent`` (uid 1000) and no network tools needed."""
    return _build(docker_api, "busybox", tmp_path_factory.mktemp("docker-ctx"))


@pytest.fixture(scope="session")
def rootonly_image(docker_api: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A busybox image whose only user is root."""
    return _build(docker_api, "rootonly", tmp_path_factory.mktemp("docker-ctx"))


@pytest.fixture(scope="session")
def nosh_image(docker_api: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    """An image with busybox at ``/busybox`` but no ``/bin/sh``."""
    return _build(docker_api, "nosh", tmp_path_factory.mktemp("docker-ctx"))


def containers_of_run(api: Any, run_id: str) -> list[dict[str, Any]]:
    """Every container (running or not) labelled with ``run_id``."""
    result: list[dict[str, Any]] = api.containers(
        all=True, filters={"label": f"vally.run-id={run_id}"}
    )
    return result


def run_container_ids(api: Any, run_id: str) -> set[str]:
    """The ids of every container labelled with ``run_id``."""
    return {item["Id"] for item in containers_of_run(api, run_id)}
