"""How the docker backend bounds what a trial writes (its ``disk`` argument), and what it
tells the run when the engine cannot bound everything.

Where the engine's storage driver takes a per-container quota (``--storage-opt size``:
overlay2 on xfs mounted with ``pquota``, devicemapper, btrfs, zfs), the quota bounds the
container's whole writable layer. Elsewhere (overlay2 on ext4, the usual case) the
workspace and the usual scratch folders (:data:`SCRATCH_PATHS`) are size-limited tmpfs
mounts; the rest of the root file system is bounded only per file (``RLIMIT_FSIZE``),
unless ``read_only`` makes it read-only. That gap is a warning in the run's output and in
every trial's record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

SCRATCH_PATHS = ("/tmp", "/var/tmp")
"""Folders every program may write to that become size-limited tmpfs mounts when no
storage quota bounds the container."""

READ_ONLY_SCRATCH_BYTES = 256 * 1024 * 1024
"""Size of each scratch tmpfs of a read-only container with ``disk=none``."""


@dataclass(frozen=True)
class StorageFacts:
    """The engine's storage driver, as ``docker info`` reports it.

    Attributes:
        driver: The storage driver (``overlay2``, ``btrfs``, ...); ``""`` when unknown.
        backing: The file system under it (``xfs``, ``extfs``, ...), when reported.
    """

    driver: str
    backing: str | None


def storage_facts(info: Mapping[str, Any]) -> StorageFacts:
    """The storage driver and its backing file system from the engine's ``info``."""
    status = info.get("DriverStatus") or []
    backing = next(
        (
            str(pair[1])
            for pair in status
            if isinstance(pair, list | tuple) and len(pair) == 2 and pair[0] == "Backing Filesystem"
        ),
        None,
    )
    return StorageFacts(driver=str(info.get("Driver") or ""), backing=backing)


QUOTA_DRIVERS = ("overlay2", "devicemapper", "btrfs", "zfs", "windowsfilter")
"""Storage drivers that can take ``--storage-opt size`` (overlay2 only on xfs)."""


def quota_possible(facts: StorageFacts) -> bool:
    """False when the storage driver is known to take no per-container quota (a driver not
    in :data:`QUOTA_DRIVERS`, or overlay2 on anything but xfs); True when it may, and only
    trying one tells (xfs must also be mounted with ``pquota``). An unknown driver may."""
    if not facts.driver:
        return True
    if facts.driver not in QUOTA_DRIVERS:
        return False
    return facts.driver != "overlay2" or facts.backing in (None, "xfs")


Enforcement = Literal["storage-quota", "tmpfs", "none"]


@dataclass(frozen=True)
class DiskPlan:
    """What ``disk`` bounds in every container of a run.

    Attributes:
        limit: The ``disk`` argument (None: no limit).
        enforcement: ``storage-quota`` (the engine bounds the whole writable layer),
            ``tmpfs`` (size-limited mounts) or ``none``.
        covers: The container paths whose writes the limit bounds (``/``: all of them): a
            quota bounds them together; each tmpfs mount is bounded on its own, and all
            of them together by ``memory`` too (their pages are the container's memory).
        scratch: The scratch folders mounted as tmpfs (with ``scratch_bytes`` each).
        scratch_bytes: The size of each scratch tmpfs.
        facts: The engine's storage driver.
    """

    limit: str | None
    enforcement: Enforcement
    covers: tuple[str, ...]
    scratch: tuple[str, ...]
    scratch_bytes: int
    facts: StorageFacts

    def warning(self) -> str | None:
        """What the run output and records say when the limit leaves writes unbounded."""
        if self.enforcement != "tmpfs" or "/" in self.covers:
            return None
        backing = f" on {self.facts.backing}" if self.facts.backing else ""
        return (
            f"disk={self.limit} bounds only {', '.join(self.covers)}: the engine's storage "
            f"driver ({self.facts.driver or 'unknown'}{backing}) takes no per-container "
            "quota, so files written elsewhere in the container are bounded only one by one "
            f"(none may pass {self.limit}); set read_only=true to make the rest read-only, or "
            "use an engine whose storage driver takes --storage-opt size (overlay2 on xfs "
            "with pquota, btrfs, zfs)"
        )

    def tmpfs(self) -> dict[str, str] | None:
        """The ``tmpfs`` mounts of the container's host config (None: none)."""
        if not self.scratch:
            return None
        options = f"rw,exec,nosuid,nodev,mode=1777,size={self.scratch_bytes}"
        return dict.fromkeys(self.scratch, options)

    def metadata(self) -> dict[str, Any]:
        """The plan as recorded with every trial (``trajectory.metadata.extra.sandbox``)."""
        return {
            "limit": self.limit,
            "enforcement": self.enforcement,
            "covers": list(self.covers),
            "storageDriver": self.facts.driver,
            "backingFilesystem": self.facts.backing,
        }


def disk_plan(
    limit: str | None,
    limit_bytes: int | None,
    *,
    quota: bool,
    read_only: bool,
    workdir: str,
    facts: StorageFacts,
) -> DiskPlan:
    """What ``limit`` will bound, given whether the engine took a storage quota."""
    if limit is None or limit_bytes is None:
        scratch = SCRATCH_PATHS if read_only else ()
        return DiskPlan(None, "none", (), scratch, READ_ONLY_SCRATCH_BYTES, facts)
    if quota:
        return DiskPlan(limit, "storage-quota", ("/",), (), 0, facts)
    covers = ("/",) if read_only else (workdir, *SCRATCH_PATHS)
    return DiskPlan(limit, "tmpfs", covers, SCRATCH_PATHS, limit_bytes, facts)
