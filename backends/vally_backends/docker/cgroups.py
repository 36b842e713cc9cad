"""A container's processes, counted from the host's cgroup file system.

Asking the engine which processes a container runs (``docker top``) makes it ask the runtime
for the pids of the container's cgroup and then run ``ps`` on the host to describe them:
several milliseconds of engine time, paid by every trial before its graders run (see
:meth:`vally_backends.docker.sandbox.DockerSandbox.stop_processes`). When vally runs on the
engine's host, the same pids are in the container's ``cgroup.procs`` files, which the kernel
lets any user read.

:class:`CgroupLocator` finds those files without guessing the engine's layout (cgroup v1 or
v2, the ``cgroupfs`` or ``systemd`` driver, a cgroup parent, a cgroup namespace): it reads the
cgroup of the first container's main process from ``/proc``, finds the folder its mounts
show it at, and from then on expects every container of the engine in the folder of the
same name with the other container's id. Whatever it cannot read (an engine on another host
or in another pid namespace, a hidden ``/proc``, a container already gone) makes it answer
``None``, and the caller asks the engine instead.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

PREFERRED_CONTROLLERS = ("pids", "memory", "cpu", "devices", "freezer")
"""cgroup v1 hierarchies looked at first, in this order: each holds every process of a
container. The unified (v2) hierarchy comes before all of them when the host runs v2 only."""


@dataclass(frozen=True)
class CgroupMount:
    """One mounted cgroup hierarchy, from ``/proc/self/mountinfo``.

    Attributes:
        root: The cgroup the mount shows at its mount point (``/`` unless it is a bind
            mount of a sub-tree, as inside a container).
        point: Where it is mounted.
        version: 2 for the unified hierarchy, 1 otherwise.
        controllers: What a v1 hierarchy carries (``pids``, ``name=systemd``…); empty for v2.
    """

    root: str
    point: str
    version: int
    controllers: frozenset[str]


def _unescape(field: str) -> str:
    """A path of ``mountinfo``, whose spaces, tabs, newlines and backslashes are octal
    escapes (``\\040``)."""
    if "\\" not in field:
        return field
    out: list[str] = []
    index = 0
    while index < len(field):
        code = field[index + 1 : index + 4]
        if field[index] == "\\" and len(code) == 3 and code.isdigit():
            out.append(chr(int(code, 8)))
            index += 4
        else:
            out.append(field[index])
            index += 1
    return "".join(out)


def parse_mounts(mountinfo: str) -> list[CgroupMount]:
    """The cgroup hierarchies mounted in a ``/proc/<pid>/mountinfo`` text, in its order."""
    mounts: list[CgroupMount] = []
    for line in mountinfo.splitlines():
        fields = line.split(" ")
        if "-" not in fields[6:]:
            continue
        dash = fields.index("-", 6)
        if len(fields) < dash + 4:
            continue
        fstype, options = fields[dash + 1], fields[dash + 3]
        if fstype == "cgroup2":
            version, controllers = 2, frozenset[str]()
        elif fstype == "cgroup":
            version = 1
            controllers = frozenset(options.split(",")) - {"rw", "ro"}
        else:
            continue
        mounts.append(CgroupMount(_unescape(fields[3]), _unescape(fields[4]), version, controllers))
    return mounts


def cgroup_folders(proc_cgroup: str, mounts: Sequence[CgroupMount]) -> list[str]:
    """Where a process's cgroups are on this host's file system, the preferred first.

    ``proc_cgroup`` is the text of the process's ``/proc/<pid>/cgroup``: a line
    ``hierarchy:controllers:path`` per hierarchy (``0::path`` for the unified one). A path is
    found under every mount of its hierarchy whose root contains it. The unified hierarchy
    comes first when it is the only one; otherwise the v1 hierarchies of
    :data:`PREFERRED_CONTROLLERS`, then the others, then the unified one (which a hybrid host
    mounts but its engine may not use)."""
    ranked: list[tuple[int, str]] = []
    lines = [line.split(":", 2) for line in proc_cgroup.splitlines() if line.count(":") >= 2]
    v2_only = all(parts[0] == "0" for parts in lines)
    for hierarchy, names, path in lines:
        for mount in mounts:
            if hierarchy == "0" and not names:
                if mount.version != 2:
                    continue
                rank = 0 if v2_only else len(PREFERRED_CONTROLLERS) + 2
            else:
                wanted = frozenset(names.split(","))
                if mount.version != 1 or not wanted or not wanted <= mount.controllers:
                    continue
                rank = next(
                    (i + 1 for i, name in enumerate(PREFERRED_CONTROLLERS) if name in wanted),
                    len(PREFERRED_CONTROLLERS) + 1,
                )
            root = mount.root.rstrip("/")
            if path != root and not path.startswith(root + "/"):
                continue
            ranked.append((rank, mount.point.rstrip("/") + path[len(root) :]))
    ranked.sort(key=lambda pair: pair[0])
    return [folder for _, folder in ranked]


def listed_pids(folder: str) -> list[str]:
    """The pids in one cgroup folder's ``cgroup.procs`` (not those of the cgroups below it).
    Raises :class:`OSError` when it cannot be read."""
    with open(os.path.join(folder, "cgroup.procs"), encoding="ascii") as listing:
        return listing.read().split()


def count_processes(folder: str) -> int:
    """How many distinct processes a cgroup folder and the cgroups below it hold (v1 may
    list a process twice). Raises :class:`OSError` when the folder cannot be read."""
    pids: set[str] = set()
    pending = [folder]
    while pending:
        current = pending.pop()
        pids.update(listed_pids(current))
        with os.scandir(current) as entries:
            pending.extend(entry.path for entry in entries if entry.is_dir(follow_symlinks=False))
    return len(pids)


class CgroupLocator:
    """Finds containers' cgroup folders on this host, learning the layout from the first.

    One locator serves one engine (a backend): all its containers share a layout, so the
    folder of one container, with its id replaced, is the folder of any other. The layout is
    learned once, from the main process of the first container asked about; when it cannot
    be learned (the engine is elsewhere), it is not tried again and every answer is ``None``.

    Args:
        proc: Where the process file system is mounted (a test may point elsewhere).
    """

    def __init__(self, proc: str = "/proc") -> None:
        self._proc = proc
        self._lock = threading.Lock()
        self._layout: tuple[str, str] | None = None
        self._unusable = False

    @property
    def layout(self) -> tuple[str, str] | None:
        """What comes before and after a container's id in its cgroup folder, once learned."""
        return self._layout

    def processes(self, container: str, main_pid: Callable[[], int]) -> int | None:
        """How many processes the container runs, from its cgroup's files; ``None`` when
        they cannot be read here (the caller then asks the engine).

        ``main_pid`` gives the host pid of the container's main process (the engine's
        ``State.Pid``); it is called only while the layout is not known yet."""
        layout = self._layout or self._learn(container, main_pid)
        if layout is None:
            return None
        try:
            return count_processes(layout[0] + container + layout[1])
        except OSError:
            return None

    def _learn(self, container: str, main_pid: Callable[[], int]) -> tuple[str, str] | None:
        with self._lock:
            if self._layout is not None or self._unusable:
                return self._layout
            try:
                pid = main_pid()
            except Exception:
                return None  # the engine could not say; the host may still be usable
            if pid <= 0:
                return None  # the container is not running
            self._layout = self._layout_of(container, pid)
            self._unusable = self._layout is None
            return self._layout

    def _layout_of(self, container: str, pid: int) -> tuple[str, str] | None:
        """The folder layout from one container's main process, checked: the process's cgroup
        must name the container (a pid of another pid namespace names something else) and
        its ``cgroup.procs`` must list the process."""
        try:
            with open(f"{self._proc}/{pid}/cgroup", encoding="utf-8") as text:
                proc_cgroup = text.read()
            with open(f"{self._proc}/self/mountinfo", encoding="utf-8") as text:
                mounts = parse_mounts(text.read())
        except OSError:
            return None
        for folder in cgroup_folders(proc_cgroup, mounts):
            if folder.count(container) != 1:
                continue
            try:
                if str(pid) not in listed_pids(folder):
                    continue
            except OSError:
                continue
            before, after = folder.split(container)
            return before, after
        return None
