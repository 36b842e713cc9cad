"""The docker backend keeps the image files it reads at start (``/etc/passwd``,
``/etc/group``, whether ``/bin/sh`` exists) per image id, on a real Docker engine: a later
run of the same image starts without a probe container, and a cache it cannot use costs
nothing but the probe."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vally_backends.docker.backend import DockerBackend
from vally_backends.docker.config import Config
from vally_backends.docker.errors import ImageError
from vally_backends.docker.image_files import cache_folder

try:
    from tests.backends.docker_helpers import busybox_image, docker_api, nosh_image
except ImportError:  # pragma: no cover - tests/backends is not a package
    from docker_helpers import busybox_image, docker_api, nosh_image  # type: ignore[no-redef]

__all__ = ["busybox_image", "docker_api", "nosh_image"]

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

_COUNTER = iter(range(1_000_000))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    yield cache_folder()


async def _started(image: str) -> DockerBackend:
    config = Config.model_validate({"image": image, "pull": "never", "pool": "0"})
    backend = DockerBackend(config)
    await backend.start(f"test-image-files-{os.getpid()}-{next(_COUNTER)}")
    return backend


async def test_a_second_start_of_the_same_image_reads_the_kept_files(
    busybox_image: str, docker_api: Any, cache: Path
) -> None:
    first = await _started(busybox_image)
    await first.shutdown()
    (kept,) = cache.glob("*.json")
    image_id = docker_api.inspect_image(busybox_image)["Id"]
    assert kept.name == image_id.replace(":", "-") + ".json"
    files = json.loads(kept.read_text(encoding="utf-8"))["files"]
    assert "agent:x:1000:1000" in files["/etc/passwd"]
    assert first.uid == 1000
    # The next run believes the kept files (the probe would have found uid 1000 again).
    files["/etc/passwd"] = files["/etc/passwd"].replace("1000:1000", "1234:1000")
    kept.write_text(json.dumps({"format": 1, "files": files}), encoding="utf-8")
    second = await _started(busybox_image)
    await second.shutdown()
    assert second.uid == 1234


@pytest.mark.parametrize("content", ["not json", '{"format": 99, "files": {}}', "[]", ""])
async def test_a_kept_file_it_cannot_use_is_read_again_and_replaced(
    busybox_image: str, docker_api: Any, cache: Path, content: str
) -> None:
    image_id = docker_api.inspect_image(busybox_image)["Id"]
    cache.mkdir(parents=True)
    kept = cache / (image_id.replace(":", "-") + ".json")
    kept.write_text(content, encoding="utf-8")
    backend = await _started(busybox_image)
    await backend.shutdown()
    assert backend.uid == 1000
    assert json.loads(kept.read_text(encoding="utf-8"))["format"] == 1


async def test_a_cache_folder_it_cannot_write_costs_only_the_probe(
    busybox_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # no folder can be made below a file
    backend = await _started(busybox_image)
    await backend.shutdown()
    assert backend.uid == 1000


async def test_an_image_without_a_shell_is_refused_from_the_kept_files_too(
    nosh_image: str, cache: Path
) -> None:
    for _ in range(2):  # the first start reads the image, the second the kept files
        with pytest.raises(ImageError, match="no /bin/sh"):
            await _started(nosh_image)
    assert len(list(cache.glob("*.json"))) == 1
