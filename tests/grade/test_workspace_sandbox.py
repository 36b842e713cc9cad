"""The sandbox ``vally grade --workspace`` gives graders: the ``local`` backend over a user
folder in place (``reuse_workspace``), never cleared and never deleted."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from vally.contracts.protocols import Sandbox, TrialContext, TrialKey
from vally.errors import PathEscapeError, SetupError
from vally.models.spec import EnvironmentConfig
from vally.plugins.session import Session


def _trial(folder: Path, env: dict[str, str] | None = None) -> TrialContext:
    return TrialContext(
        key=TrialKey("", "demo", "s", "", 0),
        run_id="r",
        environment=EnvironmentConfig(env=env or {}),
        spec_dir=folder.parent,
        keep_workspace=folder,
    )


async def _open(folder: Path, env: dict[str, str] | None = None) -> Sandbox:
    backend = Session(environ={}).create("backend", "local", {"reuse_workspace": True})
    await backend.start("r")
    sandbox: Sandbox = await backend.open(_trial(folder, env))
    return sandbox


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def _running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_files_and_commands(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_text("A", encoding="utf-8")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("x", encoding="utf-8")

    async def scenario() -> None:
        box = await _open(tmp_path)
        assert isinstance(box, Sandbox)
        assert await box.read_file("sub/a.txt") == b"A"  # opening cleared nothing
        await box.write_file("new/b.txt", b"B")
        assert await box.list_files() == ["new/b.txt", "sub/a.txt"]
        result = await box.exec(["sh", "-c", "cat sub/a.txt; echo err >&2; exit 3"])
        assert (result.exit_code, result.stdout, result.stderr) == (3, "A", "err\n")
        capped = await box.exec(["sh", "-c", "printf 0123456789"], output_limit=4)
        assert capped.stdout == "0123" and capped.truncated
        slow = await box.exec(["sleep", "30"], timeout=0.2)
        assert slow.timed_out and slow.exit_code is None
        with pytest.raises(PathEscapeError, match="outside the workspace"):
            await box.read_file("../escape.txt")
        server = await box.spawn(["cat"])
        await box.close()
        assert not _running(server.pid)  # stopped at close
        # Killed, or ended at end of input as its stdin closed first: either way, stopped.
        assert await server.terminate() in (None, 0)

    asyncio.run(scenario())
    assert (tmp_path / "sub" / "a.txt").read_text(encoding="utf-8") == "A"  # close kept it
    assert (tmp_path / ".git" / "HEAD").is_file()


def test_host_environment_does_not_leak(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VALLY_TEST_SECRET", "hunter2")

    async def scenario() -> str:
        box = await _open(tmp_path, env={"FROM_SPEC": "yes"})
        try:
            result = await box.exec(["sh", "-c", 'echo "[$VALLY_TEST_SECRET][$FROM_SPEC]"'])
        finally:
            await box.close()
        return result.stdout

    assert asyncio.run(scenario()) == "[][yes]\n"


def test_a_background_child_holding_stdout_does_not_hang(tmp_path: Path) -> None:
    async def scenario() -> tuple[float, str]:
        box = await _open(tmp_path)
        started = time.monotonic()
        try:
            result = await box.exec(["sh", "-c", "sleep 30 & echo started"], timeout=20)
        finally:
            await box.close()
        return time.monotonic() - started, result.stdout

    elapsed, stdout = asyncio.run(scenario())
    assert stdout == "started\n"
    assert elapsed < 10


def test_a_missing_folder_is_neither_created_nor_cleared(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    with pytest.raises(SetupError, match="not a folder"):
        asyncio.run(_open(missing))
    assert not missing.exists()


def test_without_reuse_a_kept_workspace_is_still_cleared(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "old.txt").write_text("old", encoding="utf-8")

    async def scenario() -> list[str]:
        backend = Session(environ={}).create("backend", "local", {})
        box = await backend.open(_trial(tmp_path / "ws"))
        try:
            return await box.list_files()
        finally:
            await box.close()

    assert asyncio.run(scenario()) == []
    assert (tmp_path / "ws").is_dir()


def test_reused_folder_files_are_untouched(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("keep", encoding="utf-8")
    os.symlink("keep.txt", tmp_path / "link.txt")
    before = _snapshot(tmp_path)

    async def scenario() -> None:
        box = await _open(tmp_path)
        assert (await box.exec(["cat", "keep.txt"])).stdout == "keep"
        await box.close()

    asyncio.run(scenario())
    assert _snapshot(tmp_path) == before
    assert (tmp_path / "link.txt").is_symlink()
