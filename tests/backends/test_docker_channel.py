"""The docker backend's command channel: the container's main process runs the sandbox's
first command, read from its standard input, instead of a ``docker exec``.

The keeper script is run by this machine's shells first (``/bin/sh`` and busybox's), fed
the scripts the sandbox sends, so what reaches the command (arguments, variables, folder,
input bytes, session) is checked exactly; then in real containers: the first command runs on
the main process, a hostile one cannot make it run anything else, and a sandbox whose
command ended is removed without a kill.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from vally_backends.docker.channel import (
    END_LINE,
    KEEPER_SCRIPT,
    SCRIPT_LIMIT,
    ChannelCommand,
    channel_script,
)
from vally_backends.docker.sandbox import WRAPPER
from vally_backends.docker.stream import STDERR, STDOUT, take_pid_line

SHELLS = [["/bin/sh"]] + ([["/bin/busybox", "sh"]] if Path("/bin/busybox").is_file() else [])

PROBE = (
    "import json, os, sys; data = sys.stdin.buffer.read(); "
    "print(json.dumps({'argv': sys.argv[1:], 'v': os.environ.get('V'), "
    "'w': os.environ.get('W'), 'cwd': os.getcwd(), 'stdin': data.hex(), "
    "'pid': os.getpid(), 'sid': os.getsid(0)}))"
)
"""Reports what the command was given."""


class FrameStream:
    """Hands out recorded output as attach frames of at most ``size`` bytes, standard
    error and standard output taking turns."""

    def __init__(self, stdout: bytes, stderr: bytes, size: int) -> None:
        pieces = {
            kind: [data[i : i + size] for i in range(0, len(data), size)]
            for kind, data in ((STDOUT, stdout), (STDERR, stderr))
        }
        self._frames: list[tuple[int, bytes]] = []
        while pieces[STDOUT] or pieces[STDERR]:
            for kind in (STDERR, STDOUT):
                if pieces[kind]:
                    self._frames.append((kind, pieces[kind].pop(0)))
        self.eof = False

    def next_frame(self, wait: float) -> tuple[int, bytes] | None:
        if not self._frames:
            self.eof = True
            return None
        return self._frames.pop(0)


def _keeper(shell: list[str], script: bytes) -> tuple[bytes, bytes]:
    """Run the keeper script under ``shell`` with ``script`` as its whole input."""
    proc = subprocess.run(
        [*shell, "-c", KEEPER_SCRIPT], input=script, capture_output=True, timeout=60
    )
    assert proc.returncode == 0, proc
    return proc.stdout, proc.stderr


def _read(
    stdout: bytes, stderr: bytes, token: str, size: int = 3
) -> tuple[ChannelCommand, bytes, bytes]:
    """Read recorded keeper output as the sandbox does, in frames of ``size`` bytes."""
    command = ChannelCommand(FrameStream(stdout, stderr, size), token, lambda pid: None)  # type: ignore[arg-type]
    out, err = bytearray(), bytearray()
    while not command.eof:
        got = command.frame(0.0)
        if got is not None:
            (out if got[0] == STDOUT else err).extend(got[1])
    return command, bytes(out), bytes(err)


@pytest.mark.parametrize("shell", SHELLS, ids=lambda s: s[-1] if len(s) == 1 else s[0])
def test_the_command_gets_exactly_its_arguments_variables_folder_and_input(
    shell: list[str], tmp_path: Path
) -> None:
    if shutil.which("setsid") is None:
        pytest.skip("this machine has no setsid")
    args = ["it's", "two\nlines", "  spaced  ", "back\\slash", '$HOME `x` "q"', "ünï ✓", ""]
    stdin = b"\x00nul\\0047 'q' %s %b \\n\nno newline at the end\x01\xff"
    token = "vally-end-test"
    script = channel_script(
        [sys.executable, "-c", PROBE, *args],
        cwd=str(tmp_path),
        env={"V": "a 'quoted'\nvalue\n", "W": ""},
        stdin=stdin,
        wrapper=WRAPPER,
        token=token,
    )
    assert script is not None
    command, out, err = _read(*_keeper(shell, script), token)
    assert command.started and command.exit_code() == 0, (out, err)
    seen = json.loads(out)
    assert seen["argv"] == args
    assert seen["v"] == "a 'quoted'\nvalue\n" and seen["w"] == ""
    assert Path(seen["cwd"]) == tmp_path
    assert bytes.fromhex(seen["stdin"]) == stdin
    assert seen["sid"] == seen["pid"] == command.pid  # a session of its own, pid reported
    assert err == b""


@pytest.mark.parametrize("shell", SHELLS, ids=lambda s: s[-1] if len(s) == 1 else s[0])
def test_exit_status_signals_and_no_input(shell: list[str], tmp_path: Path) -> None:
    for argv, expected in (
        (["sh", "-c", "printf partial; echo oops >&2; exit 7"], 7),
        (["sh", "-c", "kill -9 $$"], 137),
        (["sh", "-c", "cat; echo read-nothing"], 0),
    ):
        script = channel_script(
            argv, cwd=str(tmp_path), env={}, stdin=None, wrapper=WRAPPER, token="T0K"
        )
        assert script is not None
        command, out, err = _read(*_keeper(shell, script), "T0K", size=2)
        assert command.exit_code() == expected, (argv, out, err)
        if expected == 7:
            assert (out, err) == (b"partial", b"oops\n")
        if expected == 0:
            assert out == b"read-nothing\n"


def test_a_folder_that_cannot_be_entered_is_reported_and_nothing_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    script = channel_script(
        ["touch", str(marker)], cwd=str(tmp_path / "missing"), env={}, stdin=None,
        wrapper=WRAPPER, token="T0K",
    )  # fmt: skip
    assert script is not None
    command, out, err = _read(*_keeper(["/bin/sh"], script), "T0K")
    assert not command.started and command.exit_code() is None
    assert (out, err) == (b"", b"") and not marker.exists()


def test_only_the_first_script_runs_and_the_keeper_ends_with_its_input(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    scripts = [
        channel_script(
            ["touch", str(path)], cwd=str(tmp_path), env={}, stdin=None, wrapper=WRAPPER, token="T"
        )
        for path in (first, second)
    ]
    assert scripts[0] is not None and scripts[1] is not None
    _keeper(["/bin/sh"], scripts[0] + scripts[1] + b"touch /nowhere\n")
    assert first.exists() and not second.exists()


def test_what_the_channel_cannot_carry_goes_to_docker_exec() -> None:
    def script(
        argv: list[str], env: dict[str, str] | None = None, stdin: bytes | None = None
    ) -> bytes | None:
        return channel_script(
            argv, cwd="/workspace", env=env or {}, stdin=stdin, wrapper=WRAPPER, token="T"
        )

    assert script(["true"]) is not None
    assert script(["true"], env={"NOT-A-NAME": "x"}) is None
    assert script(["true"], env={"1X": "x"}) is None
    assert script(["printf", "a\0b"]) is None
    assert script(["echo", f"x\n{END_LINE}\ny"]) is None
    assert script(["echo", "\udcff"]) is None  # not UTF-8
    assert script(["cat"], stdin=b"x" * SCRIPT_LIMIT) is None
    assert script(["cat"], stdin=b"x" * 1000) is not None


def test_the_reader_finds_marks_split_across_frames_and_drops_what_follows() -> None:
    token = "vally-end-0123"
    stdout = b"no newline" + token.encode() + b" 3\nlate output of a background process\n"
    stderr = b"4242\nwarning" + token.encode() + b"\nlater\n"
    for size in (1, 2, 5, 64):
        command, out, err = _read(stdout, stderr, token, size)
        assert (out, err, command.exit_code(), command.pid) == (b"no newline", b"warning", 3, 4242)


def test_a_first_stderr_line_that_is_no_pid_is_output() -> None:
    command, out, err = _read(b"T 0\n", b"sh: cannot run\nT\n", "T")
    assert (out, err) == (b"", b"sh: cannot run\n")
    assert command.pid == -1 and command.exit_code() == 0


def test_a_command_that_did_not_start_has_no_pid_line_and_reports_it() -> None:
    for size in (1, 3, 64):
        command, out, err = _read(b"T x\n", b"T\n", "T", size)
        assert (out, err, command.pid, command.started) == (b"", b"", None, False)


@pytest.mark.parametrize(
    ("head", "pid", "left"),
    [
        (b"", None, b""),
        (b"12", None, b"12"),  # the line is not complete yet
        (b"12\nout", 12, b"out"),
        (b"sh: not found\nmore", -1, b"sh: not found\nmore"),  # no wrapper: all is output
    ],
)
def test_the_pid_line_is_taken_only_when_complete_and_numeric(
    head: bytes, pid: int | None, left: bytes
) -> None:
    buffer = bytearray(head)
    assert take_pid_line(buffer) == pid
    assert bytes(buffer) == left


# ------------------------------------------------------------------ real containers

try:
    from tests.backends.docker_helpers import busybox_image, containers_of_run, docker_api
except ImportError:  # pragma: no cover - tests/backends is not a package
    from docker_helpers import busybox_image, containers_of_run, docker_api  # type: ignore[no-redef]

__all__ = ["busybox_image", "docker_api"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def backend_run(docker_api: Any) -> Iterator[str]:
    """A run id whose containers are removed after the test, whatever happened."""
    run_id = f"test-channel-{time.time_ns()}"
    yield run_id
    for item in containers_of_run(docker_api, run_id):
        docker_api.remove_container(item["Id"], force=True, v=True)


@contextlib.asynccontextmanager
async def _opened(image: str, run_id: str, **args: Any) -> AsyncIterator[Any]:
    """A docker sandbox of a backend started for ``run_id``; both closed afterwards."""
    from vally.contracts.protocols import TrialContext, TrialKey
    from vally.models.spec import EnvironmentConfig
    from vally_backends.docker.backend import DockerBackend
    from vally_backends.docker.config import Config

    backend = DockerBackend(Config.model_validate({"image": image, "pull": "never", **args}))
    await backend.start(run_id)
    trial = TrialContext(
        key=TrialKey("default", "ev", "stim", "m", 1),
        run_id=run_id,
        environment=EnvironmentConfig(),
        spec_dir=Path.cwd(),
    )
    sandbox = await backend.open(trial)
    try:
        yield sandbox
    finally:
        await sandbox.close()
        await backend.shutdown()


@pytest.mark.docker
@pytest.mark.anyio
@pytest.mark.parametrize("pool", ["0", "2"])
async def test_the_first_command_runs_on_the_main_process_and_the_next_through_exec(
    busybox_image: str, backend_run: str, pool: str
) -> None:
    async with _opened(busybox_image, backend_run, pool=pool) as sandbox:
        parent = "tr '\\0' ' ' < /proc/$PPID/cmdline; echo; cat; pwd; echo $GREETING"
        first = await sandbox.exec(
            ["sh", "-c", parent], stdin=b"from stdin\n", env={"GREETING": "hello there"}
        )
        assert first.exit_code == 0, first
        *cmdline, given, folder, greeting = first.stdout.splitlines()
        assert END_LINE in "\n".join(cmdline)  # the keeper started it
        assert (given, folder, greeting) == ("from stdin", sandbox.workdir, "hello there")
        second = await sandbox.exec(["sh", "-c", "echo $PPID"])
        assert second.stdout.strip() == "0"  # a docker exec: its parent is outside


@pytest.mark.docker
@pytest.mark.anyio
async def test_lines_an_agent_writes_into_the_keepers_input_never_run(
    busybox_image: str, backend_run: str
) -> None:
    async with _opened(busybox_image, backend_run, pool="0") as sandbox:
        inject = (
            "printf 'touch /workspace/pwned\\n" + END_LINE + "\\n' > /proc/$PPID/fd/0 "
            "&& echo injected"
        )
        first = await sandbox.exec(["sh", "-c", inject])
        assert first.exit_code == 0 and first.stdout == "injected\n", first
        await sandbox.stop_processes()
        after = await sandbox.exec(["sh", "-c", "ls -A /workspace; echo listed"])
        assert after.stdout == "listed\n"  # nothing ran, and the container lives on


@pytest.mark.docker
@pytest.mark.anyio
async def test_a_sandbox_whose_command_ended_stops_by_itself_before_removal(
    busybox_image: str, backend_run: str, docker_api: Any
) -> None:
    since = int(time.time()) - 1
    async with _opened(busybox_image, backend_run, pool="0") as sandbox:
        container = sandbox.container_id
        assert (await sandbox.exec(["true"])).exit_code == 0
    events = docker_api.events(
        since=since, until=f"{time.time():.9f}", filters={"container": container}, decode=True
    )
    seen = [event.get("status") or event.get("Action") for event in events]
    assert "die" in seen and "destroy" in seen, seen
    assert "kill" not in seen, seen
