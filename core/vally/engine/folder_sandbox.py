"""A sandbox over an existing host folder, used by ``vally grade --workspace`` to re-grade
saved trials against a workspace the user kept. It never creates or deletes the folder."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path

from vally.contracts.protocols import ExecResult, Process
from vally.errors import BackendError, UnsupportedError


class FolderSandbox:
    """A sandbox over an existing host folder, for ``vally grade --workspace``.

    Commands run as host subprocesses in the folder (own process group, killed on
    timeout); file operations are confined to the folder. Closing it leaves the folder
    and its files in place.
    """

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.workdir = str(self.root)
        self.host_workdir: Path | None = self.root

    def _resolve(self, path: str) -> Path:
        target = (self.root / path).resolve()
        if target != self.root and self.root not in target.parents:
            raise BackendError(f"path {path!r} resolves outside the workspace {self.root}")
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
        """Run ``argv`` in the folder and wait for it (see :class:`vally.Sandbox`)."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=str(self._resolve(cwd or ".")),
                env={**os.environ, **(env or {})},
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
        except TimeoutError:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, err = await proc.communicate()
        truncated = len(out) > output_limit or len(err) > output_limit
        return ExecResult(
            exit_code=None if timed_out else proc.returncode,
            stdout=out[:output_limit].decode("utf-8", errors="replace"),
            stderr=err[:output_limit].decode("utf-8", errors="replace"),
            timed_out=timed_out,
            truncated=truncated,
            duration_ms=int((loop.time() - started) * 1000),
        )

    async def spawn(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> Process:
        """Not available when re-grading."""
        raise UnsupportedError("long-running processes are not available in vally grade")

    async def read_file(self, path: str) -> bytes:
        """Read a file of the folder."""
        return await asyncio.to_thread(self._resolve(path).read_bytes)

    async def write_file(self, path: str, data: bytes) -> None:
        """Create or replace a file of the folder."""
        target = self._resolve(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(target.write_bytes, data)

    async def list_files(self, path: str = ".") -> list[str]:
        """Regular files below ``path`` (no links followed; ``.git``/``node_modules``
        skipped), as sorted folder-relative POSIX paths."""
        start = self._resolve(path)
        found: list[str] = []
        for folder, dirs, files in os.walk(start):
            dirs[:] = [d for d in dirs if d not in (".git", "node_modules")]
            for name in files:
                full = Path(folder) / name
                if full.is_file() and not full.is_symlink():
                    found.append(full.relative_to(self.root).as_posix())
        return sorted(found)

    async def copy_in(self, host_src: Path, dest: str) -> None:
        """Copy a host file or folder into the workspace."""
        target = self._resolve(dest)
        if host_src.is_dir():
            await asyncio.to_thread(shutil.copytree, host_src, target, dirs_exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            await asyncio.to_thread(shutil.copy2, host_src, target)

    async def copy_out(self, src: str, host_dest: Path) -> None:
        """Copy a workspace file or folder to the host."""
        source = self._resolve(src)
        if source.is_dir():
            await asyncio.to_thread(shutil.copytree, source, host_dest, dirs_exist_ok=True)
        else:
            await asyncio.to_thread(shutil.copy2, source, host_dest)

    async def close(self) -> None:
        """Nothing to release: the folder belongs to the user."""


