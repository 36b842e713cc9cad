"""Commands the graders run in the trial's sandbox, and the evidence their ends give.

``run-command``, ``program`` and ``harbor-verifier`` run a command through the sandbox
with a timeout; :class:`GraderCommand` runs it and :class:`CommandOutcome` turns its exit
status and output into evidence texts and result metadata, the same way for all of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vally import ExecResult, Sandbox
from vally_builtin.graders import shorten


def output_tail(result: ExecResult, limit: int = 400) -> str:
    """The last part of stderr (or stdout), flattened, for evidence."""
    text = result.stderr.strip() or result.stdout.strip()
    if not text:
        return ""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else "…" + flat[-(limit - 1) :]


def with_tail(text: str, result: ExecResult) -> str:
    """``text``, then ``: `` and the end of the command's output when it printed any."""
    tail = output_tail(result)
    return text + (f": {tail}" if tail else "")


def exec_metadata(result: ExecResult, *, stdout: bool = True) -> dict[str, Any]:
    """What a grader records of a command it ran: exit code, timeout flag, duration and the
    last 4000 characters of stdout (unless ``stdout`` is false) and of stderr."""
    meta: dict[str, Any] = {
        "exitCode": result.exit_code,
        "timedOut": result.timed_out,
        "durationMs": result.duration_ms,
    }
    if stdout:
        meta["stdout"] = result.stdout[-4000:]
    meta["stderr"] = result.stderr[-4000:]
    return meta


def shown_command(kind: str, text: str) -> str:
    """How evidence names a command: ``Command 'make test'`` (cut to 120 characters)."""
    return f"{kind} '{shorten(text, 120)}'"


@dataclass(frozen=True)
class GraderCommand:
    """A command a grader runs through the trial's sandbox.

    Attributes:
        argv: The argv (run without a shell).
        shown: How evidence names the command.
        timeout: Seconds it may run.
        env: Extra environment variables (None: only the sandbox's own).
        cwd: Workspace-relative working directory (None: the workspace).
    """

    argv: list[str]
    shown: str
    timeout: float
    env: dict[str, str] | None = None
    cwd: str | None = None

    async def run(self, sandbox: Sandbox) -> CommandOutcome:
        """Run the command in ``sandbox`` and return how it ended."""
        result = await sandbox.exec(self.argv, env=self.env, cwd=self.cwd, timeout=self.timeout)
        return CommandOutcome(self, result)


@dataclass(frozen=True)
class CommandOutcome:
    """How a :class:`GraderCommand` ended, and the evidence that gives.

    Attributes:
        command: The command that ran.
        result: Its exit status and output.
    """

    command: GraderCommand
    result: ExecResult

    @property
    def no_exit_code(self) -> bool:
        """The command ran out of time or ended without an exit code (evidence calls
        both a timeout)."""
        return self.result.timed_out or self.result.exit_code is None

    def timed_out_text(self) -> str:
        """``<command> timed out after <timeout>s``."""
        return f"{self.command.shown} timed out after {self.command.timeout:g}s"

    def exited_text(self) -> str:
        """``<command> exited with <exit code>``."""
        return f"{self.command.shown} exited with {self.result.exit_code}"

    def metadata(self, *, stdout: bool = True) -> dict[str, Any]:
        """The result metadata of the run (see :func:`exec_metadata`)."""
        return exec_metadata(self.result, stdout=stdout)
