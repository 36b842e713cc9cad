"""The few files of an image that the backend reads at start, kept per image id.

Deciding the sandbox user needs the image's ``/etc/passwd`` and ``/etc/group`` and whether it
has ``/bin/sh``. Reading them takes a created container, one archive request per file and a
removal: 140 to 320 ms of engine work at every run's start on a busy machine, for an answer
that never changes, since an image id names its content. So the answer is kept in the
user's cache folder, one small JSON file per image id, and a later run of the same image
reads that file instead. A cache file that cannot be read, or holds something else, is
ignored and written anew; one that cannot be written costs only the time it would save.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger("vally.backends.docker")

FORMAT = 1
"""Version of a cache file's content; a file of another version is read again from the
image."""


def cache_folder() -> Path:
    """Where the files are kept: ``$XDG_CACHE_HOME/vally/docker/image-files``, else
    ``~/.cache/vally/docker/image-files``."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "vally" / "docker" / "image-files"


def _cache_file(image_id: str) -> Path:
    return cache_folder() / f"{image_id.replace(':', '-')}.json"


def _read(path: Path, paths: list[str]) -> dict[str, str | None] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None
    files = data.get("files")
    if not isinstance(files, dict) or set(files) != set(paths):
        return None
    if not all(value is None or isinstance(value, str) for value in files.values()):
        return None
    return files


def _write(path: Path, files: dict[str, str | None]) -> None:
    text = json.dumps({"format": FORMAT, "files": files}, sort_keys=True)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, path)
    except OSError as exc:
        logger.debug("docker backend: cannot keep the image's files in %s (%s)", path, exc)


def image_files(
    image_id: str, paths: list[str], read: Callable[[list[str]], dict[str, str | None]]
) -> dict[str, str | None]:
    """``paths`` of the image ``image_id`` (per path its text, "" for a link or other
    non-regular entry, None when absent): from the cache when it holds them, else from
    ``read`` (which asks the engine), then kept for the next run."""
    path = _cache_file(image_id)
    cached = _read(path, paths)
    if cached is not None:
        return cached
    files = read(paths)
    _write(path, files)
    return files
