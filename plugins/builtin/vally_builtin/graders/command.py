"""The ``run-command`` grader: run a command in the trial's workspace and check its exit code
(and optionally its output).

The command always runs through the trial's sandbox (a subprocess of the ``local`` backend, a
``docker exec`` for ``docker``), never on the host directly. A string command runs with
``sh -c``; a list runs as an argv without a shell.

``files:`` copies verifier files (tests, fixtures) from the eval file's folder into the
workspace right before the command runs, replacing whatever the agent left at ``dest``, so
the agent cannot tamper with the checks.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import Field, field_validator, model_validator

from vally import (
    BaseGrader,
    Duration,
    GradeContext,
    GraderMetadata,
    GraderResult,
    GradingError,
    Sandbox,
    StrictConfig,
)
from vally_builtin.graders import (
    compile_pattern,
    confined_relative,
    copy_folder_in,
    require_sandbox,
    resolve_host_source,
)
from vally_builtin.graders.process import (
    CommandOutcome,
    GraderCommand,
    shown_command,
    with_tail,
)


class VerifierFile(StrictConfig):
    """A file or folder copied into the workspace before the command runs.

    Attributes:
        src: Path relative to the eval file's folder (must stay inside it).
        dest: Workspace-relative destination; defaults to the name of ``src``.
    """

    src: str = Field(min_length=1)
    dest: str | None = None

    @field_validator("dest")
    @classmethod
    def _confined(cls, value: str | None) -> str | None:
        return None if value is None else confined_relative(value, what="dest")

    def destination(self) -> str:
        """The workspace-relative destination path."""
        return self.dest or confined_relative(Path(self.src).name, what="dest")


async def stage_files(context: GradeContext, sandbox: Sandbox, files: list[VerifierFile]) -> None:
    """Copy verifier files from the eval file's folder into the sandbox, overwriting.

    Folders are copied recursively; symbolic links inside them are skipped.

    Raises:
        GradingError: No eval folder is known, or a source is missing or escapes it.
    """
    if not files:
        return
    if context.spec_dir is None:
        raise GradingError(
            f"grader '{context.grader.label}' copies files but the eval file's folder is "
            "unknown; run it from an eval spec"
        )
    for entry in files:
        source = resolve_host_source(context.spec_dir, entry.src, what="files[].src")
        dest = entry.destination()
        if source.is_dir():
            await copy_folder_in(sandbox, source, dest)
        else:
            await sandbox.write_file(dest, source.read_bytes())


class RunCommandConfig(StrictConfig):
    """Config of ``run-command``.

    Attributes:
        command: A shell command (run with ``sh -c``) or an argv list.
        expected_exit_code: The exit code that passes (default 0).
        timeout: How long the command may run (default ``60s``); over it, the grader fails.
        stdout_contains: Optional text the standard output must contain.
        stdout_matches: Optional regex the standard output must match.
        env: Extra environment variables for the command.
        files: Verifier files copied into the workspace right before the command runs.
        cwd: Optional workspace-relative working directory.
    """

    command: str | list[str]
    expected_exit_code: int = 0
    timeout: Duration = Field(default=60.0, gt=0)
    stdout_contains: str | None = None
    stdout_matches: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    files: list[VerifierFile] = Field(default_factory=list)
    cwd: str | None = None

    @field_validator("command")
    @classmethod
    def _not_empty(cls, value: str | list[str]) -> str | list[str]:
        if (isinstance(value, str) and not value.strip()) or (
            isinstance(value, list) and not value
        ):
            raise ValueError("command must not be empty")
        return value

    @field_validator("cwd")
    @classmethod
    def _cwd(cls, value: str | None) -> str | None:
        return None if value is None else confined_relative(value, what="cwd")

    @model_validator(mode="after")
    def _check(self) -> RunCommandConfig:
        if self.stdout_matches is not None:
            compile_pattern(self.stdout_matches)
        return self

    def argv(self) -> list[str]:
        """The argv to run."""
        if isinstance(self.command, str):
            return ["sh", "-c", self.command]
        return list(self.command)

    def display(self) -> str:
        """The command as shown in evidence."""
        return self.command if isinstance(self.command, str) else " ".join(self.command)


class RunCommandGrader(BaseGrader[RunCommandConfig]):
    """Runs a command in the workspace; passes on the expected exit code (and output)."""

    metadata: ClassVar[GraderMetadata] = GraderMetadata(
        name="run-command",
        description="Runs a command in the workspace; a wrong exit code or output fails it.",
        determinism="complex-static",
        cost_profile="low",
        portability="t2-domain",
        needs_workspace=True,
    )

    async def grade(self, context: GradeContext) -> GraderResult:
        """Stage verifier files, run the command through the sandbox and check it."""
        cfg = self.config
        sandbox = require_sandbox(context, "run-command")
        await stage_files(context, sandbox, cfg.files)
        command = GraderCommand(
            cfg.argv(),
            shown=shown_command("Command", cfg.display()),
            timeout=cfg.timeout,
            env=cfg.env or None,
            cwd=cfg.cwd,
        )
        outcome = await command.run(sandbox)
        passed, evidence = self._verdict(outcome)
        return self.result(context, passed=passed, evidence=evidence, metadata=outcome.metadata())

    def _verdict(self, outcome: CommandOutcome) -> tuple[bool, str]:
        """Whether the command passes, and the evidence saying why."""
        cfg = self.config
        result = outcome.result
        killed = result.signal is not None and not result.timed_out
        if killed and result.exit_code != cfg.expected_exit_code:
            return False, f"{outcome.command.shown} was killed by signal {result.signal}"
        if outcome.no_exit_code:
            return False, outcome.timed_out_text()
        exited = outcome.exited_text()
        expected = f"{exited} (expected {cfg.expected_exit_code})"
        if result.exit_code != cfg.expected_exit_code:
            return False, with_tail(expected, result)
        if cfg.stdout_contains is not None and cfg.stdout_contains not in result.stdout:
            return False, f"{exited} but its output does not contain '{cfg.stdout_contains}'"
        pattern = cfg.stdout_matches
        if pattern is not None and not compile_pattern(pattern).search(result.stdout):
            return False, f"{exited} but its output does not match /{pattern}/"
        return True, expected
