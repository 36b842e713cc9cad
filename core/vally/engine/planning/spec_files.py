"""The spec's files, packed on the driver and unpacked where a trial runs elsewhere.

A trial reads files next to its eval: workspace fixtures (``files[].src``), skills,
``git.source`` repositories, grader files and scripts (relative to the eval's folder). A
distributed runner's nodes need not see the driver's file system, so the driver packs
those folders once per run into a :class:`SpecArchive` (a gzipped tar keyed by its
digest); each node unpacks it once into a cache folder that mirrors the driver's absolute
paths, and :func:`relocate` points a planned trial at the copy.

What is packed: each eval's folder (without ``.git`` and ``__pycache__`` folders), every
``files[].src``, skill folder and ``git.source`` repository outside it (whole), never the
run's own output folder. Links are packed as links, so a link that leaves the packed
folders stays outside on the node too and graders still reject it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import io
import os
import tarfile
import tempfile
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from vally.engine.planning.plan import PlannedTrial
from vally.errors import ConfigError, SetupError
from vally.models.spec import EnvironmentConfig, FileEntry

MAX_ARCHIVE_BYTES = 256 * 1024 * 1024
"""The largest packed size a run may ship (gzipped)."""

SKIPPED_DIRS = frozenset({".git", "__pycache__"})
"""Folders left out when an eval's folder is packed (``git.source`` repositories are
packed whole)."""

CACHE_DIR_NAME = "vally-spec-files"
"""The folder under the node's temp dir that holds unpacked archives by digest."""


@dataclass(frozen=True)
class SpecArchive:
    """The packed spec files of one run.

    Attributes:
        digest: The sha256 of ``data`` (names the unpacked copy on nodes).
        data: A gzipped tar of the files, member names being the driver's absolute paths
            without their leading ``/``.
    """

    digest: str
    data: bytes


class SpecFiles:
    """The folders and files a run's trials read from the driver, packed on first use.

    Args:
        trials: Trials holding every distinct setting of the plan.
        exclude: Folders never packed (the run's output folder).
        extra: More files or folders to pack (plugins given by path).
    """

    def __init__(
        self,
        trials: Iterable[PlannedTrial],
        exclude: Sequence[Path] = (),
        extra: Sequence[Path] = (),
    ) -> None:
        self.roots, self.whole = spec_roots(trials, extra)
        self.exclude = tuple(_absolute(p) for p in exclude)
        self._archive: SpecArchive | None = None
        self._lock = threading.Lock()

    def archive(self) -> SpecArchive:
        """The packed files (packed once; blocking: call it off the event loop).

        Raises:
            ConfigError: The files exceed :data:`MAX_ARCHIVE_BYTES` packed, or one cannot be
                read.
        """
        with self._lock:
            if self._archive is None:
                self._archive = self._pack()
            return self._archive

    def _pack(self) -> SpecArchive:
        buffer = io.BytesIO()
        try:
            with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=6) as tar:
                for root in self.roots:
                    self._add(tar, root, skip=() if root in self.whole else SKIPPED_DIRS)
        except OSError as exc:
            raise ConfigError(
                f"cannot pack the spec's files for the remote trials: {exc}",
                hint="check that every file the eval references is readable",
            ) from exc
        data = buffer.getvalue()
        if len(data) > MAX_ARCHIVE_BYTES:
            raise ConfigError(
                f"the spec's files are {len(data) // 2**20} MiB packed, more than the "
                f"{MAX_ARCHIVE_BYTES // 2**20} MiB a distributed run ships "
                f"(folders: {', '.join(str(r) for r in self.roots)})",
                hint="move large data out of the eval's folder (fetch it in "
                "environment.commands instead) or run with the local runner",
            )
        return SpecArchive(hashlib.sha256(data).hexdigest(), data)

    def _add(self, tar: tarfile.TarFile, root: Path, *, skip: frozenset[str] | tuple[()]) -> None:
        if not os.path.lexists(root):
            return  # a missing fixture fails on the node as it would here
        tar.add(root, arcname=_member(root), recursive=False)
        if not root.is_dir() or root.is_symlink():
            return
        for folder, dirs, files in os.walk(root):
            here = Path(folder)
            dirs[:] = sorted(d for d in dirs if d not in skip and not self._excluded(here / d))
            for name in [*dirs, *sorted(files)]:
                path = here / name
                tar.add(path, arcname=_member(path), recursive=False)

    def _excluded(self, path: Path) -> bool:
        return path in self.exclude


def spec_roots(
    trials: Iterable[PlannedTrial], extra: Sequence[Path] = ()
) -> tuple[tuple[Path, ...], frozenset[Path]]:
    """The folders and files to pack for ``trials`` and ``extra`` (none inside another) and
    which of them are packed whole (``git.source`` repositories)."""
    wanted: dict[Path, bool] = {_absolute(p): False for p in extra}
    for trial in trials:
        wanted.setdefault(_absolute(trial.spec_dir), False)
        env = trial.environment
        for src in [*(f.src for f in env.files), *env.skills]:
            wanted.setdefault(_absolute(src), False)
        if env.git is not None:
            wanted[_absolute(trial.spec_dir / env.git.source)] = True
    roots: list[Path] = []
    for path in sorted(wanted, key=lambda p: len(p.parts)):
        if not any(path == r or r in path.parents for r in roots):
            roots.append(path)
    return tuple(roots), frozenset(r for r in roots if wanted[r])


def _absolute(path: str | Path) -> Path:
    """``path`` absolute and without ``..`` parts (links are kept, not followed)."""
    return Path(os.path.normpath(Path(path).absolute()))


def _member(path: Path) -> str:
    return str(PurePosixPath(*_absolute(path).parts[1:]))


_UNPACK_LOCK = threading.Lock()


@contextlib.contextmanager
def _node_lock(base: Path) -> Iterator[None]:
    """Hold the lock of the folder ``base`` (every process of the node; no lock file)."""
    base.mkdir(parents=True, exist_ok=True)
    folder = os.open(base, os.O_RDONLY)
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        yield
    finally:
        os.close(folder)


def _inside(tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    """The archive's members, refusing one (or a link) that would point out of its folder."""
    for member in tar:
        link = PurePosixPath(member.name).parent / member.linkname if member.issym() else None
        for path in (PurePosixPath(member.name), link or PurePosixPath(member.linkname)):
            if path.is_absolute() or os.path.normpath(path).startswith(".."):
                raise tarfile.TarError(f"member {member.name!r} points out of the folder")
        yield member


def unpack(archive: SpecArchive, cache: Path | None = None) -> Path:
    """Unpack ``archive`` on this node once (later calls reuse the copy) and return the
    folder that mirrors the driver's ``/``. Threads and processes (a node's Ray workers)
    that start at once wait for the first one's copy instead of unpacking their own.

    Args:
        archive: The run's packed files.
        cache: Where copies are kept (default: ``vally-spec-files`` in the temp dir).

    Raises:
        SetupError: The archive cannot be unpacked (disk full, bad member).
    """
    base = cache or Path(tempfile.gettempdir()) / CACHE_DIR_NAME
    target = base / archive.digest
    try:
        with _UNPACK_LOCK, _node_lock(base):
            if target.is_dir():
                return target
            staging = Path(tempfile.mkdtemp(prefix=f".{archive.digest[:12]}-", dir=base))
            with tarfile.open(fileobj=io.BytesIO(archive.data), mode="r:gz") as tar:
                if hasattr(tarfile, "tar_filter"):
                    tar.extractall(staging, _inside(tar), filter="tar")
                else:  # Python before 3.11.4 has no filters: the members are checked
                    tar.extractall(staging, _inside(tar))
            staging.rename(target)
    except (OSError, tarfile.TarError) as exc:
        raise SetupError(
            f"cannot unpack the spec's files into {base}: {exc}",
            hint="check free disk space in the node's temp dir (TMPDIR)",
        ) from exc
    return target


def relocated_path(path: str | Path, root: Path) -> str:
    """``path`` (absolute on the driver) inside the unpacked copy at ``root``."""
    return str(root / _member(Path(path)))


def relocate(trial: PlannedTrial, root: Path) -> PlannedTrial:
    """``trial`` reading its eval's folder and files from the unpacked copy at ``root``
    (its record still names the driver's eval file)."""
    env = trial.environment
    git = env.git
    if git is not None:
        source = relocated_path(trial.spec_dir / git.source, root)
        git = git.model_copy(update={"source": source})
    moved: EnvironmentConfig = env.model_copy(
        update={
            "files": [FileEntry(src=relocated_path(f.src, root), dest=f.dest) for f in env.files],
            "skills": [relocated_path(s, root) for s in env.skills],
            "git": git,
        }
    )
    return dataclasses.replace(trial, environment=moved, files_root=root)
