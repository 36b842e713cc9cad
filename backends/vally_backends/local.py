"""The ``local`` backend: each trial runs in a fresh folder on the host.

A trial's workspace is a temporary folder (``vally-eval-<pid>.<start>-XXXXXX``, swept by a
later run when its vally process died), the folder named by ``--workspace`` (kept
afterwards), or a git worktree when the environment sets ``git``. With
``reuse_workspace`` a kept folder that already exists is used as it is (``vally grade
--workspace``): never cleared, never deleted.
Commands run as subprocesses in their own session, each below a keeper that holds the
command's whole process tree (see :mod:`vally_backends.containment`): a timeout, a
cancellation, :meth:`LocalSandbox.stop_processes` (before grading) and :meth:`LocalSandbox.close`
stop everything the command started, whichever session or process group it moved to. Only
a small, safe set of host environment variables reaches the agent (see
:class:`LocalBackend.Config`), so API keys do not leak unless allowed.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno as errnos
import logging
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import ClassVar

from pydantic import Field

from vally import (
    BackendError,
    BaseBackend,
    BaseSandbox,
    CleanupError,
    ExecRequest,
    ExecResult,
    PathEscapeError,
    PluginMetadata,
    Process,
    SetupError,
    StrictConfig,
    TrialContext,
)
from vally_backends.commands import (
    CHUNK,
    Capture,
    KeptCommand,
    append_capped as append_capped,  # re-exported for the docker backend
    feed,
    kill_process_tree,
    start_kept,
)
from vally_backends.containment import (
    CELL_ENV,
    can_tell_owners,
    kill_marked,
    new_token,
    owner_alive,
    owner_mark,
    sweep_dead,
)

logger = logging.getLogger("vally.backends.local")

DEFAULT_ENV_PASSTHROUGH = ["PATH", "HOME", "LANG", "LC_ALL", "TERM", "TMPDIR", "USER"]
"""Host environment variables an agent sees by default."""

SKIPPED_DIRS = frozenset({".git", "node_modules"})
"""Folders :meth:`LocalSandbox.list_files` never descends into."""

DRAIN_GRACE_SECONDS = 1.0
"""How long pipes may stay open after the main process exited (a background child holding
them); after that, reading stops and what was read is returned."""


# --------------------------------------------------------------------------- helpers


def outside_workspace(path: str, workspace: object, hint: str) -> PathEscapeError:
    """The error for ``path``, which resolves outside ``workspace``."""
    return PathEscapeError(f"path {path!r} resolves outside the workspace {workspace}", hint=hint)


def _is_within(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


# --------------------------------------------------------------------------- process


class LocalProcess:
    """A long-running subprocess with piped stdin/stdout (stderr is discarded)."""

    def __init__(
        self,
        command: KeptCommand,
        stdin: asyncio.StreamWriter,
        stdout: asyncio.StreamReader,
        transports: list[asyncio.BaseTransport],
    ) -> None:
        self._command = command
        self._pid = command.pid or 0
        self._stdin = stdin
        self._stdout = stdout
        self._transports = transports

    @classmethod
    async def attach(cls, command: KeptCommand) -> LocalProcess:
        """Wrap ``command``, taking over its stdin and stdout pipes as asyncio streams."""
        loop = asyncio.get_running_loop()
        stdin_fd, stdout_fd = command.stdin, command.stdout
        if stdin_fd is None or stdout_fd is None:
            raise BackendError("the process has no stdin or stdout pipe")
        command.stdin = command.stdout = None
        reader = asyncio.StreamReader(limit=CHUNK, loop=loop)
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader, loop=loop),
            open(stdout_fd, "rb", buffering=0),  # noqa: SIM115 - the transport closes it
        )
        write_transport, write_protocol = await loop.connect_write_pipe(
            lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader(loop=loop), loop=loop),
            open(stdin_fd, "wb", buffering=0),  # noqa: SIM115 - the transport closes it
        )
        writer = asyncio.StreamWriter(write_transport, write_protocol, None, loop)
        return cls(command, writer, reader, [read_transport, write_transport])

    @property
    def pid(self) -> int:
        """The process id (also its session and process-group id)."""
        return self._pid

    async def write(self, data: bytes) -> None:
        """Write ``data`` to the process's stdin and wait until it is flushed."""
        self._stdin.write(data)
        await self._stdin.drain()

    async def readline(self) -> bytes:
        """One line of stdout, however long, ``b""`` at end of stream."""
        stream = self._stdout
        parts: list[bytes] = []
        while True:
            try:
                parts.append(await stream.readuntil(b"\n"))
                return b"".join(parts)
            except asyncio.IncompleteReadError as exc:
                parts.append(exc.partial)
                return b"".join(parts)
            except asyncio.LimitOverrunError as exc:
                # A line longer than the stream's buffer limit: take what is buffered.
                parts.append(await stream.readexactly(exc.consumed))

    async def terminate(self) -> int | None:
        """Stop the process and its children; return the exit code (None if killed)."""
        if self._command.returncode is None:
            with contextlib.suppress(OSError):
                self._stdin.close()
            await kill_process_tree(self._command)
        code = self._command.returncode
        for transport in self._transports:
            transport.close()
        self._command.release()
        return code if code is not None and code >= 0 else None


# --------------------------------------------------------------------------- sandbox


WORKSPACE_PREFIX = "vally-eval-"
"""The start of a workspace folder's name: ``vally-eval-<pid>.<start time>-<random>``."""

_OWNED_WORKSPACE = re.compile(r"^vally-eval-(\d+\.\d+)-")


def sweep_dead_workspaces(folder: str) -> int:
    """Delete the workspaces in ``folder`` whose vally process died without removing them
    (killed with SIGKILL, say); those of running processes, and folders of older versions
    (no owner in the name), are left. Nothing is swept where owners cannot be told."""
    if not can_tell_owners():
        return 0
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        match = _OWNED_WORKSPACE.match(entry.name)
        if match is None or not entry.is_dir(follow_symlinks=False):
            continue
        if owner_alive(f"{match.group(1)}.x"):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed += 1
    return removed


_REAL_TEMP_DIRS: dict[str, str] = {}


def _real_temp_dir() -> str:
    """The temporary folder with its symbolic links resolved (looked up once per folder),
    so that a workspace made in it needs no resolving of its own."""
    folder = tempfile.gettempdir()
    real = _REAL_TEMP_DIRS.get(folder)
    if real is None:
        real = _REAL_TEMP_DIRS[folder] = os.path.realpath(folder)
    return real


class LocalSandbox(BaseSandbox):
    """A workspace folder on the host and subprocesses running in it.

    Args:
        root: The workspace folder (must exist).
        base_env: The environment every command starts from.
        keep: Keep the folder at :meth:`close`.
        git_source: The repository the workspace is a worktree of, if any.
        resolved: ``root`` is known to be an absolute path without symbolic links (it
            is then not resolved again).
    """

    def __init__(
        self,
        root: Path,
        *,
        base_env: Mapping[str, str],
        keep: bool = False,
        git_source: Path | None = None,
        resolved: bool = False,
    ) -> None:
        self.host_workdir: Path | None = root
        self._root = root if resolved else root.resolve()
        self.workdir: str = str(self._root)
        self._base_env = dict(base_env)
        self._keep = keep
        self._git_source = git_source
        self._processes: list[LocalProcess] = []
        self._children: list[KeptCommand] = []
        self._token = new_token()
        self._closed = False

    @property
    def root(self) -> Path:
        """The workspace folder, resolved."""
        return self._root

    # ----------------------------------------------------------------- paths

    def resolve(self, path: str) -> Path:
        """The host path of a workspace path, refusing anything outside the workspace.

        Relative paths are taken from the workspace; absolute ones must lie inside it.
        Symbolic links are resolved before the check, so a link pointing outside is refused.

        Raises:
            PathEscapeError: The path resolves outside the workspace.
        """
        raw = Path(path)
        candidate = raw if raw.is_absolute() else self._root / raw
        resolved = candidate.resolve(strict=False)
        if not _is_within(resolved, self._root):
            hint = "use a path relative to the workspace without '..' or links leaving it"
            raise outside_workspace(path, self._root, hint)
        return resolved

    def _relative(self, host: Path) -> str:
        return PurePosixPath(host.relative_to(self._root)).as_posix()

    # ----------------------------------------------------------------- commands

    def _env(self, env: Mapping[str, str] | None) -> dict[str, str]:
        merged = dict(self._base_env)
        if env:
            merged.update({str(k): str(v) for k, v in env.items()})
        merged[CELL_ENV] = self._token
        return merged

    async def _start(self, request: ExecRequest, *, stdin: bool, stderr: bool) -> KeptCommand:
        argv = request.argv
        if not argv:
            raise BackendError("cannot run an empty command")
        workdir = self.resolve(request.cwd) if request.cwd else self._root
        try:
            child = await start_kept(
                [str(a) for a in argv],
                cwd=str(workdir),
                env=self._env(request.env),
                stdin=stdin,
                stderr=stderr,
            )
        except ValueError as exc:
            raise BackendError(
                f"cannot start {argv[0]!r}: {exc}", hint="remove NUL bytes from the command"
            ) from exc
        except OSError as exc:
            raise BackendError(
                f"cannot start {argv[0]!r}: the process keeper is not available ({exc})",
                hint="check that new processes can be started (process limits, memory)",
            ) from exc
        self._children.append(child)
        first = child.status.started.result()
        if first is not None and first.startswith("noexec"):
            await child.wait_keeper(None)
            child.release()
            code = int(first.partition(" ")[2] or errnos.ENOENT)
            raise self._cannot_start(argv[0], workdir, os.strerror(code))
        return child

    @staticmethod
    def _cannot_start(program: str, workdir: Path, reason: str) -> BackendError:
        return BackendError(
            f"cannot start {program!r} in {workdir}: {reason}",
            hint="check that the program is installed and on PATH for the sandbox",
        )

    async def run_command(self, request: ExecRequest) -> ExecResult:
        """Run a command in the workspace and wait for it (see :class:`vally.Sandbox`).

        Output beyond ``output_limit`` bytes per stream is read and dropped, so a process
        printing far more than the limit neither blocks nor fills memory. Background
        processes the command leaves behind keep running (until :meth:`stop_processes` or
        :meth:`close`), but output they write after the command exited is read for at most
        ``DRAIN_GRACE_SECONDS``; redirect their output (``cmd > log 2>&1 &``) to keep it.
        A command killed by a signal has ``exit_code=None`` and ``signal`` set.
        """
        started = time.monotonic()
        child = await self._start(request, stdin=request.stdin is not None, stderr=True)
        loop = asyncio.get_running_loop()
        readers: list[Capture] = []
        for fd in (child.stdout, child.stderr):
            assert fd is not None
            readers.append(Capture(fd, request.output_limit, loop))
        child.stdout = child.stderr = None  # the captures own them now
        feeder: asyncio.Future[None] | None = None
        if child.stdin is not None:
            feeder = asyncio.ensure_future(feed(child.stdin, request.stdin or b""))
            child.stdin = None
        timed_out = False
        try:
            if not await child.wait_exit(request.timeout):
                timed_out = True
                await kill_process_tree(child)
            # Pipes may be held open by a background child; give them a short grace.
            pending = [r.done for r in readers if not r.done.done()]
            if pending:
                await asyncio.wait(pending, timeout=DRAIN_GRACE_SECONDS)
        except BaseException:
            await kill_process_tree(child)
            raise
        finally:
            for reader in readers:
                reader.close()
            if feeder is not None and not feeder.done():
                feeder.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await feeder
            child.release()
        truncated = any(r.done.result() for r in readers)
        code = child.returncode
        out, err = readers[0].data, readers[1].data
        return ExecResult(
            exit_code=None if timed_out or code is None or code < 0 else code,
            stdout=out.decode("utf-8", errors="replace"),
            stderr=err.decode("utf-8", errors="replace"),
            timed_out=timed_out,
            truncated=truncated,
            duration_ms=int((time.monotonic() - started) * 1000),
            signal=-code if code is not None and code < 0 and not timed_out else None,
        )

    async def start_process(self, request: ExecRequest) -> Process:
        """Start a long-running process with piped stdin/stdout; it is stopped at close."""
        child = await self._start(request, stdin=True, stderr=False)
        try:
            handle = await LocalProcess.attach(child)
        except BaseException:
            await kill_process_tree(child)
            raise
        self._processes.append(handle)
        return handle

    # ----------------------------------------------------------------- files

    async def read_file(self, path: str) -> bytes:
        """Read a workspace file. Raises ``FileNotFoundError`` when it is absent."""
        return self.resolve(path).read_bytes()

    async def write_file(self, path: str, data: bytes) -> None:
        """Create or replace a workspace file, creating parent folders."""
        target = self.resolve(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    async def list_files(self, path: str = ".") -> list[str]:
        """Every regular file below ``path`` as sorted workspace-relative POSIX paths.

        Links are neither followed nor listed; ``.git`` and ``node_modules`` are skipped.
        """
        start = self.resolve(path)
        return await asyncio.to_thread(self._walk, start)

    def _walk(self, start: Path) -> list[str]:
        found: list[str] = []
        if not start.exists():
            return found
        if start.is_file():
            return [self._relative(start)]
        for current, dirs, files in os.walk(start, followlinks=False):
            dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
            for name in files:
                if name in SKIPPED_DIRS:  # a worktree's '.git' is a file
                    continue
                full = os.path.join(current, name)
                try:
                    mode = os.lstat(full).st_mode
                except OSError:
                    continue
                if stat.S_ISREG(mode):
                    found.append(self._relative(Path(full)))
        return sorted(found)

    async def list_links(self, path: str = ".") -> list[str]:
        """Every symbolic link below ``path`` (to a file or a folder, inside the workspace
        or not, dangling or not) as sorted workspace-relative POSIX paths, never followed;
        ``.git`` and ``node_modules`` are skipped."""
        raw = Path(path)
        start = raw if raw.is_absolute() else self._root / raw
        return await asyncio.to_thread(self._walk_links, start)

    def _walk_links(self, start: Path) -> list[str]:
        if start.is_symlink():
            return [self._relative(start)] if _is_within(start.parent.resolve(), self._root) else []
        start = self.resolve(str(start))
        found: list[str] = []
        for current, dirs, files in os.walk(start, followlinks=False):
            dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
            for name in [*dirs, *files]:
                full = os.path.join(current, name)
                if name not in SKIPPED_DIRS and os.path.islink(full):
                    found.append(self._relative(Path(full)))
        return sorted(found)

    async def copy_in(self, host_src: Path, dest: str) -> None:
        """Copy a host file or folder (recursively, links kept as links) to ``dest``."""
        target = self.resolve(dest)
        await asyncio.to_thread(_copy, Path(host_src), target, None)

    async def copy_out(self, src: str, host_dest: Path) -> None:
        """Copy a workspace file or folder to the host; links leaving the workspace are
        skipped, other links are copied as links."""
        source = self.resolve(src)
        await asyncio.to_thread(_copy, source, Path(host_dest), self._root)

    # ----------------------------------------------------------------- close

    async def stop_processes(self) -> None:
        """Stop every process started in this sandbox so far, and everything they started,
        whatever session or process group it moved to; return once they are gone.

        Each command's keeper passes SIGTERM on to its whole tree and SIGKILLs it after the
        grace period; then, when a keeper died before its tree was gone (killed by a process
        of the tree, say), every process still carrying this sandbox's marker is killed.
        The sandbox stays usable: commands run afterwards (graders) start afresh.
        """
        for process in self._processes:
            with contextlib.suppress(Exception):
                await process.terminate()
        self._processes.clear()
        children, self._children = self._children, []
        live = [child for child in children if child.keeper_alive]
        await asyncio.gather(*(kill_process_tree(c) for c in live), return_exceptions=True)
        for child in children:
            child.release()
        # A keeper that said its tree was gone held every process of it to the end: nothing
        # left it. A process whose keeper died instead was re-parented out of its tree, and
        # only the marker finds it (a scan of every process on the machine).
        if any(not child.status.finished for child in children):
            await asyncio.to_thread(kill_marked, self._token)

    async def close(self) -> None:
        """Stop every process of the sandbox (:meth:`stop_processes`), remove a git
        worktree, and delete the workspace unless it is kept.

        Raises:
            CleanupError: The worktree or the folder could not be removed.
        """
        if self._closed:
            return
        self._closed = True
        await self.stop_processes()
        problems: list[str] = []
        if self._git_source is not None and not self._keep:
            for args in (
                ["worktree", "remove", "--force", str(self._root)],
                ["worktree", "prune"],
            ):
                code, _, err = await run_git(self._git_source, args)
                if code != 0:
                    problems.append(f"git {' '.join(args)} failed: {err.strip()}")
        if not self._keep:
            try:
                os.rmdir(self._root)  # an empty folder goes without a thread or a stat
            except FileNotFoundError:
                pass
            except OSError:  # not empty: the tree, off the loop
                try:
                    await asyncio.to_thread(shutil.rmtree, self._root)
                except OSError as exc:
                    problems.append(f"cannot remove {self._root}: {exc}")
        if problems:
            raise CleanupError(
                "could not clean up the workspace: " + "; ".join(problems),
                hint="remove the folder by hand; for worktrees run 'git worktree prune'",
            )


def _copy(src: Path, dest: Path, confine: Path | None) -> None:
    """Copy ``src`` to ``dest``; with ``confine``, skip links resolving outside it."""
    if not src.exists() and not src.is_symlink():
        raise FileNotFoundError(f"no such file or folder: {src}")

    def _outside(path: Path) -> bool:
        return confine is not None and path.is_symlink() and not _is_within(path.resolve(), confine)

    if src.is_dir() and not src.is_symlink():

        def _ignore(folder: str, names: list[str]) -> set[str]:
            return {n for n in names if _outside(Path(folder) / n)}

        shutil.copytree(src, dest, symlinks=True, ignore=_ignore, dirs_exist_ok=True)
        return
    if _outside(src):
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, dest, follow_symlinks=False)


async def run_git(repo: Path, args: Sequence[str]) -> tuple[int, str, str]:
    """Run ``git -C repo args...`` on the host and return (exit code, stdout, stderr)."""
    try:
        proc = await asyncio.create_subprocess_exec(
            "git",
            "-C",
            str(repo),
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except FileNotFoundError as exc:
        raise SetupError(
            "git is not installed, but the environment asks for a git workspace",
            hint="install git or remove 'git:' from the environment",
        ) from exc
    out, err = await proc.communicate()
    return (
        proc.returncode or 0,
        out.decode("utf-8", errors="replace"),
        err.decode("utf-8", errors="replace"),
    )


# --------------------------------------------------------------------------- backend


class LocalBackend(BaseBackend["LocalBackend.Config"]):
    """Runs trials on this machine, each in its own temporary folder or git worktree."""

    metadata: ClassVar[PluginMetadata] = PluginMetadata(
        name="local",
        kind="backend",
        description="Run trials on the host, each in a fresh temporary folder or git worktree.",
    )

    class Config(StrictConfig):
        """Options of the ``local`` backend.

        Attributes:
            env_passthrough: Names of host environment variables the agent may see. Nothing
                else from the host environment reaches it; ``env`` from the spec and from
                the executor config is added on top.
            reuse_workspace: Open a kept workspace (``TrialContext.keep_workspace``) as it
                is: the folder must exist, nothing in it is cleared, no git worktree is
                added, and it is left in place at close. For re-grading a workspace kept
                by an earlier run; a trial without a kept workspace is not affected.
        """

        env_passthrough: list[str] = Field(default_factory=lambda: list(DEFAULT_ENV_PASSTHROUGH))
        reuse_workspace: bool = False

    def passed_env(self) -> dict[str, str]:
        """The host variables passed into every sandbox (their values are scrubbed from
        outputs unless public)."""
        return {k: os.environ[k] for k in self.config.env_passthrough if k in os.environ}

    async def start(self, run_id: str) -> None:
        """Kill processes left behind by sandboxes of vally processes that died (killed
        with SIGKILL, say), found through their marker, and delete their workspaces."""
        killed = await asyncio.to_thread(sweep_dead)
        if killed:
            logger.warning("local backend: killed %d process(es) left by a dead vally run", killed)
        swept = await asyncio.to_thread(sweep_dead_workspaces, _real_temp_dir())
        if swept:
            logger.warning("local backend: deleted %d workspace(s) left by a dead vally run", swept)

    def base_env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment commands start from: passed-through host variables, then
        ``extra``."""
        env = {k: os.environ[k] for k in self.config.env_passthrough if k in os.environ}
        if extra:
            env.update({str(k): str(v) for k, v in extra.items()})
        return env

    async def open(self, trial: TrialContext) -> LocalSandbox:
        """Create the trial's workspace and return a sandbox over it.

        Raises:
            SetupError: The folder or the git worktree could not be created.
        """
        if trial.keep_workspace is not None and self.config.reuse_workspace:
            return self._reuse(Path(trial.keep_workspace), trial)
        keep = trial.keep_workspace is not None
        git = trial.environment.git
        try:
            if trial.keep_workspace is not None:
                root = Path(trial.keep_workspace).absolute()
                await asyncio.to_thread(fresh_folder, root)
            else:
                prefix = f"{WORKSPACE_PREFIX}{owner_mark()}-"
                root = Path(tempfile.mkdtemp(prefix=prefix, dir=_real_temp_dir()))
        except OSError as exc:
            raise SetupError(
                f"cannot create the workspace for {trial.key.as_id()}: {exc}",
                hint="check that the --workspace folder is writable",
            ) from exc
        source: Path | None = None
        if git is not None:
            source = (Path(trial.spec_dir) / git.source).resolve()
            try:
                await self._add_worktree(source, root, git.ref or "HEAD")
            except BaseException:
                if not keep:
                    shutil.rmtree(root, ignore_errors=True)
                raise
        return LocalSandbox(
            root,
            base_env=self.base_env(trial.environment.env),
            keep=keep,
            git_source=source,
            resolved=not keep,  # a new folder in the resolved temporary folder
        )

    def _reuse(self, folder: Path, trial: TrialContext) -> LocalSandbox:
        """A sandbox over an existing folder that is neither cleared nor deleted.

        Raises:
            SetupError: The folder does not exist.
        """
        root = folder.absolute()
        if not root.is_dir():
            raise SetupError(
                f"cannot reuse the workspace {root} for {trial.key.as_id()}: not a folder",
                hint="pass an existing folder; a reused workspace is never created",
            )
        return LocalSandbox(root, base_env=self.base_env(trial.environment.env), keep=True)

    async def _add_worktree(self, source: Path, root: Path, ref: str) -> None:
        if not source.is_dir():
            raise SetupError(
                f"git.source {source} is not a folder",
                hint="git.source is relative to the eval file and must name a git repository",
            )
        code, _, err = await run_git(source, ["worktree", "add", "--detach", str(root), ref])
        if code != 0:
            raise SetupError(
                f"cannot create a git worktree of {source} at ref {ref!r}: {err.strip()}",
                hint="check that git.source is a git repository and git.ref exists in it",
            )


def fresh_folder(root: Path) -> None:
    """Make ``root`` an existing, empty folder (a kept workspace from an earlier run is
    cleared)."""
    if root.is_symlink() or root.is_file():
        root.unlink()
    elif root.is_dir():
        for child in root.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
    root.mkdir(parents=True, exist_ok=True)
