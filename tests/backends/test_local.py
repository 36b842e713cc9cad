"""The ``local`` backend and workspace preparation, with real subprocesses and folders."""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from vally.contracts.protocols import TrialContext, TrialKey
from vally.engine.trials.workspace import prepare_workspace
from vally.errors import BackendError, PathEscapeError, SetupError
from vally.models.spec import EnvironmentConfig, FileEntry, GitConfig
from vally_backends import commands as commands_module, local as local_module
from vally_backends.local import LocalBackend, LocalSandbox

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _trial(
    environment: EnvironmentConfig | None = None,
    *,
    spec_dir: Path | None = None,
    keep: Path | None = None,
) -> TrialContext:
    return TrialContext(
        key=TrialKey("default", "ev", "stim", "m", 1),
        run_id="run-1",
        environment=environment or EnvironmentConfig(),
        spec_dir=spec_dir or Path.cwd(),
        keep_workspace=keep,
    )


async def _open(environment: EnvironmentConfig | None = None, **kwargs: object) -> LocalSandbox:
    backend = LocalBackend()
    return await backend.open(_trial(environment, **kwargs))  # type: ignore[arg-type]


def _alive(pid: int) -> bool:
    """True when ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in {"Z", "X"}


async def _dies(pid: int) -> bool:
    """True once ``pid`` is gone (signals are delivered asynchronously); False after 5 s."""
    for _ in range(500):
        if not _alive(pid):
            return True
        await asyncio.sleep(0.01)
    return False


# --------------------------------------------------------------------------- workspace


async def test_temp_workspace_is_created_and_removed() -> None:
    sandbox = await _open()
    root = Path(sandbox.workdir)
    assert root.is_dir()
    assert root.name.startswith("vally-eval-")
    assert sandbox.host_workdir is not None
    await sandbox.write_file("a/b.txt", b"hi")
    assert (root / "a" / "b.txt").read_bytes() == b"hi"
    await sandbox.close()
    assert not root.exists()


async def test_a_temp_workspace_has_no_symbolic_link_in_its_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The temporary folder is resolved once, not per workspace: a workspace made below a
    temporary folder reached through a symbolic link still has its real path."""
    import tempfile

    real = tmp_path / "real-tmp"
    real.mkdir()
    (tmp_path / "link-tmp").symlink_to(real)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "link-tmp"))
    sandbox = await _open()
    try:
        assert Path(sandbox.workdir).parent == real.resolve()
        assert sandbox.root == Path(sandbox.workdir).resolve()
    finally:
        await sandbox.close()


async def test_kept_workspace_is_cleared_at_open_and_kept_at_close(tmp_path: Path) -> None:
    keep = tmp_path / "ws" / "stim"
    keep.mkdir(parents=True)
    (keep / "stale.txt").write_text("old")
    (keep / "old-dir").mkdir()
    sandbox = await _open(keep=keep)
    assert Path(sandbox.workdir) == keep.resolve()
    assert list(keep.iterdir()) == []
    await sandbox.write_file("new.txt", b"x")
    await sandbox.close()
    assert (keep / "new.txt").read_text() == "x"


async def test_files_are_staged_and_escaping_dest_is_rejected(tmp_path: Path) -> None:
    src_file = tmp_path / "input.txt"
    src_file.write_text("data")
    src_dir = tmp_path / "fixtures"
    (src_dir / "sub").mkdir(parents=True)
    (src_dir / "sub" / "deep.txt").write_text("deep")
    env = EnvironmentConfig(
        files=[
            FileEntry(src=str(src_file), dest="in/input.txt"),
            FileEntry(src=str(src_dir)),
        ]
    )
    sandbox = await _open()
    try:
        assert await prepare_workspace(sandbox, env, setup_timeout=10) == []
        assert await sandbox.list_files() == ["fixtures/sub/deep.txt", "in/input.txt"]
        for bad in ("../outside.txt", "a/../../outside.txt", "/etc/evil"):
            escaping = EnvironmentConfig(files=[FileEntry(src=str(src_file), dest=bad)])
            with pytest.raises(PathEscapeError):
                await prepare_workspace(sandbox, escaping, setup_timeout=10)
        assert not (tmp_path / "outside.txt").exists()
        missing = EnvironmentConfig(files=[FileEntry(src=str(tmp_path / "nope"))])
        with pytest.raises(SetupError, match="does not exist"):
            await prepare_workspace(sandbox, missing, setup_timeout=10)
    finally:
        await sandbox.close()


async def test_skills_are_staged_under_the_skills_root(tmp_path: Path) -> None:
    skill = tmp_path / "my-skill"
    skill.mkdir()
    (skill / "SKILL.md").write_text("---\nname: greeter\ndescription: Greets people\n---\nBody\n")
    (skill / "helper.py").write_text("print('hi')\n")
    sandbox = await _open()
    try:
        refs = await prepare_workspace(
            sandbox, EnvironmentConfig(skills=[str(skill)]), setup_timeout=10
        )
        assert [(r.name, r.description) for r in refs] == [("greeter", "Greets people")]
        assert refs[0].sandbox_path == f"{sandbox.workdir}/.vally/skills/greeter"
        assert await sandbox.list_files(".vally") == [
            ".vally/skills/greeter/SKILL.md",
            ".vally/skills/greeter/helper.py",
        ]
        bad = tmp_path / "bad-skill"
        bad.mkdir()
        with pytest.raises(SetupError, match=r"SKILL\.md"):
            env = EnvironmentConfig(skills=[str(bad)])
            await prepare_workspace(sandbox, env, setup_timeout=5)
    finally:
        await sandbox.close()


async def test_setup_commands_run_in_order_and_failure_is_a_setup_error() -> None:
    sandbox = await _open()
    try:
        env = EnvironmentConfig(
            commands=["echo one > log.txt", "echo $GREETING >> log.txt"],
            env={"GREETING": "two"},
        )
        await prepare_workspace(sandbox, env, setup_timeout=10)
        assert (await sandbox.read_file("log.txt")).decode().split() == ["one", "two"]
        failing = EnvironmentConfig(commands=["echo boom-detail >&2; exit 3", "touch never"])
        with pytest.raises(SetupError) as info:
            await prepare_workspace(sandbox, failing, setup_timeout=10)
        message = str(info.value)
        assert "exit code 3" in message
        assert "boom-detail" in message
        assert "echo boom-detail" in message
        assert "never" not in await sandbox.list_files()
    finally:
        await sandbox.close()


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args],
        check=True,
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@example.invalid",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.invalid",
        },
    ).stdout


async def test_git_worktree_at_ref_is_created_and_removed(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "app.txt").write_text("v1\n")
    _git(repo, "add", "app.txt")
    _git(repo, "commit", "-q", "-m", "v1")
    _git(repo, "tag", "v1")
    (repo / "app.txt").write_text("v2\n")
    (repo / "later.txt").write_text("later\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "v2")

    env = EnvironmentConfig(git=GitConfig(source="repo", ref="v1"))
    sandbox = await _open(env, spec_dir=tmp_path)
    root = Path(sandbox.workdir)
    try:
        assert (await sandbox.read_file("app.txt")) == b"v1\n"
        assert await sandbox.list_files() == ["app.txt"]  # .git is skipped
        assert str(root) in _git(repo, "worktree", "list")
    finally:
        await sandbox.close()
    assert not root.exists()
    assert str(root) not in _git(repo, "worktree", "list")

    with pytest.raises(SetupError, match="no-such-ref"):
        await _open(
            EnvironmentConfig(git=GitConfig(source="repo", ref="no-such-ref")), spec_dir=tmp_path
        )


# --------------------------------------------------------------------------- exec


async def test_exec_timeout_kills_the_whole_process_tree(tmp_path: Path) -> None:
    sandbox = await _open()
    try:
        script = "sleep 1000 & echo $! > grandchild.pid; wait"
        result = await sandbox.exec(["sh", "-c", script], timeout=1.0)
        assert result.timed_out
        assert result.exit_code is None
        pid = int((await sandbox.read_file("grandchild.pid")).decode())
        assert await _dies(pid)
    finally:
        await sandbox.close()


async def test_processes_ignoring_sigterm_are_killed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(commands_module, "KILL_GRACE_SECONDS", 0.2)
    sandbox = await _open()
    try:
        script = "trap '' TERM; sleep 1000 & echo $! > stubborn.pid; wait; wait"
        result = await sandbox.exec(["sh", "-c", script], timeout=0.5)
        assert result.timed_out
        assert await _dies(int((await sandbox.read_file("stubborn.pid")).decode()))
    finally:
        await sandbox.close()


async def test_exec_cancellation_kills_the_process_tree() -> None:
    sandbox = await _open()
    try:
        task = asyncio.ensure_future(
            sandbox.exec(["sh", "-c", "sleep 1000 & echo $! > gc.pid; echo started; wait"])
        )
        root = Path(sandbox.workdir)
        for _ in range(500):
            if (root / "gc.pid").exists() and (root / "gc.pid").read_text().strip():
                break
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await _dies(int((root / "gc.pid").read_text()))
    finally:
        await sandbox.close()


async def test_exec_caps_huge_output_while_draining() -> None:
    sandbox = await _open()
    peak_before_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        result = await sandbox.exec(
            ["sh", "-c", "yes | head -c 100000000; echo done >&2"],
            output_limit=1000,
            timeout=60,
        )
        assert result.exit_code == 0
        assert result.truncated
        assert len(result.stdout) == 1000
        assert result.stdout.startswith("y\ny\n")
        assert result.stderr == "done\n"
        # 100 MB went through the pipe; the peak memory of this process barely moved.
        assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before_kb < 50_000
    finally:
        await sandbox.close()


async def test_exec_invalid_utf8_stdin_and_exit_code() -> None:
    sandbox = await _open()
    try:
        result = await sandbox.exec(
            [
                sys.executable,
                "-c",
                "import sys; sys.stdout.buffer.write(b'ok \\xff\\xfe end'); sys.exit(4)",
            ]
        )
        assert result.exit_code == 4
        assert result.stdout == "ok \ufffd\ufffd end"
        assert not result.truncated
        echoed = await sandbox.exec(["cat"], stdin=b"from stdin")
        assert echoed.stdout == "from stdin"
        with pytest.raises(BackendError, match="no-such-program"):
            await sandbox.exec(["no-such-program-xyz"])
    finally:
        await sandbox.close()


async def test_env_isolation_and_passthrough(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-secret")
    printer = ["sh", "-c", 'echo "key=${OPENAI_API_KEY:-unset} path=${PATH:+set} x=${X:-}"']
    backend = LocalBackend()
    sandbox = await backend.open(_trial(EnvironmentConfig(env={"X": "spec"})))
    try:
        result = await sandbox.exec(printer)
        assert result.stdout.strip() == "key=unset path=set x=spec"
        result = await sandbox.exec(printer, env={"X": "exec"})
        assert result.stdout.strip() == "key=unset path=set x=exec"
    finally:
        await sandbox.close()
    allowing = LocalBackend(LocalBackend.Config(env_passthrough=["PATH", "OPENAI_API_KEY"]))
    sandbox = await allowing.open(_trial())
    try:
        result = await sandbox.exec(printer)
        assert result.stdout.strip() == "key=sk-fake-secret path=set x="
    finally:
        await sandbox.close()


# --------------------------------------------------------------------------- files


async def test_file_ops_are_confined_and_links_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    sandbox = await _open()
    root = Path(sandbox.workdir)
    try:
        (root / "link-out").symlink_to(outside)
        (root / "dir-out").symlink_to(tmp_path, target_is_directory=True)
        (root / "node_modules" / "pkg").mkdir(parents=True)
        (root / "node_modules" / "pkg" / "index.js").write_text("x")
        await sandbox.write_file("src/main.py", b"print()")
        (root / "link-in").symlink_to(root / "src" / "main.py")
        for bad in ("../x", "/etc/passwd", "link-out", "dir-out/secret.txt"):
            with pytest.raises(PathEscapeError):
                await sandbox.read_file(bad)
        with pytest.raises(PathEscapeError):
            await sandbox.write_file("dir-out/new.txt", b"no")
        with pytest.raises(PathEscapeError):
            await sandbox.exec(["true"], cwd="..")
        with pytest.raises(FileNotFoundError):
            await sandbox.read_file("absent.txt")
        assert await sandbox.read_file(f"{root}/src/main.py") == b"print()"
        assert await sandbox.list_files() == ["src/main.py"]

        out = tmp_path / "copied"
        await sandbox.copy_out(".", out)
        assert (out / "src" / "main.py").read_bytes() == b"print()"
        assert not (out / "link-out").exists() and not (out / "link-out").is_symlink()
        assert (out / "link-in").is_symlink()
    finally:
        await sandbox.close()


async def test_spawn_talks_over_stdio_and_is_stopped_at_close() -> None:
    sandbox = await _open()
    process = await sandbox.spawn(
        [
            sys.executable,
            "-u",
            "-c",
            "import sys\nfor line in sys.stdin: print('echo:' + line.strip(), flush=True)",
        ]
    )
    await process.write(b"hello\n")
    assert await process.readline() == b"echo:hello\n"
    pid = process.pid  # type: ignore[attr-defined]
    assert _alive(pid)
    await sandbox.close()
    assert await _dies(pid)


async def test_background_children_do_not_hang_exec_and_die_at_close() -> None:
    sandbox = await _open()
    root = Path(sandbox.workdir)
    result = await sandbox.exec(["sh", "-c", "sleep 1000 & echo $! > bg.pid; echo started"])
    assert result.exit_code == 0
    assert result.stdout == "started\n"
    pid = int((root / "bg.pid").read_text())
    assert _alive(pid)
    await sandbox.close()
    assert await _dies(pid)


async def test_kept_git_worktree(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "f.txt").write_text("one\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "one")
    keep = tmp_path / "kept" / "stim"
    keep.mkdir(parents=True)
    (keep / "leftover.txt").write_text("old run")
    env = EnvironmentConfig(git=GitConfig(source=str(repo)))
    sandbox = await _open(env, spec_dir=tmp_path, keep=keep)
    assert await sandbox.list_files() == ["f.txt"]
    await sandbox.close()
    assert (keep / "f.txt").read_text() == "one\n"


async def test_spawned_process_lines_longer_than_the_stream_limit() -> None:
    sandbox = await _open()
    try:
        process = await sandbox.spawn(
            ["sh", "-c", "head -c 200000 /dev/zero | tr '\\0' a; echo; echo short"]
        )
        long_line = await process.readline()
        assert long_line == b"a" * 200_000 + b"\n"
        assert await process.readline() == b"short\n"
        assert await process.readline() == b""
    finally:
        await sandbox.close()


async def test_cancelling_exec_while_it_starts_never_hangs_and_leaves_nothing() -> None:
    # Cancel at every early point of the start: while asyncio connects the pipes, a
    # background child holding stdout must not make the cancellation wait forever.
    for delay_steps in range(12):
        sandbox = await _open()
        root = Path(sandbox.workdir)
        try:
            task = asyncio.ensure_future(
                sandbox.exec(["sh", "-c", "sleep 1000 & echo $! > gc.pid; echo started; wait"])
            )
            for _ in range(delay_steps):
                await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            for _ in range(50):  # the group is killed as soon as the start completes
                await asyncio.sleep(0.01)
                pid_file = root / "gc.pid"
                if not pid_file.exists() or not pid_file.read_text().strip():
                    continue
                assert await _dies(int(pid_file.read_text()))
                break
        finally:
            await sandbox.close()


async def test_stop_processes_reaches_other_sessions_and_keeps_the_sandbox_usable() -> None:
    sandbox = await _open()
    try:
        script = (
            "setsid sh -c 'trap \"\" TERM HUP; sleep 1000 & echo $! > far.pid; wait' "
            ">/dev/null 2>&1 </dev/null & "
            "while [ ! -s far.pid ]; do sleep 0.01; done"
        )
        assert (await sandbox.exec(["sh", "-c", script], timeout=30)).exit_code == 0
        far = int((await sandbox.read_file("far.pid")).decode())
        assert _alive(far)  # a finished command's escaped process keeps running until stopped
        await sandbox.stop_processes()
        assert not _alive(far)
        again = await sandbox.exec(["sh", "-c", "echo still usable"])
        assert again.stdout == "still usable\n"
    finally:
        await sandbox.close()


async def test_a_command_killed_by_a_signal_reports_it() -> None:
    sandbox = await _open()
    try:
        result = await sandbox.exec(["sh", "-c", "kill -SEGV $$"])
        assert (result.exit_code, result.signal, result.timed_out) == (None, 11, False)
        timed = await sandbox.exec(["sleep", "30"], timeout=0.3)
        assert (timed.exit_code, timed.signal, timed.timed_out) == (None, None, True)
    finally:
        await sandbox.close()


async def test_a_command_starts_clean_in_its_own_session_and_folder() -> None:
    """A command gets only its three standard streams, neither signal Python ignores
    (SIGPIPE, SIGXFSZ) ignored, a session of its own and the workspace as its folder; the
    keeper leaves the folder once the command started, so it holds no workspace open."""
    sandbox = await _open()
    try:
        script = (
            "ls /proc/$$/fd; grep SigIgn /proc/$$/status; "
            'echo "sid=$(cut -d " " -f 6 /proc/$$/stat) pid=$$"; pwd; '
            'echo "keeper=$(readlink /proc/$PPID/cwd)"'
        )
        lines = (await sandbox.exec(["sh", "-c", script])).stdout.split()
        assert lines[:3] == ["0", "1", "2"], lines
        assert lines[3] == "SigIgn:"
        ignored = int(lines[4], 16)
        assert not ignored & (1 << (signal.SIGPIPE - 1) | 1 << (signal.SIGXFSZ - 1)), lines[4]
        sid, pid = (field.partition("=")[2] for field in lines[5:7])
        assert sid == pid
        assert lines[7] == str(sandbox.root)
        assert lines[8] == "keeper=/"
    finally:
        await sandbox.close()


async def test_a_program_is_searched_on_the_command_s_path_as_execvpe_does(
    tmp_path: Path,
) -> None:
    """The command's own PATH is searched in order; an entry that is missing or not
    executable is passed over, and the first error other than a missing file is the one
    reported when no entry runs."""
    locked, runnable, empty = (tmp_path / name for name in ("locked", "runnable", "empty"))
    for folder in (locked, runnable, empty):
        folder.mkdir()
    (locked / "vally-probe").write_text("#!/bin/sh\necho locked\n")
    (runnable / "vally-probe").write_text("#!/bin/sh\necho runnable\n")
    (runnable / "vally-probe").chmod(0o755)
    sandbox = await _open()
    try:
        path = f"{tmp_path / 'missing'}:{locked}:{runnable}"
        result = await sandbox.exec(["vally-probe"], env={"PATH": path})
        assert result.stdout == "runnable\n"
        with pytest.raises(BackendError, match="Permission denied"):
            await sandbox.exec(["vally-probe"], env={"PATH": f"{empty}:{locked}"})
        with pytest.raises(BackendError, match="No such file or directory"):
            await sandbox.exec(["vally-probe"], env={"PATH": str(empty)})
        missing_folder = sandbox.root / "gone"
        with pytest.raises(BackendError, match="No such file or directory"):
            await sandbox.exec(["true"], cwd=str(missing_folder))
    finally:
        await sandbox.close()


async def test_a_missing_program_cannot_start() -> None:
    sandbox = await _open()
    try:
        with pytest.raises(BackendError, match="cannot start 'vally-no-such-program'"):
            await sandbox.exec(["vally-no-such-program"])
    finally:
        await sandbox.close()


async def test_processes_that_killed_their_keeper_are_found_by_their_marker() -> None:
    sandbox = await _open()
    try:
        script = (
            "setsid sleep 1000 >/dev/null 2>&1 </dev/null & echo $! > far.pid; "
            "echo $$ > self.pid; kill -9 $PPID; exec sleep 1000"
        )
        await sandbox.exec(["sh", "-c", script], timeout=30)
        pids = [int((await sandbox.read_file(f)).decode()) for f in ("far.pid", "self.pid")]
        assert all(_alive(pid) for pid in pids)  # out of the keeper's reach now
        await sandbox.stop_processes()
        assert not any(_alive(pid) for pid in pids)
    finally:
        await sandbox.close()


async def test_commands_run_one_after_another_share_one_long_lived_keeper() -> None:
    sandbox = await _open()
    try:
        parents = set()
        for _ in range(6):
            result = await sandbox.exec(["sh", "-c", "echo $PPID"])
            parents.add(int(result.stdout))
        # No new keeper (and no interpreter start) per command: the one that ran the last
        # command may still be finishing when the next starts, so at most two take turns.
        assert len(parents) <= 2, parents
        assert all(_alive(keeper) for keeper in parents)
    finally:
        await sandbox.close()


def test_a_keeper_starts_from_cached_bytecode_without_json_or_typing() -> None:
    """A keeper imports reaper from its folder (its bytecode cached), reads requests with
    marshal and starts commands with posix_spawn: json, re, typing, subprocess and the enum
    classes of signal and socket were over half of its start-up CPU."""
    from vally_backends import keeper_host

    check = (
        "import sys; sys.path.append(sys.argv[1]); import reaper; "
        "print(reaper.__cached__ is not None, "
        "sorted(m for m in ('json', 'typing', 'vally_backends', 'subprocess', 'socket', "
        "'signal', 'enum', 're', 'array', 'threading') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-c", check, str(keeper_host.REAPER.parent)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.split() == ["True", "[]"]
    assert "import reaper" in keeper_host.KEEPER_MAIN


def test_a_keeper_request_takes_string_subclasses_and_refuses_other_values() -> None:
    """Requests travel marshal-ed, and marshal writes no subclass of str: the host sends
    plain strings; a value that is no string is refused (TypeError, as JSON refused it)."""
    from enum import StrEnum

    from vally_backends.keeper_host import Keeper, KeeperRequest

    class Word(StrEnum):
        HELLO = "hello"

    def request(argv: list[str], status: int, out: int) -> KeeperRequest:
        env = {"WORD": Word.HELLO, "PATH": os.environ["PATH"]}
        return KeeperRequest(argv, str(Path.cwd()), env, 1.0, status, [None, out, None])

    keeper = Keeper()
    try:
        status_r, status_w = os.pipe()
        out_r, out_w = os.pipe()
        try:
            keeper.send(request(["sh", "-c", f"echo {Word.HELLO} $WORD"], status_w, out_w))
        finally:
            os.close(status_w)
            os.close(out_w)
        with os.fdopen(status_r, "rb") as status, os.fdopen(out_r, "rb") as out:
            assert status.read().endswith(b"done\n")
            assert out.read() == b"hello hello\n"
        with pytest.raises(TypeError):
            keeper.send(request(["echo", Path("x")], 0, 1))  # type: ignore[list-item]
    finally:
        keeper.close()


async def test_a_keeper_killed_by_its_command_is_replaced() -> None:
    sandbox = await _open()
    try:
        first = await sandbox.exec(["sh", "-c", "echo $PPID; kill -9 $PPID"], timeout=30)
        second = await sandbox.exec(["sh", "-c", "echo $PPID"], timeout=30)
        assert second.exit_code == 0, second
        assert int(second.stdout) != int(first.stdout.split()[0])
    finally:
        await sandbox.close()


async def test_the_marker_scan_runs_only_after_a_keeper_died(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scans: list[str] = []
    real = local_module.kill_marked

    def counting(token: str) -> int:
        scans.append(token)
        return real(token)

    monkeypatch.setattr(local_module, "kill_marked", counting)
    sandbox = await _open()
    try:
        await sandbox.exec(["sh", "-c", "sleep 0 & true"])
        await sandbox.stop_processes()
        assert scans == []  # every keeper held its whole tree to the end
        await sandbox.exec(["sh", "-c", "kill -9 $PPID"], timeout=30)
        await sandbox.stop_processes()
        assert len(scans) == 1  # a keeper died: whatever it held may be anywhere now
    finally:
        await sandbox.close()
