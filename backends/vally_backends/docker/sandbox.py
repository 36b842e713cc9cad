"""A trial's container seen through the :class:`vally.contracts.protocols.Sandbox` protocol."""

from __future__ import annotations

import asyncio
import contextlib
import posixpath
import shlex
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from vally import (
    BackendError,
    BaseSandbox,
    CleanupError,
    ExecRequest,
    ExecResult,
    PathEscapeError,
    Process,
)
from vally_backends.docker.archive import (
    TarBuilder,
    copy_tree_archive,
    extract_confined,
    link_target,
    members,
    spool,
    within,
)
from vally_backends.docker.cgroups import CgroupLocator
from vally_backends.docker.channel import ChannelCommand, channel_script, new_token
from vally_backends.docker.errors import OutOfMemoryError
from vally_backends.docker.stream import STDERR, STDOUT, ExecStream, take_pid_line
from vally_backends.local import append_capped, outside_workspace

T = TypeVar("T")

KILL_GRACE_SECONDS = 2.0
"""How long output may keep flowing after a timed-out command's process group was killed."""

WRAPPER = 'echo "$$" >&2 && exec "$@"'
"""Runs every command: reports its pid (a docker exec is a session and process-group leader)
on the first stderr line, then becomes the command. The pid lets a timeout kill the whole
process group from a second exec, using only shell built-ins (so it works even when the
container has no process slot left)."""

STOP_SCRIPT = """
read -r s < /proc/1/stat
s=${s##*") "}
set -- $s
idle=$4
n=0
while :; do
  left=
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    [ "$p" = 1 ] || [ "$p" = "$$" ] || {
      read -r s 2>/dev/null < "$d/stat" || continue
      s=${s##*") "}
      set -- $s
      case "$1" in Z|X) continue ;; esac
      [ "$4" = "$idle" ] && continue
      left="$left $p"
      kill -9 "$p" 2>/dev/null
    }
  done
  [ -z "$left" ] && exit 0
  n=$((n + 1))
  [ "$n" -ge 1000 ] && { echo "still running:$left" >&2; exit 1; }
done
"""
"""Kills every process in the container but its init, the container's own processes and
itself, and rescans ``/proc`` until none is left: every session and process group is
reached, and a process forked meanwhile is found in the next round.

The container's own processes (its main process, see :mod:`vally_backends.docker.channel`)
are told apart by their session: they belong to the session of process 1 (the container's
init), while every ``docker exec`` starts a new session, the command run by the main
process is started in a session of its own (``setsid``), and no process can join an
existing session, so nothing the agent starts is ever spared. It runs as the sandbox
user (all the agent's processes run as that user; with no capabilities nobody can change
user) and uses shell built-ins only, so it also works when the container has no process
slot left but the one this exec takes."""

SIGNAL_EXITS = range(129, 160)
"""Exit codes read as "killed by signal ``code - 128``": the container's shell reports a
command killed by signal N as 128 + N (standard signals 1-31) and cannot tell it apart from
a program exiting with that code."""

SKIPPED_DIRS = (".git", "node_modules")
"""Folders :meth:`DockerSandbox.list_files` never descends into."""

_POLL = 0.25

OOM_EVENT_WAIT_SECONDS = 2.0
"""How long a command that ended with status 137 waits for the engine's out-of-memory event
before it is taken for an ordinary ``SIGKILL``, when the container's own out-of-memory
counter cannot be read (see :data:`OOM_KILLS_SCRIPT`)."""

OOM_KILLS_SCRIPT = """
for f in /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control; do
  [ -r "$f" ] || continue
  while read -r key value; do
    [ "$key" = oom_kill ] && { echo "$value"; exit 0; }
  done < "$f"
done
exit 1
"""
"""Print how many processes the kernel's out-of-memory killer killed in the container
(shell built-ins only): ``oom_kill`` of the container's memory cgroup, cgroup v2 or v1.
The kernel counts the kill before the process dies, so unlike the engine's event it cannot
arrive late. Exits 1 when the container cannot see its own memory cgroup."""

CHANNEL_EXIT_SECONDS = 5.0
"""How long closing waits for a container whose main process was told to end (its command
channel closed) before removing it by force."""


@dataclass
class ContainerInfo:
    """What a sandbox knows about its container (also exposed as ``sandbox.info``).

    Attributes:
        id: The container id.
        image: The image reference it runs.
        user: The numeric ``uid:gid`` commands run as.
        uid: The numeric user id owning the workspace.
        gid: The numeric group id owning the workspace.
        started_at: Unix time the container started (OOM events are looked up from it).
        warnings: Notes about weakened safety (e.g. running as root).
        volume: A named per-trial workspace volume to remove with the container (the
            workspace volume the backend creates is anonymous and goes with the container).
        channel: Whether the container's main process is the command keeper of
            :mod:`vally_backends.docker.channel` (its first command then runs there).
        init: Whether the container runs an init as process 1, with the main process as
            its child (``init`` of the backend's settings).
        disk: What the ``disk`` limit bounds in it (see
            :meth:`vally_backends.docker.disk.DiskPlan.metadata`).
    """

    id: str
    image: str
    user: str
    uid: int
    gid: int
    started_at: float
    warnings: list[str] = field(default_factory=list)
    volume: str | None = None
    channel: bool = False
    init: bool = False
    disk: dict[str, Any] = field(default_factory=dict)


async def run_blocking(fn: Callable[..., T], *args: Any) -> T:
    """Run a blocking docker SDK call in a worker thread."""
    return await asyncio.to_thread(fn, *args)


def kill_group(api: Any, container: str, user: str, pid: int | None) -> None:
    """Kill the process group ``pid`` leads in ``container``, and ``pid`` itself, from a
    second exec (shell built-ins only: it works with every process slot taken); nothing
    when the pid is not known."""
    if not pid or pid <= 0:
        return
    script = f"kill -9 -{pid} 2>/dev/null; kill -9 {pid} 2>/dev/null; true"
    with contextlib.suppress(Exception):
        killer = api.exec_create(container, ["/bin/sh", "-c", script], user=user, stdout=True)
        api.exec_start(killer["Id"])


class _Output(Protocol):
    """What :func:`_pump` reads a running command through (an exec, or the channel)."""

    pid: int | None

    @property
    def eof(self) -> bool:
        """True once the command's output ended."""

    def frame(self, wait: float) -> tuple[int, bytes] | None:
        """The next ``(stream, data)`` piece of output, or None after ``wait`` seconds."""

    def kill(self) -> None:
        """Kill the command's process group."""


class _Exec:
    """One command running in the container through an attached exec (blocking API)."""

    def __init__(
        self,
        api: Any,
        container: str,
        user: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None,
        cwd: str,
        stdin: bool,
    ) -> None:
        self.api = api
        self.container = container
        self.user = user
        self.argv = [str(a) for a in argv]
        self.pid: int | None = None
        self._stderr_head = bytearray()
        created = api.exec_create(
            container,
            ["/bin/sh", "-c", WRAPPER, "vally-exec", *self.argv],
            stdout=True,
            stderr=True,
            stdin=stdin,
            environment={str(k): str(v) for k, v in (env or {}).items()} or None,
            workdir=cwd,
            user=user,
        )
        self.exec_id: str = created["Id"]
        self.stream = ExecStream(api.exec_start(self.exec_id, socket=True))

    def frame(self, wait: float) -> tuple[int, bytes] | None:
        """The next output frame; the pid line is consumed from stderr transparently."""
        got: tuple[int, bytes] | None = self.stream.next_frame(wait)
        if got is None:
            return None
        kind, data = got
        if kind == STDERR and self.pid is None:
            self._stderr_head += data
            self.pid = take_pid_line(self._stderr_head)
            if self.pid is None:
                return (kind, b"")
            rest = bytes(self._stderr_head)
            self._stderr_head.clear()
            return (kind, rest)
        return got

    @property
    def eof(self) -> bool:
        """True once the command's output ended."""
        return self.stream.eof

    def kill(self) -> None:
        """Kill the command's whole process group (shell built-ins only)."""
        kill_group(self.api, self.container, self.user, self.pid)

    def exit_code(self, wait: float = 2.0) -> int | None:
        """The exit code once the exec finished, else None."""
        deadline = time.monotonic() + wait
        while True:
            try:
                info = self.api.exec_inspect(self.exec_id)
            except Exception:
                return None
            if not info.get("Running"):
                code = info.get("ExitCode")
                return int(code) if code is not None else None
            if time.monotonic() > deadline:
                return None
            time.sleep(0.02)


class DockerProcess:
    """A long-running process in a container with piped stdio (for stdio MCP servers).

    Standard error is read and discarded so the process never blocks on it.
    """

    def __init__(self, execution: _Exec) -> None:
        self._exec = execution
        self._lines = bytearray()
        self._read_lock = asyncio.Lock()
        self._code: int | None = None
        self._done = False

    def _read_line(self) -> bytes:
        while True:
            newline = self._lines.find(b"\n")
            if newline >= 0:
                line = bytes(self._lines[: newline + 1])
                del self._lines[: newline + 1]
                return line
            if self._exec.stream.eof:
                rest = bytes(self._lines)
                self._lines.clear()
                return rest
            got = self._exec.frame(_POLL)
            if got is not None and got[0] == STDOUT:
                self._lines += got[1]

    async def write(self, data: bytes) -> None:
        """Write to the process's stdin."""
        if self._done:
            raise BackendError("the process was terminated; it cannot take input")
        try:
            await run_blocking(self._exec.stream.send, data)
        except OSError as exc:
            raise BackendError(f"cannot write to {self._exec.argv[0]!r}: {exc}") from exc

    async def readline(self) -> bytes:
        """One line of stdout; ``b""`` at end of stream."""
        if self._done:
            return b""
        async with self._read_lock:
            return await run_blocking(self._read_line)

    async def terminate(self) -> int | None:
        """Stop the process and its children; return its exit code (None when killed)."""
        if self._done:
            return self._code
        self._done = True

        def _stop() -> int | None:
            self._exec.stream.close_stdin()
            code = None if not self._exec.stream.eof else self._exec.exit_code(0.2)
            if code is None:
                self._exec.kill()
                self._exec.exit_code(KILL_GRACE_SECONDS)
            self._exec.stream.close()
            return code

        self._code = await asyncio.shield(run_blocking(_stop))
        return self._code


class DockerSandbox(BaseSandbox):
    """One trial's container: its first command runs on the container's main process (see
    :mod:`vally_backends.docker.channel`), the others via ``docker exec``; files move as tar
    streams.

    All file paths are relative to :attr:`workdir` (or absolute inside it); anything
    resolving outside the workspace is refused with :class:`~vally.errors.PathEscapeError`.
    The sandbox needs ``/bin/sh`` in the image (every command runs under a tiny wrapper that
    lets timeouts kill the whole process tree).

    Args:
        api: A docker ``APIClient``.
        info: The container this sandbox owns.
        workdir: The workspace inside the container.
        memory: The memory limit, for error messages.
        keep_workspace: Copy the workspace to this host folder at close.
        env: The trial's environment variables, given to every command (a command's own
            ``env`` wins); they are not part of the container, so a container created
            before its trial is known can serve any trial.
        on_close: Called with the sandbox once its container was removed (or its removal
            failed): the backend's bookkeeping.
        fresh: Makes a new sandbox in a fresh container of the run's image, with nothing
            in its workspace (see :meth:`open_fresh`); None when the backend cannot.
    """

    def __init__(
        self,
        api: Any,
        info: ContainerInfo,
        *,
        workdir: str,
        memory: str = "",
        keep_workspace: Path | None = None,
        env: Mapping[str, str] | None = None,
        on_close: Callable[[DockerSandbox], None] | None = None,
        cgroups: CgroupLocator | None = None,
        fresh: Callable[[], Awaitable[DockerSandbox]] | None = None,
    ) -> None:
        self.workdir: str = workdir
        self.host_workdir: Path | None = None
        self.info = info
        self._api = api
        self._memory = memory
        self._keep = keep_workspace
        self._env = dict(env or {})
        self._on_close = on_close
        self._cgroups = cgroups
        self._fresh = fresh
        self._processes: list[DockerProcess] = []
        self._channel_lock = threading.Lock()
        self._channel_free = info.channel
        self._channel: ExecStream | None = None
        self._channel_ended = False
        self._oom_seen = 0
        self._cgroup_oom_seen = 0
        self._closed = False
        self._close_task: asyncio.Future[None] | None = None

    @property
    def container_id(self) -> str:
        """The id of the trial's container."""
        return self.info.id

    @property
    def metadata(self) -> dict[str, Any]:
        """Facts recorded with the trial (``trajectory.metadata.extra.sandbox``): container,
        image, user, warnings and what the disk limit bounds."""
        return {
            "backend": "docker",
            "container": self.info.id[:12],
            "image": self.info.image,
            "user": self.info.user,
            "warnings": list(self.info.warnings),
            "disk": dict(self.info.disk),
        }

    # ----------------------------------------------------------------- paths

    def resolve(self, path: str) -> str:
        """The absolute container path of a workspace path.

        Raises:
            PathEscapeError: The path lies outside the workspace (checked on the normalised
                path; links inside the container never reach the host).
        """
        joined = posixpath.normpath(posixpath.join(self.workdir, str(path)))
        if not within(joined, self.workdir):
            raise outside_workspace(
                path, self.workdir, "use a path relative to the workspace without '..'"
            )
        return joined

    def _relative(self, absolute: str) -> str:
        return posixpath.relpath(absolute, self.workdir)

    def _check_open(self) -> None:
        if self._closed:
            raise BackendError(f"the sandbox of container {self.info.id[:12]} is closed")

    # ----------------------------------------------------------------- commands

    async def run_command(self, request: ExecRequest) -> ExecResult:
        """Run a command in the container and wait for it (see :class:`vally.Sandbox`).

        A timeout or a cancellation kills the command's whole process group inside the
        container. Output beyond ``output_limit`` bytes per stream is read and dropped.

        Raises:
            BackendError: The command could not be started (no such program, no ``/bin/sh``
                in the image, container gone).
            OutOfMemoryError: The command was killed by the out-of-memory killer.
        """
        result = await self._command(request)
        if result.exit_code == 137 and not result.timed_out and await self._oom_happened():
            raise OutOfMemoryError(
                f"{shlex.join(str(a) for a in request.argv)!r} was killed by the out-of-memory "
                f"killer in container {self.info.id[:12]} (memory limit "
                f"{self._memory or 'unset'})",
                result=result,
                hint="raise the limit with --backend-args memory=<size> (e.g. memory=4g)",
            )
        return result

    async def _command(self, request: ExecRequest) -> ExecResult:
        """Run a command and wait for it, killing its process group on a timeout or a
        cancellation; its exit status is not looked into (see :meth:`run_command`)."""
        workdir = self._command_workdir(request)
        cancel = threading.Event()
        started = time.monotonic()
        task = asyncio.ensure_future(run_blocking(self._run, request, workdir, cancel))
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError:
            cancel.set()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(task), KILL_GRACE_SECONDS + 5)
            raise
        return replace(result, duration_ms=int((time.monotonic() - started) * 1000))

    def _command_workdir(self, request: ExecRequest) -> str:
        """The command's working directory, once the sandbox is known open and the command
        is not empty."""
        self._check_open()
        if not request.argv:
            raise BackendError("cannot run an empty command")
        return self.resolve(request.cwd) if request.cwd else self.workdir

    def _command_env(self, request: ExecRequest) -> dict[str, str]:
        """The trial's variables overlaid with the command's own."""
        return {**self._env, **{str(k): str(v) for k, v in (request.env or {}).items()}}

    def _run(self, request: ExecRequest, workdir: str, cancel: threading.Event) -> ExecResult:
        with self._channel_lock:
            first, self._channel_free = self._channel_free, False
        if first:
            result = self._run_on_channel(request, workdir, cancel)
            if result is not None:
                return result
        argv = request.argv
        try:
            execution = _Exec(
                self._api,
                self.info.id,
                self.info.user,
                argv,
                env=self._command_env(request),
                cwd=workdir,
                stdin=request.stdin is not None,
            )
        except Exception as exc:
            raise BackendError(
                f"cannot start {argv[0]!r} in container {self.info.id[:12]}: {exc}",
                hint="the container may have been removed or the engine stopped",
            ) from exc
        if request.stdin is not None:
            threading.Thread(
                target=_feed, args=(execution.stream, request.stdin), daemon=True
            ).start()
        out, err = bytearray(), bytearray()
        try:
            timed_out, truncated = _pump(execution, request, cancel, out, err)
        finally:
            execution.stream.close()
        code = None if timed_out or cancel.is_set() else execution.exit_code()
        return self._result(argv, execution.pid, code, out, err, timed_out, truncated)

    def _run_on_channel(
        self, request: ExecRequest, workdir: str, cancel: threading.Event
    ) -> ExecResult | None:
        """Run the sandbox's first command on the container's main process (see
        :mod:`vally_backends.docker.channel`); None when it has to go through ``docker
        exec`` instead (the script cannot carry it, the attach failed, or the command could
        not be started that way)."""
        token = new_token()
        script = channel_script(
            [str(a) for a in request.argv],
            cwd=workdir,
            env=self._command_env(request),
            stdin=request.stdin,
            wrapper=WRAPPER,
            token=token,
        )
        if script is None:
            return None
        try:
            stream = ExecStream(
                self._api.attach_socket(
                    self.info.id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
                )
            )
            self._channel = stream
            stream.send(script)
        except Exception:
            return None
        command = ChannelCommand(
            stream, token, lambda pid: kill_group(self._api, self.info.id, self.info.user, pid)
        )
        out, err = bytearray(), bytearray()
        timed_out, truncated = _pump(command, request, cancel, out, err)
        if not command.started:
            return None
        code = None if timed_out or cancel.is_set() else command.exit_code()
        self._channel_ended = code is not None
        return self._result(request.argv, command.pid, code, out, err, timed_out, truncated)

    def _result(
        self,
        argv: Sequence[str],
        pid: int | None,
        code: int | None,
        out: bytearray,
        err: bytearray,
        timed_out: bool,
        truncated: bool,
    ) -> ExecResult:
        """The command's result from what was read of it.

        Raises:
            BackendError: The wrapper could not run (no ``/bin/sh``), or the program was not
                found.
        """
        if pid is None and code is not None and code in (126, 127):
            raise BackendError(
                f"cannot run commands in container {self.info.id[:12]} of image "
                f"{self.info.image!r}: {err.decode('utf-8', 'replace').strip()}",
                hint="the docker backend needs /bin/sh in the image",
            )
        stderr = err.decode("utf-8", errors="replace")
        if code == 127 and stderr.rstrip().endswith(f"{argv[0]}: not found"):
            raise BackendError(
                f"cannot start {argv[0]!r} in container {self.info.id[:12]}: not found",
                hint="check that the program is installed in the image and on its PATH",
            )
        return ExecResult(
            exit_code=code,
            stdout=out.decode("utf-8", errors="replace"),
            stderr=stderr,
            timed_out=timed_out,
            truncated=truncated,
            signal=code - 128 if code is not None and code in SIGNAL_EXITS else None,
        )

    async def _oom_happened(self) -> bool:
        """Whether the out-of-memory killer killed a process in the container since the
        last command that was checked.

        The container's own counter decides when it can be read (:data:`OOM_KILLS_SCRIPT`,
        one short exec). Otherwise the engine's out-of-memory events are counted; the
        engine publishes one a moment after the kill, which a command's exit status can
        outrun, so they are looked for again for up to :data:`OOM_EVENT_WAIT_SECONDS`."""
        kills = await self._cgroup_oom_kills()
        if kills is not None:
            new = kills - self._cgroup_oom_seen
            self._cgroup_oom_seen = kills
            self._oom_seen += max(0, new)  # their events, should the counter become unreadable
            return new > 0
        deadline = time.monotonic() + OOM_EVENT_WAIT_SECONDS
        while True:
            count = await self._oom_count()
            if count is None:
                return False
            if count > self._oom_seen:
                self._oom_seen = count
                return True
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.05)

    async def _cgroup_oom_kills(self) -> int | None:
        """The container's out-of-memory kill counter, or None when it cannot be read (the
        container is gone, or its memory cgroup is not visible inside it)."""
        argv = ["/bin/sh", "-c", OOM_KILLS_SCRIPT, "oom-kills"]
        try:  # not through run_command: its own exit status is not checked again
            result = await self._command(ExecRequest(argv, timeout=30))
        except Exception:
            return None
        text = result.stdout.strip()
        return int(text) if result.exit_code == 0 and text.isdigit() else None

    async def _oom_count(self) -> int | None:
        """How many out-of-memory kills the engine reported for the container so far (None
        when it could not be asked)."""

        def _count() -> int:
            events = self._api.events(
                since=int(self.info.started_at) - 1,
                until=f"{time.time():.9f}",
                filters={"container": self.info.id, "event": "oom"},
                decode=True,
            )
            try:
                return sum(1 for _ in events)
            finally:
                with contextlib.suppress(Exception):
                    events.close()

        try:
            return await run_blocking(_count)
        except Exception:
            return None

    async def start_process(self, request: ExecRequest) -> Process:
        """Start a long-running process with piped stdin/stdout; it is stopped at close."""
        workdir = self._command_workdir(request)
        argv, env = request.argv, self._command_env(request)

        def _start() -> _Exec:
            return _Exec(
                self._api, self.info.id, self.info.user, argv, env=env, cwd=workdir, stdin=True
            )

        try:
            execution = await run_blocking(_start)
        except Exception as exc:
            raise BackendError(
                f"cannot start {argv[0]!r} in container {self.info.id[:12]}: {exc}"
            ) from exc
        process = DockerProcess(execution)
        self._processes.append(process)
        return process

    async def stop_processes(self) -> None:
        """Kill every process in the container but its init (see :data:`STOP_SCRIPT`) and
        return once none is left; spawned processes are stopped first.

        Raises:
            BackendError: Processes could not be stopped (the container is gone, or a
                process survived every round).
        """
        self._check_open()
        for process in self._processes:
            with contextlib.suppress(Exception):
                await process.terminate()
        self._processes.clear()
        if await self._only_own_processes_left():
            return
        argv = ["/bin/sh", "-c", STOP_SCRIPT, "stop-processes"]
        result = await self.exec(argv, timeout=60)
        if result.exit_code != 0:
            raise BackendError(
                f"cannot stop the processes in container {self.info.id[:12]}: "
                f"{result.stderr.strip() or 'exit code ' + str(result.exit_code)}",
                hint="the container may have been removed or its process table is full",
            )

    async def _only_own_processes_left(self) -> bool:
        """Whether the container runs nothing but its own processes: its init (when it has
        one) and its main process, the keeper. Counted from the container's cgroup files
        when this host has them (see :mod:`vally_backends.docker.cgroups`), else asked of
        the engine (``docker top``, the same cgroup's processes, for which the engine runs
        ``ps`` on its host); False when neither can tell.

        Counting is enough: the keeper and the init live as long as the container does
        (the init ends with its one child; a keeper that is process 1 ignores every signal
        sent from inside), and everything else, an orphan reparented to process 1
        included, is one process more, and so is anything a command of this sandbox still
        runs (a zombie is listed by neither: it has already stopped). Only a container
        with a keeper (``channel``) is checked this way."""
        if not self.info.channel:
            return False
        own = 2 if self.info.init else 1

        def _count() -> int:
            if self._cgroups is not None:
                counted = self._cgroups.processes(self.info.id, self._main_pid)
                if counted is not None:
                    return counted
            listing = self._api.top(self.info.id, ps_args="-o pid")
            return len(listing.get("Processes") or [])

        try:
            return await run_blocking(_count) == own
        except Exception:
            return False

    def _main_pid(self) -> int:
        """The host pid of the container's process 1 (its init, or the keeper)."""
        return int(self._api.inspect_container(self.info.id)["State"]["Pid"])

    # ----------------------------------------------------------------- files

    def _put(self, builder: TarBuilder) -> None:
        archive = builder.finish()
        try:
            self._api.put_archive(self.info.id, self.workdir, archive)
        finally:
            archive.close()

    def _builder(self) -> TarBuilder:
        return TarBuilder(self.info.uid, self.info.gid)

    def _get(self, absolute: str) -> tuple[Any, dict[str, Any]]:
        import docker.errors

        try:
            stream, stat = self._api.get_archive(self.info.id, absolute)
        except docker.errors.NotFound as exc:
            raise FileNotFoundError(f"no such file in the workspace: {absolute}") from exc
        return spool(stream), stat

    async def read_file(self, path: str) -> bytes:
        """Read a workspace file (links inside the workspace are followed).

        Raises:
            FileNotFoundError: The file is absent.
            IsADirectoryError: The path is a folder.
            PathEscapeError: The path, or a link on it, leads outside the workspace.
        """
        self._check_open()
        absolute = self.resolve(path)
        return await run_blocking(self._read, absolute, path)

    def _read(self, absolute: str, shown: str) -> bytes:
        for _ in range(20):
            archive, _stat = self._get(absolute)
            with archive:
                for tar, member in members(archive):
                    if member.isdir():
                        raise IsADirectoryError(f"{shown!r} is a folder, not a file")
                    if member.issym():
                        target = link_target(absolute, member.linkname)
                        if not within(target, self.workdir):
                            raise PathEscapeError(
                                f"{shown!r} is a link to {member.linkname!r}, outside the "
                                f"workspace {self.workdir}"
                            )
                        absolute = target
                        break
                    source = tar.extractfile(member)
                    if source is None:
                        raise FileNotFoundError(f"{shown!r} is not a regular file")
                    data: bytes = source.read()
                    return data
                else:
                    raise FileNotFoundError(f"no such file in the workspace: {shown}")
        raise PathEscapeError(f"{shown!r}: too many levels of symbolic links")

    async def write_file(self, path: str, data: bytes) -> None:
        """Create or replace a workspace file (owned by the sandbox user), creating parent
        folders."""
        self._check_open()
        rel = self._relative(self.resolve(path))
        if rel == ".":
            raise IsADirectoryError("cannot write the workspace folder itself as a file")

        def _write() -> None:
            builder = self._builder()
            builder.add_parents(rel)
            builder.add_bytes(rel, bytes(data))
            self._put(builder)

        await run_blocking(_write)

    async def list_files(self, path: str = ".") -> list[str]:
        """Every regular file below ``path`` as sorted workspace-relative POSIX paths.

        Links are neither followed nor listed; ``.git`` and ``node_modules`` are skipped.
        Uses ``find`` in the container when it has one, else walks a tar of the folder.
        """
        return await self._find(path, "f")

    async def list_links(self, path: str = ".") -> list[str]:
        """Every symbolic link below ``path`` (to a file or a folder, inside the workspace
        or not, dangling or not) as sorted workspace-relative POSIX paths, never followed;
        ``.git`` and ``node_modules`` are skipped. Uses ``find`` in the container when it has
        one, else walks a tar of the folder."""
        return await self._find(path, "l")

    async def _find(self, path: str, kind: Literal["f", "l"]) -> list[str]:
        """The entries of ``find -type KIND`` below ``path`` (``f``: regular files, with
        ``path`` itself when it is one; ``l``: symbolic links), sorted and relative."""
        self._check_open()
        absolute = self.resolve(path)
        prune = " -o ".join(f"-name {name}" for name in SKIPPED_DIRS)
        itself = '[ -f "$1" ] && printf "%s\\0" "$1"; ' if kind == "f" else ""
        script = (
            f'[ -e "$1" ] || exit 0; find "$1" -mindepth 1 \\( {prune} \\) -prune '
            f"-o -type {kind} -print0; {itself}true"
        )
        result = await self.exec(
            ["sh", "-c", script, "list-files", absolute], output_limit=256 * 1024 * 1024
        )
        if result.exit_code == 0 and not result.truncated and "not found" not in result.stderr:
            found = [p for p in result.stdout.split("\0") if p]
            return sorted(self._relative(posixpath.normpath(p)) for p in found)
        return await run_blocking(self._walk, absolute, kind)

    def _walk(self, absolute: str, kind: Literal["f", "l"]) -> list[str]:
        """:meth:`_find` without ``find``: the members of a tar of ``absolute``."""
        try:
            archive, _stat = self._get(absolute)
        except FileNotFoundError:
            return []
        parent = posixpath.dirname(absolute)
        found: list[str] = []
        with archive:
            for _tar, member in members(archive):
                name = posixpath.normpath(member.name)
                parts = name.split("/")[1:]
                if any(part in SKIPPED_DIRS for part in parts):
                    continue
                wanted = member.isfile() if kind == "f" else bool(parts) and member.issym()
                if wanted:
                    found.append(self._relative(posixpath.join(parent, name)))
        return sorted(found)

    async def copy_in(self, host_src: Path, dest: str) -> None:
        """Copy a host file or folder (recursively, links kept as links) to ``dest``."""
        self._check_open()
        source = Path(host_src)
        if not source.exists() and not source.is_symlink():
            raise FileNotFoundError(f"no such file or folder: {source}")
        rel = self._relative(self.resolve(dest))

        def _copy() -> None:
            builder = self._builder()
            if rel != ".":
                builder.add_parents(rel)
            builder.add_host_path(source, rel)
            self._put(builder)

        await run_blocking(_copy)

    async def copy_out(self, src: str, host_dest: Path) -> None:
        """Copy a workspace file or folder to the host. Links pointing outside the copied
        tree (and so outside the workspace) are skipped, never followed."""
        self._check_open()
        absolute = self.resolve(src)
        await run_blocking(self._copy_out, absolute, Path(host_dest))

    def _copy_out(self, absolute: str, host_dest: Path) -> None:
        for _ in range(20):
            archive, stat = self._get(absolute)
            with archive:
                link = stat.get("linkTarget") or ""
                mode = int(stat.get("mode", 0))
                if mode & (1 << 27) and link:  # the copied path itself is a link
                    target = link_target(absolute, link)
                    if not within(target, self.workdir):
                        raise PathEscapeError(
                            f"{self._relative(absolute)!r} links outside the workspace"
                        )
                    absolute = target
                    continue
                name = posixpath.basename(absolute) or "."
                extract_confined(
                    archive,
                    archive_parent=posixpath.dirname(absolute),
                    root_name=stat.get("name") or name,
                    host_dest=host_dest,
                    confine=self.workdir,
                )
                return
        raise PathEscapeError(f"{absolute!r}: too many levels of symbolic links")

    # ----------------------------------------------------------------- fresh copy

    async def open_fresh(self) -> DockerSandbox:
        """A new sandbox in a fresh container of the run's image (same user, limits,
        network and trial environment) whose workspace holds a copy of this one's: its
        folders, regular files and links (see
        :func:`~vally_backends.docker.archive.copy_tree_archive`), nothing else of this
        container. Nothing that ran here runs there, and every file outside the workspace
        is the image's own, so a verifier run there uses the image's programs whatever
        this container's processes did to theirs. Close it like any sandbox.

        Raises:
            BackendError: The backend gives this sandbox no fresh containers, or the copy
                failed.
        """
        self._check_open()
        if self._fresh is None:
            raise BackendError(
                f"the sandbox of container {self.info.id[:12]} cannot open a fresh container"
            )
        fresh = await self._fresh()
        try:
            await run_blocking(self._copy_workspace_to, fresh.info.id)
        except BaseException as exc:
            with contextlib.suppress(Exception):
                await fresh.close()
            if isinstance(exc, Exception) and not isinstance(exc, BackendError):
                raise BackendError(
                    f"cannot copy the workspace of container {self.info.id[:12]} to a fresh "
                    f"container: {exc}"
                ) from exc
            raise
        return fresh

    def _copy_workspace_to(self, container: str) -> None:
        """Copy this workspace into ``container``'s, as one archive each way."""
        try:
            archive, _stat = self._get(self.workdir)
        except FileNotFoundError:
            return  # the workspace folder is gone: the fresh one stays empty
        with archive:
            copied = copy_tree_archive(archive, posixpath.basename(self.workdir))
        try:
            self._api.put_archive(container, posixpath.dirname(self.workdir), copied)
        finally:
            copied.close()

    # ----------------------------------------------------------------- close

    async def close(self) -> None:
        """Stop spawned processes and remove the container, whatever happened.

        The removal is shielded from cancellation: Ctrl-C during a run still removes the
        container before the cancellation propagates.

        Raises:
            CleanupError: The container could not be removed.
        """
        if self._close_task is None:
            self._closed = True
            self._close_task = asyncio.ensure_future(self._close())
        cancelled = False
        while not self._close_task.done():
            try:
                await asyncio.shield(self._close_task)
            except asyncio.CancelledError:
                cancelled = True  # finish removing the container first
        if cancelled:
            raise asyncio.CancelledError
        self._close_task.result()

    async def _close(self) -> None:
        problems: list[str] = []
        for process in self._processes:
            with contextlib.suppress(Exception):
                await process.terminate()
        if self._keep is not None:
            try:
                await run_blocking(self._copy_out, self.workdir, self._keep)
            except Exception as exc:
                problems.append(f"cannot copy the workspace to {self._keep}: {exc}")
        try:
            await run_blocking(self._remove)
        except Exception as exc:
            problems.append(f"cannot remove container {self.info.id[:12]}: {exc}")
        finally:
            if self._on_close is not None:
                self._on_close(self)
        if problems:
            raise CleanupError(
                "; ".join(problems),
                hint="remove leftovers with 'vally docker prune' "
                f"or 'docker rm -f {self.info.id[:12]}'",
            )

    def _remove(self) -> None:
        import docker.errors

        channel = self._channel
        if channel is not None:
            # The main process ends once its input closes; a container that stopped by
            # itself is removed without a kill.
            channel.close_stdin()
            if self._channel_ended:
                with contextlib.suppress(Exception):
                    self._api.wait(self.info.id, timeout=CHANNEL_EXIT_SECONDS)
            channel.close()
        try:
            self._api.remove_container(self.info.id, force=True, v=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if "already in progress" not in str(exc):
                raise
        if self.info.volume is not None:
            with contextlib.suppress(docker.errors.NotFound):
                self._api.remove_volume(self.info.volume, force=True)


def _pump(
    execution: _Output,
    request: ExecRequest,
    cancel: threading.Event,
    out: bytearray,
    err: bytearray,
) -> tuple[bool, bool]:
    """Read the command's output into ``out`` and ``err`` until it ends; past its timeout
    (or once ``cancel`` is set) kill its process group and read a little longer. Returns
    (timed out, output truncated)."""
    truncated = False
    timed_out = False
    deadline = None if request.timeout is None else time.monotonic() + request.timeout
    kill_deadline: float | None = None
    expired_at: float | None = None
    while not execution.eof:
        now = time.monotonic()
        expired = cancel.is_set() or (deadline is not None and now >= deadline)
        if expired and expired_at is None:
            expired_at = now
        # The pid arrives with the first stderr frame; wait a moment for it so the
        # kill reaches the process group even when the timeout is tiny.
        pid_known = execution.pid is not None or (
            expired_at is not None and now >= expired_at + KILL_GRACE_SECONDS
        )
        if kill_deadline is None and expired and pid_known:
            timed_out = not cancel.is_set()
            execution.kill()
            kill_deadline = now + KILL_GRACE_SECONDS
        if kill_deadline is not None and now >= kill_deadline:
            break
        if expired:
            limit: float | None = kill_deadline or (expired_at or now) + KILL_GRACE_SECONDS
        else:
            limit = deadline
        wait = _POLL if limit is None else max(0.01, min(_POLL, limit - now))
        got = execution.frame(wait)
        if got is not None:
            kind, data = got
            sink = out if kind == STDOUT else err
            truncated = append_capped(sink, data, request.output_limit) or truncated
    return timed_out, truncated


def _feed(stream: ExecStream, data: bytes) -> None:
    try:
        if data:
            stream.send(data)
    except OSError:
        pass
    finally:
        stream.close_stdin()
