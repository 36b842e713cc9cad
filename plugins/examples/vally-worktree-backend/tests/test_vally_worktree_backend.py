"""Tests of the worktree backend against a real git repository and real subprocesses."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest
from vally_worktree_backend import WorktreeBackend, WorktreeConfig

from vally import (
    BackendError,
    ConfigError,
    EnvironmentConfig,
    TrialContext,
    TrialKey,
)
from vally.plugins.session import Session


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "t")
    (repo / "README.md").write_text("v1\n")
    git("add", ".")
    git("commit", "-qm", "one")
    git("tag", "v1")
    (repo / "README.md").write_text("v2\n")
    git("commit", "-qam", "two")
    return repo


def _trial(tmp_path: Path, n: int = 0) -> TrialContext:
    return TrialContext(
        key=TrialKey("default", "demo", "s", "m", n),
        run_id="run",
        environment=EnvironmentConfig(),
        spec_dir=tmp_path,
    )


def _worktrees(repo: Path) -> int:
    out = subprocess.run(
        ["git", "-C", str(repo), "worktree", "list"], capture_output=True, text=True, check=True
    )
    return len(out.stdout.splitlines())


def test_each_trial_gets_its_own_worktree_at_the_ref(tmp_path: Path) -> None:
    repo = _repo(tmp_path)

    async def scenario() -> None:
        backend = WorktreeBackend(WorktreeConfig(repo=str(repo), ref="v1"))
        await backend.start("run")
        one, two = await asyncio.gather(
            backend.open(_trial(tmp_path, 0)), backend.open(_trial(tmp_path, 1))
        )
        assert one.workdir != two.workdir
        assert await one.read_file("README.md") == b"v1\n"
        await one.write_file("sub/new.txt", b"x")
        assert await one.list_files() == ["README.md", "sub/new.txt"]
        assert await two.list_files() == ["README.md"]
        result = await one.exec(["sh", "-c", "cat sub/new.txt; echo; pwd"])
        assert result.exit_code == 0
        assert result.stdout.splitlines() == ["x", one.workdir]
        assert _worktrees(repo) == 3
        root = Path(one.workdir)
        await one.close()
        await two.close()
        await backend.shutdown()
        assert not root.exists()
        assert _worktrees(repo) == 1

    asyncio.run(scenario())


def test_file_operations_are_confined(tmp_path: Path) -> None:
    repo = _repo(tmp_path)

    async def scenario() -> None:
        backend = WorktreeBackend(WorktreeConfig(repo=str(repo)))
        sandbox = await backend.open(_trial(tmp_path))
        try:
            with pytest.raises(BackendError, match="outside the worktree"):
                await sandbox.read_file("../../etc/passwd")
            with pytest.raises(BackendError, match="outside the worktree"):
                await sandbox.write_file("/tmp/escape.txt", b"x")
            with pytest.raises(BackendError, match="outside the worktree"):
                await sandbox.exec(["true"], cwd="..")
        finally:
            await sandbox.close()

    asyncio.run(scenario())


PF_EXITING = 0x4
"""The kernel's per-task flag set when a process starts to exit (``include/linux/sched.h``)."""


def _dead_or_exiting(pid: int) -> bool:
    """Whether ``pid`` is gone, a zombie, or already exiting.

    A killed process closes its files (so its pipes' readers see their end) before it
    becomes a zombie; in between it is still listed as running, with ``PF_EXITING`` in the
    flags field of ``/proc/<pid>/stat``.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    fields = stat.rsplit(")", 1)[1].split()  # state, ppid, pgrp, session, tty, tpgid, flags
    return fields[0] in {"Z", "X"} or bool(int(fields[6]) & PF_EXITING)


def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    repo = _repo(tmp_path)

    async def scenario() -> None:
        backend = WorktreeBackend(WorktreeConfig(repo=str(repo)))
        sandbox = await backend.open(_trial(tmp_path))
        try:
            # a background grandchild records its pid, then outlives the timeout
            script = "sleep 60 & echo $! > child.pid; wait"
            result = await sandbox.exec(["sh", "-c", script], timeout=0.5)
            assert result.timed_out and result.exit_code is None
            pid = int((await sandbox.read_file("child.pid")).decode())
            # exec returned only once every holder of its pipes was gone; the grandchild is
            # dead (absent, or a zombie awaiting its reaper) or on its way out
            assert _dead_or_exiting(pid)
        finally:
            await sandbox.close()

    asyncio.run(scenario())


def test_bad_repo_or_ref_is_a_config_error(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    with pytest.raises(ConfigError, match="not a git repository"):
        asyncio.run(WorktreeBackend(WorktreeConfig(repo=str(tmp_path / "none"))).start("r"))
    with pytest.raises(ConfigError, match="ref 'nope' not found"):
        asyncio.run(WorktreeBackend(WorktreeConfig(repo=str(repo), ref="nope")).start("r"))


def test_installed_entry_point_resolves_to_this_class() -> None:
    name = WorktreeBackend.metadata.name
    assert Session(environ={}).plugin_class("backend", name) is WorktreeBackend


def test_trials_opening_and_closing_at_once_never_trip_over_each_other(tmp_path: Path) -> None:
    # git does not lock the list of worktrees: unserialised, a `worktree add` reading it
    # while another trial's `remove` or `prune` deletes an entry fails about one time in
    # five here.
    repo = _repo(tmp_path)

    async def scenario() -> None:
        backend = WorktreeBackend(WorktreeConfig(repo=str(repo)))
        await backend.start("run")

        async def trials(worker: int) -> None:
            for n in range(10):
                sandbox = await backend.open(_trial(tmp_path, worker * 100 + n))
                await sandbox.close()

        await asyncio.gather(*(trials(worker) for worker in range(6)))

    asyncio.run(scenario())
    assert _worktrees(repo) == 1  # the repository's own checkout only
