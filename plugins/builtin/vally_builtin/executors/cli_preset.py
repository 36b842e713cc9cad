"""The shared shape of the named agent-CLI executors (``claude-code``, ``codex``): thin
presets that build a ``command`` executor configuration per trial, put the trial's skills
where the CLI finds them, and run it."""

from __future__ import annotations

from abc import abstractmethod
from pathlib import PurePosixPath
from typing import ClassVar, Literal, Protocol, TypeVar, cast

from pydantic import BaseModel

from vally import (
    BaseExecutor,
    ExecutionError,
    ExecutorOptions,
    Sandbox,
    SetupError,
    Stimulus,
    Trajectory,
)

from .command import CommandExecutor, McpConfigFile

ConfigT = TypeVar("ConfigT", bound=BaseModel)


class PresetSettings(Protocol):
    """What every preset's config holds beside its own options."""

    env: dict[str, str]
    """Environment variables for the CLI (over the preset's own)."""

    output_limit: int
    """Bytes of stdout and of stderr kept per turn."""


class CliPreset(BaseExecutor[ConfigT]):
    """Base of the agent-CLI presets.

    Subclasses set :attr:`skills_dir` and implement :meth:`command_config`; everything
    else (turns, resume, event stream, MCP file, timeouts) is the ``command`` executor's.
    """

    skills_dir: ClassVar[str]
    """Workspace folder the CLI discovers skills in (one sub-folder per skill)."""

    install_hint: ClassVar[str]
    """What to do when the CLI cannot be started (how to install it)."""

    @abstractmethod
    def command_config(self, options: ExecutorOptions) -> CommandExecutor.Config:
        """The ``command`` executor configuration for one trial."""

    @staticmethod
    def model_flags(options: ExecutorOptions) -> list[str]:
        """``--model {model}`` when the trial chooses a model, else nothing."""
        return ["--model", "{model}"] if options.model else []

    def stdin_config(
        self,
        *,
        command: list[str],
        resume: list[str],
        events: Literal["claude-code", "codex"],
        env: dict[str, str],
        mcp_config: McpConfigFile | None,
    ) -> CommandExecutor.Config:
        """The ``command`` configuration that runs ``command`` (``resume`` on turns 2..n)
        with the prompt on stdin and reads its stdout as the ``events`` stream; the preset
        config's ``env`` goes over ``env``, and its ``output_limit`` is kept."""
        settings = cast(PresetSettings, self.config)
        return CommandExecutor.Config(
            command=command,
            resume=resume,
            prompt_via="stdin",
            events=events,
            env={**env, **settings.env},
            mcp_config=mcp_config,
            output_limit=settings.output_limit,
        )

    def crash_hint(self, error: ExecutionError) -> str | None:
        """A better hint for a CLI that failed before writing any event, or None."""
        return None

    async def prepare(self, sandbox: Sandbox, options: ExecutorOptions) -> None:
        """Get the workspace ready for the CLI: by default, place the skills.

        Raises:
            SetupError: The workspace could not be prepared.
        """
        await self.place_skills(sandbox, options)

    async def place_skills(self, sandbox: Sandbox, options: ExecutorOptions) -> None:
        """Copy each staged skill to ``<skills_dir>/<name>/`` in the workspace.

        Raises:
            SetupError: A skill folder cannot be copied.
        """
        for skill in options.skills:
            dest = str(PurePosixPath(self.skills_dir, skill.name))
            try:
                await sandbox.copy_in(skill.host_path, dest)
            except OSError as exc:
                raise SetupError(
                    f"skill {skill.name}: cannot copy it to {dest!r} for "
                    f"{self.metadata.name}: {exc}"
                ) from exc

    async def execute(
        self, stimulus: Stimulus, sandbox: Sandbox, options: ExecutorOptions
    ) -> Trajectory:
        """Prepare the workspace, then run the stimulus through the CLI like ``command`` does.

        Raises:
            UnsupportedError: The trial needs something the preset cannot give the CLI.
            ExecutionError: The CLI could not start, or failed without writing any event.
            SetupError: The workspace could not be prepared.
        """
        await self.prepare(sandbox, options)
        inner = CommandExecutor(self.command_config(options))
        try:
            trajectory = await inner.execute(stimulus, sandbox, options)
        except ExecutionError as exc:
            hint = self.install_hint if "could not start" in exc.message else self.crash_hint(exc)
            if hint is None:
                raise
            raise ExecutionError(exc.message, hint=hint) from exc
        metadata = trajectory.metadata.model_copy(update={"executor": self.metadata.name})
        return trajectory.model_copy(update={"metadata": metadata})
