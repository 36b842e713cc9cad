"""The sandbox ``vally grade --workspace`` gives graders: a user folder, never cleared."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from vally.contracts.protocols import Sandbox
from vally.engine.folder_sandbox import FolderSandbox
from vally.errors import BackendError, UnsupportedError


def test_files_and_commands(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_text("A", encoding="utf-8")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("x", encoding="utf-8")
    box = FolderSandbox(tmp_path)
    assert isinstance(box, Sandbox)

    async def scenario() -> None:
        assert await box.read_file("sub/a.txt") == b"A"
        await box.write_file("new/b.txt", b"B")
        assert await box.list_files() == ["new/b.txt", "sub/a.txt"]
        result = await box.exec(["sh", "-c", "cat sub/a.txt; echo err >&2; exit 3"])
        assert (result.exit_code, result.stdout, result.stderr) == (3, "A", "err\n")
        capped = await box.exec(["sh", "-c", "printf 0123456789"], output_limit=4)
        assert capped.stdout == "0123" and capped.truncated
        slow = await box.exec(["sleep", "30"], timeout=0.2)
        assert slow.timed_out and slow.exit_code is None
        with pytest.raises(BackendError, match="outside the workspace"):
            await box.read_file("../escape.txt")
        with pytest.raises(UnsupportedError):
            await box.spawn(["cat"])
        await box.close()

    asyncio.run(scenario())
    assert (tmp_path / "sub" / "a.txt").exists()  # close leaves the folder alone
