"""Tar streams between the host and a container (what ``put_archive``/``get_archive`` speak).

Everything written into a container carries the numeric owner of the sandbox's user, so an
unprivileged agent owns its workspace without the container needing ``CAP_CHOWN``.
"""

from __future__ import annotations

import copy
import io
import os
import posixpath
import shutil
import stat
import tarfile
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

SPOOL_BYTES = 16 * 1024 * 1024
"""Archives up to this size stay in memory; larger ones spill to a temporary file."""


def within(path: str, root: str) -> bool:
    """True when the normalised POSIX ``path`` is ``root`` or lies below it."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def parents_of(rel: str) -> list[str]:
    """The ancestor folders of a relative POSIX path, outermost first (``a/b/c`` gives
    ``a`` and ``a/b``)."""
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


class TarBuilder:
    """Builds a tar archive whose entries are owned by ``uid:gid``.

    Args:
        uid: Owner of every entry.
        gid: Group of every entry.
    """

    def __init__(self, uid: int, gid: int) -> None:
        self.uid = uid
        self.gid = gid
        self._buffer: IO[bytes] = tempfile.SpooledTemporaryFile(  # noqa: SIM115 - returned
            max_size=SPOOL_BYTES
        )
        self._tar = tarfile.open(  # noqa: SIM115 - closed in finish()
            fileobj=self._buffer, mode="w", format=tarfile.PAX_FORMAT
        )
        self._dirs: set[str] = set()
        self._now = time.time()

    def _info(self, name: str) -> tarfile.TarInfo:
        info = tarfile.TarInfo(name)
        info.uid, info.gid = self.uid, self.gid
        info.uname = info.gname = ""
        info.mtime = self._now
        return info

    def add_dir(self, name: str, mode: int = 0o755) -> None:
        """Add a folder entry (once)."""
        if name in self._dirs or name in ("", "."):
            return
        self._dirs.add(name)
        info = self._info(name)
        info.type = tarfile.DIRTYPE
        info.mode = mode
        self._tar.addfile(info)

    def add_parents(self, name: str) -> None:
        """Add folder entries for every ancestor of ``name`` so none is created root-owned."""
        for parent in parents_of(name):
            self.add_dir(parent)

    def add_bytes(self, name: str, data: bytes, mode: int = 0o644) -> None:
        """Add a regular file with ``data``."""
        info = self._info(name)
        info.size = len(data)
        info.mode = mode
        self._tar.addfile(info, io.BytesIO(data))

    def add_host_path(self, source: Path, name: str) -> None:
        """Add a host file or folder (recursively) as ``name``; links are kept as links.

        ``name`` may be ``.`` for a folder, meaning its contents go to the archive root.
        """

        def _owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
            info.uid, info.gid = self.uid, self.gid
            info.uname = info.gname = ""
            info.mode &= 0o777
            return info

        if source.is_dir() and not source.is_symlink():
            if name not in ("", "."):
                self.add_dir(name, stat.S_IMODE(source.stat().st_mode) | 0o700)
            for child in sorted(source.iterdir()):
                child_name = child.name if name in ("", ".") else f"{name}/{child.name}"
                self._tar.add(str(child), arcname=child_name, recursive=True, filter=_owned)
        else:
            self._tar.add(str(source), arcname=name, recursive=False, filter=_owned)

    def finish(self) -> IO[bytes]:
        """Close the archive and return it rewound, ready to send."""
        self._tar.close()
        self._buffer.seek(0)
        return self._buffer


def spool(chunks: Iterable[bytes]) -> IO[bytes]:
    """Collect a streamed archive into a rewound (possibly on-disk) temporary file."""
    buffer: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115
    for chunk in chunks:
        buffer.write(chunk)
    buffer.seek(0)
    return buffer


def members(archive: IO[bytes]) -> Iterator[tuple[tarfile.TarFile, tarfile.TarInfo]]:
    """Iterate the entries of an archive together with the open tar file."""
    with tarfile.open(fileobj=archive, mode="r:") as tar:
        for member in tar:
            yield tar, member


def link_target(container_path: str, linkname: str) -> str:
    """Where a symbolic link at ``container_path`` points, as a normalised absolute path."""
    if linkname.startswith("/"):
        return posixpath.normpath(linkname)
    return posixpath.normpath(posixpath.join(posixpath.dirname(container_path), linkname))


def extract_confined(
    archive: IO[bytes],
    *,
    archive_parent: str,
    root_name: str,
    host_dest: Path,
    confine: str,
) -> list[str]:
    """Extract an archive from ``get_archive`` to ``host_dest`` without following links.

    ``root_name`` is the archive's top entry (the copied file or folder) and becomes
    ``host_dest``. Symbolic links are recreated (as relative links) only when they point
    inside the copied tree and inside ``confine``; others are skipped. Devices, fifos and
    set-uid bits are dropped.

    Returns:
        The container paths of the links that were skipped.
    """
    copied_root = posixpath.join(archive_parent, root_name)
    dest_root = host_dest.absolute()
    skipped: list[str] = []
    for tar, member in members(archive):
        name = posixpath.normpath(member.name)
        if name == root_name:
            rest = ""
        elif name.startswith(root_name + "/"):
            rest = name[len(root_name) + 1 :]
        else:
            continue
        if rest.startswith("../") or rest.startswith("/"):
            continue
        target = dest_root / rest if rest else dest_root
        if not _safe_parent(target, dest_root):
            skipped.append(posixpath.join(archive_parent, name))
            continue
        container_path = posixpath.join(archive_parent, name)
        if member.isdir():
            target.mkdir(parents=True, exist_ok=True)
            os.chmod(target, (member.mode & 0o777) | 0o700)
        elif member.isfile():
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink() or (target.exists() and not target.is_file()):
                _remove(target)
            source = tar.extractfile(member)
            assert source is not None
            with open(target, "wb") as out:
                while chunk := source.read(1 << 20):
                    out.write(chunk)
            os.chmod(target, member.mode & 0o777)
        elif member.issym():
            points_to = link_target(container_path, member.linkname)
            if not (within(points_to, confine) and within(points_to, copied_root)):
                skipped.append(container_path)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink() or target.exists():
                _remove(target)
            os.symlink(posixpath.relpath(points_to, posixpath.dirname(container_path)), target)
        elif member.islnk():
            linked = posixpath.normpath(member.linkname)
            if not linked.startswith(root_name + "/"):
                skipped.append(container_path)
                continue
            original = dest_root / linked[len(root_name) + 1 :]
            if original.is_file() and not original.is_symlink():
                target.parent.mkdir(parents=True, exist_ok=True)
                if target.exists() or target.is_symlink():
                    _remove(target)
                os.link(original, target)
    return skipped


def _safe_parent(target: Path, root: Path) -> bool:
    """True when the folder ``target`` would be written in stays inside ``root`` on disk."""
    parent = target.parent if target != root else root.parent
    real_parent = Path(os.path.realpath(parent))
    real_root = Path(os.path.realpath(root))
    return target == root or real_parent == real_root or real_parent.is_relative_to(real_root)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def copy_tree_archive(archive: IO[bytes], root_name: str) -> IO[bytes]:
    """Re-pack a ``get_archive`` stream of one folder for ``put_archive`` into another
    container, keeping only what a folder of files can hold.

    Kept: the folder ``root_name`` itself, and below it folders, regular files, symbolic
    links (as they are: a link is resolved in the container it lands in, never here) and
    hard links to files kept before them, with their numeric owners and permission bits
    (set-uid and set-gid bits cleared). Dropped: devices, fifos, entries outside
    ``root_name`` or whose path passes through a link, and everything when ``root_name``
    is not a folder (a link put in the folder's place).

    Returns:
        The new archive, rewound.
    """
    buffer: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115
    links: set[str] = set()
    kept: set[str] = set()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as out:
        for tar, member in members(archive):
            name = posixpath.normpath(member.name)
            if name == root_name:
                if not member.isdir():
                    break
            elif not name.startswith(root_name + "/") or "/../" in f"/{name}/":
                continue
            if any(parent in links for parent in parents_of(name)):
                continue
            entry = copy.copy(member)
            entry.name = name
            entry.mode = member.mode & 0o1777
            if member.isdir() or member.issym():
                out.addfile(entry)
                if member.issym():
                    links.add(name)
            elif member.isfile():
                out.addfile(entry, tar.extractfile(member))
            elif member.islnk() and posixpath.normpath(member.linkname) in kept:
                entry.linkname = posixpath.normpath(member.linkname)
                out.addfile(entry)
            else:
                continue
            if member.isfile():
                kept.add(name)
    buffer.seek(0)
    return buffer
