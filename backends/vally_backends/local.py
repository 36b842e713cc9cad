"""The ``local`` backend: each trial runs in a fresh folder on the host.

A trial's workspace is a temporary folder (``vally-eval-XXXXXX``), the folder named by
``--workspace`` (kept afterwards), or a git worktree when the environment sets ``git``. With
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
import shutil
import signal
import stat
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

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
from vally_backends.containment import CELL_ENV, keeper_argv, kill_marked, new_token, sweep_dead

logger = logging.getLogger("vally.backends.local")

DEFAULT_ENV_PASSTHROUGH = ["PATH", "HOME", "LANG", "LC_ALL", "TERM", "TMPDIR", "USER"]
"""Host environment variables an agent sees by default."""

SKIPPED_DIRS = frozenset({".git", "node_modules"})
"""Folders :meth:`LocalSandbox.list_files` never descends into."""

KILL_GRACE_SECONDS = 2.0
"""How long a command's processes get between SIGTERM and SIGKILL."""

KEEPER_MARGIN_SECONDS = 3.0
"""How long past the grace period a keeper may take to kill and reap its tree before its
process group is killed outright."""

DRAIN_GRACE_SECONDS = 1.0
"""How long pipes may stay open after the main process exited (a background child holding
them); after that, reading stops and what was read is returned."""

_CHUNK = 65536


# --------------------------------------------------------------------------- helpers


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _kill_created(creation: asyncio.Future[Any]) -> None:
    """Kill the whole tree of a keeper whose start was cancelled, once it has started."""
    if creation.cancelled() or creation.exception() is not None:
        return
    transport = creation.result()[0]
    pid = transport.get_pid()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGHUP)  # the keeper kills its tree at once
    _signal_group(pid, signal.SIGKILL)
    transport.close()


class _ExitAwareProtocol(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's stream protocol plus a future that resolves when the process itself exits.

    ``asyncio.subprocess.Process.wait()`` also waits for the pipes to close, which never
    happens while a background child still holds them; timeouts must not depend on that.
    """

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=limit, loop=loop)
        self.exited: asyncio.Future[None] = loop.create_future()

    def process_exited(self) -> None:
        super().process_exited()
        if not self.exited.done():
            self.exited.set_result(None)


class _Status:
    """The read end of a keeper's status pipe (see :mod:`vally_backends.reaper`).

    ``started`` resolves with the first line (``run PID`` or ``noexec ERRNO``), ``ended``
    with the command's end (``exit N`` or ``signal N``); both resolve with None when the
    keeper died without saying.
    """

    def __init__(self, fd: int, loop: asyncio.AbstractEventLoop) -> None:
        self._fd = fd
        self._loop = loop
        self._buffer = bytearray()
        self.started: asyncio.Future[str | None] = loop.create_future()
        self.ended: asyncio.Future[str | None] = loop.create_future()
        os.set_blocking(fd, False)
        loop.add_reader(fd, self._readable)

    def _readable(self) -> None:
        try:
            chunk = os.read(self._fd, 256)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        self._buffer += chunk
        while b"\n" in self._buffer:
            line, _, rest = bytes(self._buffer).partition(b"\n")
            self._buffer[:] = rest
            self._resolve(line.decode("ascii", "replace").strip())
        if not chunk:
            self.close()

    def _resolve(self, line: str | None) -> None:
        for future in (self.started, self.ended):
            if not future.done():
                future.set_result(line)
                if line is None or line.startswith("noexec"):
                    continue
                return

    def close(self) -> None:
        """Stop reading; pending futures resolve with None."""
        if self._fd >= 0:
            self._loop.remove_reader(self._fd)
            os.close(self._fd)
            self._fd = -1
        self._resolve(None)


class _Child:
    """A command started below its keeper: the keeper's transport, protocol and stream-level
    process object, and the status pipe saying how the command itself ended."""

    def __init__(
        self,
        transport: asyncio.SubprocessTransport,
        protocol: _ExitAwareProtocol,
        process: asyncio.subprocess.Process,
        status: _Status,
    ) -> None:
        self.transport = transport
        self.protocol = protocol
        self.process = process
        self.status = status

    @property
    def pid(self) -> int:
        """The keeper's process id, which is also the process-group id of the command."""
        return self.process.pid

    @property
    def keeper_alive(self) -> bool:
        """Whether the keeper still runs (it outlives the command while orphans remain)."""
        return self.transport.get_returncode() is None

    @property
    def returncode(self) -> int | None:
        """The command's exit status once it ended (negative: killed by that signal); the
        keeper's when the keeper died without saying."""
        line = self.status.ended.result() if self.status.ended.done() else None
        if line is not None:
            kind, _, number = line.partition(" ")
            if number.lstrip("-").isdigit():
                return -int(number) if kind == "signal" else int(number)
        return self.transport.get_returncode()

    async def wait_exit(self, timeout: float | None) -> bool:
        """Wait until the command exits; False when ``timeout`` seconds passed first."""
        try:
            said = await asyncio.wait_for(asyncio.shield(self.status.ended), timeout)
            if said is None:  # the keeper died without a report: its own exit is the end
                await asyncio.wait_for(asyncio.shield(self.protocol.exited), timeout)
        except TimeoutError:
            return False
        return True

    async def wait_keeper(self, timeout: float | None) -> bool:
        """Wait until the keeper exits; False when ``timeout`` seconds passed first."""
        try:
            await asyncio.wait_for(asyncio.shield(self.protocol.exited), timeout)
        except TimeoutError:
            return False
        return True

    def release(self) -> None:
        """Close the pipes; close the transport too once the keeper has exited (closing it
        earlier would SIGKILL the keeper and orphan what it holds)."""
        if self.keeper_alive:
            for fd in (0, 1, 2):
                pipe = self.transport.get_pipe_transport(fd)
                if pipe is not None:
                    pipe.close()
        else:
            self.transport.close()
            self.status.close()


async def kill_process_tree(child: _Child, grace: float | None = None) -> None:
    """Stop ``child``'s command and everything below its keeper, whatever session or group
    it moved to: SIGTERM to the process group (the keeper passes it on to every descendant
    and SIGKILLs them all after its grace period), SIGKILL to the group when the keeper has
    not finished ``grace`` seconds (default :data:`KILL_GRACE_SECONDS`) later plus a margin,
    then wait until the keeper is reaped so no zombie is left.
    """
    pgid = child.pid
    _signal_group(pgid, signal.SIGTERM)
    wait = (KILL_GRACE_SECONDS if grace is None else grace) + KEEPER_MARGIN_SECONDS
    try:
        await child.wait_keeper(wait)
    except asyncio.CancelledError:
        pass
    finally:
        # Members that ignored SIGTERM, or a keeper that did not finish, go now.
        _signal_group(pgid, signal.SIGKILL)
    if child.keeper_alive:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(child.protocol.exited)
    child.release()


def append_capped(sink: bytearray, data: bytes, limit: int) -> bool:
    """Append ``data`` to ``sink`` while ``sink`` holds at most ``limit`` bytes; True when
    bytes were dropped."""
    room = limit - len(sink)
    if room >= len(data):
        sink += data
        return False
    if room > 0:
        sink += data[:room]
    return True


async def _drain(stream: asyncio.StreamReader | None, limit: int, sink: bytearray) -> bool:
    """Read ``stream`` to its end, keeping at most ``limit`` bytes; True when bytes were cut."""
    if stream is None:
        return False
    cut = False
    while True:
        chunk = await stream.read(_CHUNK)
        if not chunk:
            return cut
        cut = append_capped(sink, chunk, limit) or cut


async def _feed(stdin: asyncio.StreamWriter | None, data: bytes | None) -> None:
    if stdin is None:
        return
    try:
        if data:
            stdin.write(data)
            await stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError, OSError):
            stdin.close()
            await stdin.wait_closed()


def outside_workspace(path: str, workspace: object, hint: str) -> PathEscapeError:
    """The error for ``path``, which resolves outside ``workspace``."""
    return PathEscapeError(f"path {path!r} resolves outside the workspace {workspace}", hint=hint)


def _is_within(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


# --------------------------------------------------------------------------- process


class LocalProcess:
    """A long-running subprocess with piped stdin/stdout (stderr is discarded)."""

    def __init__(self, child: _Child) -> None:
        self._child = child
        self._proc = child.process

    @property
    def pid(self) -> int:
        """The process id (also its process-group id)."""
        return self._proc.pid

    async def write(self, data: bytes) -> None:
        """Write ``data`` to the process's stdin and wait until it is flushed."""
        if self._proc.stdin is None:
            raise BackendError("the process has no stdin pipe")
        self._proc.stdin.write(data)
        await self._proc.stdin.drain()

    async def readline(self) -> bytes:
        """One line of stdout, however long, ``b""`` at end of stream."""
        stream = self._proc.stdout
        if stream is None:
            return b""
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
        if self._child.returncode is None:
            if self._proc.stdin is not None:
                with contextlib.suppress(OSError):
                    self._proc.stdin.close()
            await kill_process_tree(self._child)
        code = self._child.returncode
        self._child.release()
        return code if code is not None and code >= 0 else None


# --------------------------------------------------------------------------- sandbox


class LocalSandbox(BaseSandbox):
    """A workspace folder on the host and subprocesses running in it.

    Args:
        root: The workspace folder (must exist).
        base_env: The environment every command starts from.
        keep: Keep the folder at :meth:`close`.
        git_source: The repository the workspace is a worktree of, if any.
    """

    def __init__(
        self,
        root: Path,
        *,
        base_env: Mapping[str, str],
        keep: bool = False,
        git_source: Path | None = None,
    ) -> None:
        self.host_workdir: Path | None = root
        self._root = root.resolve()
        self.workdir: str = str(self._root)
        self._base_env = dict(base_env)
        self._keep = keep
        self._git_source = git_source
        self._processes: list[LocalProcess] = []
        self._children: list[_Child] = []
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

    async def _start(self, request: ExecRequest, *, stdin: int, stderr: int) -> _Child:
        argv = request.argv
        if not argv:
            raise BackendError("cannot run an empty command")
        workdir = self.resolve(request.cwd) if request.cwd else self._root
        loop = asyncio.get_running_loop()
        status_r, status_w = os.pipe()  # not inheritable (PEP 446)
        status = _Status(status_r, loop)
        creation = asyncio.ensure_future(
            loop.subprocess_exec(
                lambda: _ExitAwareProtocol(_CHUNK, loop),
                *keeper_argv(status_w, KILL_GRACE_SECONDS, [str(a) for a in argv]),
                stdin=stdin,
                stdout=asyncio.subprocess.PIPE,
                stderr=stderr,
                cwd=str(workdir),
                env=self._env(request.env),
                start_new_session=True,
                pass_fds=(status_w,),
            )
        )
        try:
            # Shielded: cancelling asyncio while it connects the pipes kills only the leader
            # and then waits for pipes that a background child may hold forever.
            transport, protocol = await asyncio.shield(creation)
        except asyncio.CancelledError:
            creation.add_done_callback(_kill_created)
            status.close()
            raise
        except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
            status.close()
            raise self._cannot_start(argv[0], workdir, exc.strerror or str(exc)) from exc
        finally:
            os.close(status_w)
        process = asyncio.subprocess.Process(transport, protocol, loop)
        child = _Child(transport, protocol, process, status)
        self._children.append(child)
        try:
            first = await asyncio.shield(status.started)
        except asyncio.CancelledError:
            await kill_process_tree(child)
            raise
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
        has_stdin = request.stdin is not None
        child = await self._start(
            request,
            stdin=asyncio.subprocess.PIPE if has_stdin else asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        proc = child.process
        out, err = bytearray(), bytearray()
        readers = [
            asyncio.ensure_future(_drain(proc.stdout, request.output_limit, out)),
            asyncio.ensure_future(_drain(proc.stderr, request.output_limit, err)),
        ]
        feeder = asyncio.ensure_future(_feed(proc.stdin, request.stdin))
        timed_out = False
        try:
            if not await child.wait_exit(request.timeout):
                timed_out = True
                await kill_process_tree(child)
            # Pipes may be held open by a background child; give them a short grace.
            _, pending = await asyncio.wait(readers, timeout=DRAIN_GRACE_SECONDS)
            for task in pending:
                task.cancel()
        except BaseException:
            await kill_process_tree(child)
            for reader in readers:
                reader.cancel()
            feeder.cancel()
            raise
        finally:
            if not feeder.done():
                feeder.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await feeder
            child.release()
        truncated = any(t.done() and not t.cancelled() and t.result() for t in readers)
        code = child.returncode
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
        child = await self._start(
            request,
            stdin=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        handle = LocalProcess(child)
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
        grace period; then every process still carrying this sandbox's marker is killed.
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
        # A process that killed its keeper was re-parented out of its tree: the marker says.
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
        if not self._keep and self._root.exists():
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
        with SIGKILL, say), found through their marker."""
        killed = await asyncio.to_thread(sweep_dead)
        if killed:
            logger.warning("local backend: killed %d process(es) left by a dead vally run", killed)

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
                root = Path(tempfile.mkdtemp(prefix="vally-eval-"))
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
