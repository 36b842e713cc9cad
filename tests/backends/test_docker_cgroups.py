"""Counting a container's processes from the host's cgroup files
(:mod:`vally_backends.docker.cgroups`): the mount table and a process's cgroup lines read
for each layout an engine may use, and the count checked against the engine's own on a real
container."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from vally_backends.docker.cgroups import (
    CgroupLocator,
    cgroup_folders,
    count_processes,
    parse_mounts,
)

try:
    from tests.backends.docker_helpers import busybox_image, docker_api
except ImportError:  # pragma: no cover - tests/backends is not a package
    from docker_helpers import busybox_image, docker_api  # type: ignore[no-redef]

__all__ = ["busybox_image", "docker_api"]

ID = "f6087ccfb9baea6b9bf33f0e3765fcf4144dc89e09950c216890eadeb2721965"

V1_MOUNTS = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""

V1_PROCESS = f"""\
9:name=systemd:/docker/{ID}
8:pids:/docker/{ID}
4:memory:/docker/{ID}
1:cpu,cpuacct:/docker/{ID}
0::/docker/{ID}
"""

V2_MOUNTS = (
    "26 1 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n"
)


def test_a_v1_host_prefers_the_pids_hierarchy_and_puts_the_unified_one_last() -> None:
    mounts = parse_mounts(V1_MOUNTS)
    assert [m.point for m in mounts] == [
        "/sys/fs/cgroup/cpu,cpuacct",
        "/sys/fs/cgroup/memory",
        "/sys/fs/cgroup/pids",
        "/sys/fs/cgroup/systemd",
        "/sys/fs/cgroup/unified",
    ]
    assert mounts[0].controllers == {"cpu", "cpuacct"}
    assert mounts[-1].version == 2
    assert cgroup_folders(V1_PROCESS, mounts) == [
        f"/sys/fs/cgroup/pids/docker/{ID}",
        f"/sys/fs/cgroup/memory/docker/{ID}",
        f"/sys/fs/cgroup/cpu,cpuacct/docker/{ID}",
        f"/sys/fs/cgroup/systemd/docker/{ID}",
        f"/sys/fs/cgroup/unified/docker/{ID}",
    ]


def test_a_v2_host_with_the_systemd_driver() -> None:
    process = f"0::/system.slice/docker-{ID}.scope\n"
    assert cgroup_folders(process, parse_mounts(V2_MOUNTS)) == [
        f"/sys/fs/cgroup/system.slice/docker-{ID}.scope"
    ]


def test_a_mount_of_a_sub_tree_shows_only_the_cgroups_below_its_root() -> None:
    # As inside a container given its own cgroup: the mount's root is that cgroup.
    mounts = parse_mounts(
        "50 40 0:23 /outer /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n"
        "51 40 0:23 /other\\040tree /mnt/with\\040space rw - cgroup2 cgroup2 rw\n"
    )
    assert [m.point for m in mounts] == ["/sys/fs/cgroup", "/mnt/with space"]
    assert cgroup_folders(f"0::/outer/docker/{ID}\n", mounts) == [f"/sys/fs/cgroup/docker/{ID}"]
    assert cgroup_folders(f"0::/other tree/{ID}\n", mounts) == [f"/mnt/with space/{ID}"]
    assert cgroup_folders(f"0::/outerly/{ID}\n", mounts) == []  # a prefix, not a parent


def test_lines_and_mounts_that_are_not_cgroups_are_left_out() -> None:
    assert parse_mounts("garbage\n22 1 8:1 / / rw - ext4 /dev/vda rw\n") == []
    assert cgroup_folders("not a cgroup line\n", parse_mounts(V1_MOUNTS)) == []


def test_a_count_covers_the_cgroups_below_and_each_process_once(tmp_path: Path) -> None:
    (tmp_path / "cgroup.procs").write_text("10\n11\n10\n")  # v1 may repeat a process
    (tmp_path / "child").mkdir()
    (tmp_path / "child" / "cgroup.procs").write_text("12\n")
    (tmp_path / "child" / "empty").mkdir()
    (tmp_path / "child" / "empty" / "cgroup.procs").write_text("")
    assert count_processes(str(tmp_path)) == 3
    (tmp_path / "child" / "cgroup.procs").unlink()
    with pytest.raises(OSError):
        count_processes(str(tmp_path))


def _fake_host(tmp_path: Path, pid: int, cgroup: str) -> tuple[Path, Path]:
    """A ``/proc`` showing one process in ``cgroup``, and the v2 mount it is under."""
    proc, mount = tmp_path / "proc", tmp_path / "cgroup"
    (proc / str(pid)).mkdir(parents=True)
    (proc / "self").mkdir()
    (proc / str(pid) / "cgroup").write_text(f"0::{cgroup}\n")
    (proc / "self" / "mountinfo").write_text(f"26 1 0:23 / {mount} rw - cgroup2 cgroup2 rw\n")
    return proc, mount


def test_the_layout_is_learned_once_and_serves_every_container(tmp_path: Path) -> None:
    proc, mount = _fake_host(tmp_path, 4242, f"/system.slice/docker-{ID}.scope")
    other = "a" * 64
    for container, pids in ((ID, "4242\n4243\n"), (other, "7\n")):
        folder = mount / "system.slice" / f"docker-{container}.scope"
        folder.mkdir(parents=True)
        (folder / "cgroup.procs").write_text(pids)
    asked: list[str] = []

    def _pid(container: str, pid: int) -> Any:
        return lambda: asked.append(container) or pid

    locator = CgroupLocator(proc=str(proc))
    assert locator.processes(ID, _pid(ID, 4242)) == 2
    assert locator.layout == (f"{mount}/system.slice/docker-", ".scope")
    assert locator.processes(other, _pid(other, 1)) == 1
    assert locator.processes("gone" * 16, _pid("gone", 1)) is None  # no such folder
    assert asked == [ID]


def test_a_pid_that_is_not_the_containers_is_not_trusted(tmp_path: Path) -> None:
    # The engine's pid names another process here (another pid namespace, another host).
    proc, mount = _fake_host(tmp_path, 4242, "/user.slice/session-1.scope")
    (mount / "user.slice" / "session-1.scope").mkdir(parents=True)
    (mount / "user.slice" / "session-1.scope" / "cgroup.procs").write_text("4242\n")
    asked: list[int] = []
    locator = CgroupLocator(proc=str(proc))
    for _ in range(3):
        assert locator.processes(ID, lambda: asked.append(1) or 4242) is None
    assert asked == [1]  # not learned, and not tried again
    assert locator.layout is None


def test_an_engine_that_cannot_name_the_pid_is_asked_again_next_time(tmp_path: Path) -> None:
    proc, mount = _fake_host(tmp_path, 4242, f"/docker/{ID}")
    (mount / "docker" / ID).mkdir(parents=True)
    (mount / "docker" / ID / "cgroup.procs").write_text("4242\n")
    locator = CgroupLocator(proc=str(proc))

    def _fails() -> int:
        raise ConnectionError("engine unreachable")

    assert locator.processes(ID, _fails) is None
    assert locator.processes(ID, lambda: 0) is None  # pid 0: the container is not running
    assert locator.layout is None
    assert locator.processes(ID, lambda: 4242) == 1
    assert locator.layout == (f"{mount}/docker/", "")


@pytest.mark.docker
@pytest.mark.parametrize("init", [True, False])
def test_the_count_matches_the_engines_on_a_real_container(
    docker_api: Any, busybox_image: str, init: bool
) -> None:
    created = docker_api.create_container(
        busybox_image,
        ["sleep", "300"],
        host_config=docker_api.create_host_config(init=init, network_mode="none"),
    )
    container = created["Id"]
    try:
        docker_api.start(container)
        locator = CgroupLocator()

        def _pid() -> int:
            return int(docker_api.inspect_container(container)["State"]["Pid"])

        def _engine() -> int:
            return len(docker_api.top(container)["Processes"])

        counted = locator.processes(container, _pid)
        if counted is None and not os.environ.get("VALLY_REQUIRE_DOCKER"):
            pytest.skip("the engine's cgroups are not visible from this host")
        assert counted == _engine() == (2 if init else 1)
        docker_api.exec_start(docker_api.exec_create(container, ["sh", "-c", "sleep 301 &"]))
        assert locator.processes(container, _pid) == _engine() == (3 if init else 2)
    finally:
        docker_api.remove_container(container, force=True)
