"""A backend that does nothing, to measure the orchestrator alone (``bench/throughput.py``).

Its sandboxes keep files in memory and answer every command with exit code 0, so a run
with the ``mock`` executor measures planning, scheduling, grading, events and file writes
without any workspace or process cost. Load it with ``--backend bench/null_backend.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vally import BaseBackend, EmptyConfig, ExecResult, PluginMetadata, TrialContext


class NullSandbox:
    """An in-memory workspace."""

    host_workdir: Path | None = None

    def __init__(self) -> None:
        self.workdir = "/null"
        self.files: dict[str, bytes] = {}

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
        return ExecResult(exit_code=0, stdout="", stderr="")

    async def spawn(self, argv: Sequence[str], **kwargs: Any) -> Any:
        raise NotImplementedError("the null backend cannot spawn processes")

    async def read_file(self, path: str) -> bytes:
        try:
            return self.files[path]
        except KeyError:
            raise FileNotFoundError(path) from None

    async def write_file(self, path: str, data: bytes) -> None:
        self.files[path] = data

    async def list_files(self, path: str = ".") -> list[str]:
        return sorted(self.files)

    async def copy_in(self, host_src: Path, dest: str) -> None:
        self.files[dest] = host_src.read_bytes() if host_src.is_file() else b""

    async def copy_out(self, src: str, host_dest: Path) -> None:
        host_dest.parent.mkdir(parents=True, exist_ok=True)
        host_dest.write_bytes(self.files.get(src, b""))

    async def close(self) -> None:
        self.files.clear()


class NullBackend(BaseBackend[EmptyConfig]):
    """Opens in-memory sandboxes."""

    metadata = PluginMetadata(
        name="bench-null", kind="backend", description="In-memory sandboxes for benchmarks."
    )
    Config = EmptyConfig

    async def open(self, trial: TrialContext) -> NullSandbox:
        return NullSandbox()


def register(registrar: Any) -> None:
    """Register the null backend."""
    registrar.backend(NullBackend)
