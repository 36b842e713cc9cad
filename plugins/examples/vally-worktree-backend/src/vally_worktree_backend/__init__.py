"""An example third-party vally backend: each trial runs in its own git worktree.

``--backend worktree --backend-args repo=PATH --backend-args ref=main`` checks out ``ref``
of the repository ``repo`` into a fresh, detached worktree per trial. Commands run as host
subprocesses in their own process group (a timeout kills the whole tree); file operations
are confined to the worktree. Closing the sandbox removes the worktree and prunes it from
the repository, unless the run asked to keep workspaces (``--workspace``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar

from pydantic import Field

from vally import (
    BackendError,
    BaseBackend,
    CleanupError,
    ConfigError,
    ExecResult,
    PluginMetadata,
    SetupError,
    StrictConfig,
    TrialContext,
)

__all__ = ["WorktreeBackend", "WorktreeConfig", "WorktreeProcess", "WorktreeSandbox"]

SKIPPED = frozenset({".git", "node_modules"})


class WorktreeConfig(StrictConfig):
    """Options of the ``worktree`` backend (``--backend-args KEY=VALUE``).

    Attributes:
        repo: The git repository the worktrees are made from (relative: from the current
            folder).
        ref: The commit, branch or tag checked out in every trial.
        env_passthrough: Host environment variables the agent sees.
    """

    repo: str = "."
    ref: str = "HEAD"
    env_passthrough: list[str] = Field(
        default_factory=lambda: ["PATH", "HOME", "LANG", "LC_ALL", "TERM", "TMPDIR", "USER"]
    )


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
    )


_WORKTREE_LOCKS: dict[Path, threading.Lock] = {}
_WORKTREE_LOCKS_GUARD = threading.Lock()


def _git_worktree(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``git worktree ARGS`` in ``repo``, one at a time per repository (blocking).

    Trials open and close concurrently, and git does not lock the repository's list of
    worktrees: a ``worktree add`` reading it while another trial's ``worktree remove`` or
    ``prune`` deletes an entry fails with ``failed to read .git/worktrees/.../commondir``.
    """
    with _WORKTREE_LOCKS_GUARD:
        lock = _WORKTREE_LOCKS.setdefault(repo, threading.Lock())
    with lock:
        return _git(repo, "worktree", *args)


class WorktreeProcess:
    """A long-running process started by :meth:`WorktreeSandbox.spawn`."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    async def write(self, data: bytes) -> None:
        """Write to the process's stdin."""
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        await self.process.stdin.drain()

    async def readline(self) -> bytes:
        """Read one line of stdout (``b""`` at the end)."""
        assert self.process.stdout is not None
        return await self.process.stdout.readline()

    async def terminate(self) -> int | None:
        """Kill the process group and return the exit code."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        return await self.process.wait()


class WorktreeSandbox:
    """A sandbox over one git worktree on the host."""

    def __init__(self, root: Path, repo: Path, env: Mapping[str, str], *, keep: bool) -> None:
        self.root = root.resolve()
        self.repo = repo
        self.workdir = str(self.root)
        self.host_workdir: Path | None = self.root
        self.env = dict(env)
        self.keep = keep
        self.closed = False

    def _resolve(self, path: str) -> Path:
        target = (self.root / path).resolve()
        if target != self.root and self.root not in target.parents:
            raise BackendError(
                f"path {path!r} resolves outside the worktree {self.root}",
                hint="use paths inside the workspace",
            )
        return target

    async def exec(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
        stdin: bytes | None = None,
        output_limit: int = 1_000_000,
    ) -> ExecResult:
        """Run ``argv`` in the worktree in its own process group and wait for it."""
        started = time.monotonic()
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=str(self._resolve(cwd or ".")),
                env={**self.env, **(env or {})},
                stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise BackendError(f"cannot start {argv[0]!r} in {self.root}: {exc}") from exc
        timed_out = False
        try:
            out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
        except (TimeoutError, asyncio.CancelledError) as exc:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, err = await proc.communicate()
            if isinstance(exc, asyncio.CancelledError):
                raise
            timed_out = True
        return ExecResult(
            exit_code=None if timed_out else proc.returncode,
            stdout=out[:output_limit].decode("utf-8", errors="replace"),
            stderr=err[:output_limit].decode("utf-8", errors="replace"),
            timed_out=timed_out,
            truncated=len(out) > output_limit or len(err) > output_limit,
            duration_ms=int((time.monotonic() - started) * 1000),
        )

    async def spawn(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None
    ) -> WorktreeProcess:
        """Start a long-running process with piped stdio."""
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=str(self._resolve(cwd or ".")),
                env={**self.env, **(env or {})},
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise BackendError(f"cannot start {argv[0]!r} in {self.root}: {exc}") from exc
        return WorktreeProcess(proc)

    async def read_file(self, path: str) -> bytes:
        """Read a worktree file (``FileNotFoundError`` when absent)."""
        return self._resolve(path).read_bytes()

    async def write_file(self, path: str, data: bytes) -> None:
        """Create or replace a worktree file, creating parent folders."""
        target = self._resolve(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    async def list_files(self, path: str = ".") -> list[str]:
        """Every regular file below ``path``, sorted; ``.git`` and links are skipped."""
        base = self._resolve(path)
        out: list[str] = []
        for folder, dirs, files in os.walk(base):
            dirs[:] = [d for d in dirs if d not in SKIPPED]
            for name in files:
                if name in SKIPPED:  # a worktree's .git is a file
                    continue
                full = Path(folder) / name
                if full.is_file() and not full.is_symlink():
                    out.append(full.relative_to(self.root).as_posix())
        return sorted(out)

    async def copy_in(self, host_src: Path, dest: str) -> None:
        """Copy a host file or folder into the worktree."""
        target = self._resolve(dest)
        if host_src.is_dir():
            shutil.copytree(host_src, target, dirs_exist_ok=True, symlinks=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(host_src, target)

    async def copy_out(self, src: str, host_dest: Path) -> None:
        """Copy a worktree file or folder to the host (links are copied as links)."""
        source = self._resolve(src)
        if source.is_dir():
            shutil.copytree(source, host_dest, dirs_exist_ok=True, symlinks=True)
        else:
            host_dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, host_dest)

    async def close(self) -> None:
        """Remove the worktree (unless kept) and prune it from the repository."""
        if self.closed:
            return
        self.closed = True
        if self.keep:
            return
        result = await asyncio.to_thread(
            _git_worktree, self.repo, "remove", "--force", str(self.root)
        )
        if result.returncode != 0 and self.root.exists():
            raise CleanupError(
                f"cannot remove worktree {self.root}: {result.stderr.strip()}",
                hint=f"remove it by hand and run 'git -C {self.repo} worktree prune'",
            )
        with contextlib.suppress(OSError):
            self.root.parent.rmdir()
        await asyncio.to_thread(_git_worktree, self.repo, "prune")


class WorktreeBackend(BaseBackend[WorktreeConfig]):
    """Each trial in a detached git worktree of ``repo`` at ``ref``."""

    metadata: ClassVar[PluginMetadata] = PluginMetadata(
        name="worktree",
        kind="backend",
        description="Each trial in its own git worktree of a configured repository.",
    )
    Config = WorktreeConfig

    def __init__(self, config: WorktreeConfig | None = None) -> None:
        super().__init__(config)
        self.repo = Path(self.config.repo).expanduser().resolve()
        self.commit = ""

    async def start(self, run_id: str) -> None:
        """Check that ``repo`` is a git repository and resolve ``ref`` once for the run.

        Raises:
            ConfigError: ``repo`` is not a repository or ``ref`` does not exist.
        """
        top = await asyncio.to_thread(_git, self.repo, "rev-parse", "--show-toplevel")
        if top.returncode != 0:
            raise ConfigError(
                f"worktree backend: {self.repo} is not a git repository: {top.stderr.strip()}",
                hint="pass --backend-args repo=PATH with a git checkout",
            )
        commit = await asyncio.to_thread(
            _git, self.repo, "rev-parse", "--verify", f"{self.config.ref}^{{commit}}"
        )
        if commit.returncode != 0:
            raise ConfigError(
                f"worktree backend: ref {self.config.ref!r} not found in {self.repo}",
                hint="pass --backend-args ref=BRANCH|TAG|COMMIT",
            )
        self.commit = commit.stdout.strip()

    async def open(self, trial: TrialContext) -> WorktreeSandbox:
        """Add a detached worktree at the run's commit and return a sandbox over it.

        Raises:
            SetupError: git could not add the worktree.
        """
        if not self.commit:
            await self.start(trial.run_id)
        keep = trial.keep_workspace is not None
        if trial.keep_workspace is not None:
            root = trial.keep_workspace
            root.parent.mkdir(parents=True, exist_ok=True)
        else:
            # A unique folder name: git names the worktree's admin folder after it, and two
            # trials adding worktrees named alike at the same moment race for that name.
            parent = Path(tempfile.mkdtemp(prefix="vally-worktree-"))
            root = parent / f"work-{parent.name}"
        result = await asyncio.to_thread(
            _git_worktree, self.repo, "add", "--detach", str(root), self.commit
        )
        if result.returncode != 0:
            raise SetupError(
                f"git worktree add {root} {self.commit[:12]} failed: {result.stderr.strip()}"
            )
        env = {k: os.environ[k] for k in self.config.env_passthrough if k in os.environ}
        return WorktreeSandbox(root, self.repo, env, keep=keep)
