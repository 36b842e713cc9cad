"""The sandbox of a trial that needs no workspace: no folder, no container, no processes.

A trial gets it instead of opening the backend when its executor declares
``needs_workspace=False`` explicitly in its :class:`~vally.contracts.metadata.ExecutorMetadata`,
none of its graders needs the workspace, its environment stages nothing (no files, skills,
setup commands or git worktree), it keeps no artifacts and its workspace is not kept
(``--workspace``). Anything that still uses the workspace gets a clear error saying which
declaration to change.
"""

from __future__ import annotations

from pathlib import Path

from vally.contracts.bases import BaseSandbox, ExecRequest
from vally.contracts.protocols import ExecResult, Process
from vally.errors import UnsupportedError
from vally.models.spec import EnvironmentConfig


class NoWorkspace(BaseSandbox):
    """A sandbox without a workspace: every command or file operation is refused.

    Args:
        executor: The executor's name, for the error message.
    """

    workdir: str = "."
    host_workdir: Path | None = None

    def __init__(self, executor: str) -> None:
        self._executor = executor

    def _refuse(self, what: str) -> UnsupportedError:
        return UnsupportedError(
            f"executor {self._executor!r} declares needs_workspace=False, so its trials get "
            f"no workspace, but something tried to {what}",
            hint="declare needs_workspace=True in the executor's ExecutorMetadata (or the "
            "grader's GraderMetadata) so each trial gets a sandbox from the backend",
        )

    async def run_command(self, request: ExecRequest) -> ExecResult:
        """Refused: there is nowhere to run a command."""
        raise self._refuse(f"run {list(request.argv)[:1]!r}")

    async def start_process(self, request: ExecRequest) -> Process:
        """Refused: there is nowhere to start a process."""
        raise self._refuse(f"start {list(request.argv)[:1]!r}")

    async def read_file(self, path: str) -> bytes:
        """Refused: there are no files."""
        raise self._refuse(f"read {path!r}")

    async def write_file(self, path: str, data: bytes) -> None:
        """Refused: there is nowhere to write."""
        raise self._refuse(f"write {path!r}")

    async def list_files(self, path: str = ".") -> list[str]:
        """Refused: there are no files."""
        raise self._refuse(f"list {path!r}")

    async def copy_in(self, host_src: Path, dest: str) -> None:
        """Refused: there is nowhere to copy to."""
        raise self._refuse(f"copy {str(host_src)!r} in")

    async def copy_out(self, src: str, host_dest: Path) -> None:
        """Refused: there is nothing to copy."""
        raise self._refuse(f"copy {src!r} out")

    async def stop_processes(self) -> None:
        """Nothing runs here."""

    async def close(self) -> None:
        """Nothing to clean up."""


def stages_nothing(environment: EnvironmentConfig) -> bool:
    """Whether preparing a workspace for ``environment`` would do nothing (no files, skills,
    setup commands or git worktree)."""
    return not (
        environment.files or environment.skills or environment.commands or environment.git
    )
