"""A grader's folder of files reaches the sandbox in one transfer, links left out, within the
grader's time limit: a task with 2,000 test files costs one backend call, not 2,000."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from vally import EnvironmentConfig, GradingError, TrialContext, TrialKey
from vally_backends.local import LocalBackend
from vally_builtin.graders import copy_folder_in


class Counting:
    """The local backend's real sandbox, counting the calls that move files in."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[str] = []

    async def copy_in(self, host_src: Path, dest: str) -> None:
        self.calls.append("copy_in")
        await self.inner.copy_in(host_src, dest)

    async def write_file(self, path: str, data: bytes) -> None:
        self.calls.append("write_file")
        await self.inner.write_file(path, data)


async def _sandbox(tmp_path: Path) -> Any:
    trial = TrialContext(
        key=TrialKey("", "ev", "s", "m", 0),
        run_id="r",
        environment=EnvironmentConfig(),
        spec_dir=tmp_path,
    )
    return await LocalBackend().open(trial)


def test_two_thousand_files_are_one_transfer_and_links_stay_out(tmp_path: Path) -> None:
    source = tmp_path / "tests"
    for i in range(2000):
        (source / f"d{i % 10}").mkdir(parents=True, exist_ok=True)
        (source / f"d{i % 10}" / f"t{i}.txt").write_text(str(i))
    (tmp_path / "secret.txt").write_text("host secret")
    (source / "leak.txt").symlink_to(tmp_path / "secret.txt")

    async def main() -> tuple[list[str], list[str]]:
        sandbox = await _sandbox(tmp_path)
        counting = Counting(sandbox)
        await copy_folder_in(counting, source, "staged", timeout=60)  # type: ignore[arg-type]
        root = Path(sandbox.workdir)
        staged = sorted(p.relative_to(root / "staged").as_posix() for p in root.rglob("*.txt"))
        await sandbox.close()
        return counting.calls, staged

    calls, staged = asyncio.run(main())
    assert calls == ["copy_in"]
    assert len(staged) == 2000 and "leak.txt" not in staged


def test_staging_slower_than_the_timeout_is_a_grading_error(tmp_path: Path) -> None:
    source = tmp_path / "tests"
    source.mkdir()
    (source / "t.txt").write_text("x")

    class Stuck:
        async def copy_in(self, host_src: Path, dest: str) -> None:
            await asyncio.Event().wait()  # never returns: only the timeout ends it

    with pytest.raises(GradingError, match=r"took longer than 0.2s"):
        asyncio.run(copy_folder_in(Stuck(), source, "staged", timeout=0.2))  # type: ignore[arg-type]
