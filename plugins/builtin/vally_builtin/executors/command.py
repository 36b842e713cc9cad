"""The ``command`` executor: run any agent CLI as a subprocess in the sandbox.

Example (``eval.yaml``)::

    defaults:
      executor:
        name: command
        config:
          command: ["claude", "-p", "{prompt}", "--output-format", "stream-json", "--verbose"]
          events: claude-code
          resume: ["claude", "-p", "{prompt}", "--resume", "{session_id}",
                   "--output-format", "stream-json", "--verbose"]
          model_flag: --model

Placeholders in ``command`` and ``resume`` (replaced inside each argument, so a prompt with
spaces stays one argument): ``{prompt}``, ``{model}``, ``{workdir}``, ``{session_id}``,
``{skills_dir}``, ``{mcp_config}``. A string command is split like a shell would (``shlex``)
before replacement; it is never run through a shell.

MCP servers (``environment.mcpServers``) are not started by this executor: the agent CLI
starts them. With ``mcp_config`` set, the trial's servers are written before the agent runs
to a workspace file in the format the agent reads, and ``{mcp_config}`` is that file's path
(also usable in ``env`` values, as is ``{workdir}``)::

    command: ["claude", "-p", "{prompt}", "--mcp-config", "{mcp_config}",
              "--strict-mcp-config", "--output-format", "stream-json", "--verbose"]
    mcp_config: {format: claude-code}                  # written to .mcp.json

    command: ["codex", "exec", "--json", "{prompt}"]
    env: {CODEX_HOME: "{workdir}/.codex"}
    mcp_config: {format: codex}                        # written to .codex/config.toml

A trial that declares servers while ``mcp_config`` is unset fails with
:class:`~vally.errors.UnsupportedError` rather than silently running without them.
"""

from __future__ import annotations

import re
import shlex
import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from vally import (
    BackendError,
    BaseExecutor,
    ExecResult,
    ExecutionError,
    ExecutorMetadata,
    ExecutorOptions,
    Sandbox,
    Stimulus,
    StrictConfig,
    Trajectory,
    TrajectoryRecorder,
    UnsupportedError,
)

from .shared import SessionLog, run_metadata
from .streams import merge_extra, parse_stream

PLACEHOLDERS = (
    "{prompt}",
    "{model}",
    "{workdir}",
    "{session_id}",
    "{skills_dir}",
    "{mcp_config}",
)
"""What ``command`` and ``resume`` may contain."""

_STDERR_TAIL = 2000

SESSION_ID_TIMEOUT = 5.0
"""Seconds the ``session_id_from`` search may take on one stream."""


def _argv(value: list[str] | str) -> list[str]:
    return shlex.split(value) if isinstance(value, str) else list(value)


def signal_name(number: int) -> str:
    """``SIGSEGV (11)`` for 11; the bare number for one Python does not know."""
    try:
        return f"{signal.Signals(number).name} ({number})"
    except ValueError:
        return str(number)


def _tail(text: str, limit: int = _STDERR_TAIL) -> str:
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]


MCP_CONFIG_PATHS: dict[str, str] = {
    "claude-code": ".mcp.json",
    "codex": ".codex/config.toml",
    "vally-json": ".vally/mcp.json",
}
"""Default workspace path of the MCP configuration file, per format."""


class McpConfigFile(StrictConfig):
    """Where and how the ``command`` executor writes the trial's MCP servers.

    Attributes:
        format: ``claude-code`` (the ``--mcp-config`` / ``.mcp.json`` JSON), ``codex``
            (``config.toml`` ``[mcp_servers.<name>]`` tables) or ``vally-json`` (every field
            vally knows). See :mod:`vally_builtin.mcp.config`.
        path: Workspace-relative path of the file (default: ``.mcp.json``,
            ``.codex/config.toml`` or ``.vally/mcp.json`` by format).
    """

    format: Literal["claude-code", "codex", "vally-json"] = "claude-code"
    path: str | None = None

    @field_validator("path")
    @classmethod
    def _relative(cls, value: str | None) -> str | None:
        if value is not None:
            pure = PurePosixPath(value)
            if not value.strip() or pure.is_absolute() or ".." in pure.parts:
                raise ValueError(
                    f"mcp_config.path must be a relative path inside the workspace, got {value!r}"
                )
        return value

    @property
    def file(self) -> str:
        """The workspace-relative path written."""
        return self.path or MCP_CONFIG_PATHS[self.format]


class CommandExecutor(BaseExecutor["CommandExecutor.Config"]):
    """Runs an agent CLI once per turn and records its output (and its event stream)."""

    metadata: ClassVar[ExecutorMetadata] = ExecutorMetadata(
        name="command",
        description="Run any agent CLI as a subprocess; optionally parse its JSONL events.",
        multi_turn=True,
        needs_workspace=True,
    )
    """Multi-turn needs ``resume``: an instance configured without it narrows its metadata
    to ``multi_turn=False``."""

    class Config(StrictConfig):
        """Options of the ``command`` executor.

        Attributes:
            command: The agent's argv (a list, or a string split like a shell would).
            prompt_via: ``arg`` (the prompt replaces ``{prompt}``, or is appended as the last
                argument) or ``stdin``. Default: ``arg`` when ``{prompt}`` appears in the
                command, else ``stdin``.
            env: Environment variables for the agent (added to the spec's ``env``).
            output: Where the final answer is: ``stdout`` or ``file`` (``output_file``).
            output_file: Workspace path of the answer file when ``output: file``.
            events: How to read stdout as a JSONL event stream: ``none`` (plain text),
                ``vally``, ``claude-code`` or ``codex``. With a stream, the answer comes from
                the stream.
            resume: The argv for turns 2..n (e.g. with ``{session_id}``). Without it the
                executor runs single-turn stimuli only.
            session_id_from: A regular expression searched in stdout, then stderr, of each
                turn; its first group (or the whole match) becomes ``{session_id}``. By
                default the session id comes from the event stream, else a fresh uuid.
            model_flag: When set and a model is chosen, ``[model_flag, model]`` is appended
                (unless the command already uses ``{model}``).
            output_limit: Bytes of stdout and of stderr kept per turn.
            mcp_config: Write the trial's MCP servers to a file the agent reads (see
                ``docs/mcp.md``); required when a trial declares MCP servers.
        """

        command: list[str] | str
        prompt_via: Literal["arg", "stdin"] | None = None
        env: dict[str, str] = Field(default_factory=dict)
        output: Literal["stdout", "file"] = "stdout"
        output_file: str | None = None
        events: Literal["none", "vally", "claude-code", "codex"] = "none"
        resume: list[str] | str | None = None
        session_id_from: str | None = None
        model_flag: str | None = None
        output_limit: int = Field(default=50_000_000, gt=0)
        mcp_config: McpConfigFile | None = None

        @field_validator("command")
        @classmethod
        def _command_not_empty(cls, value: list[str] | str) -> list[str] | str:
            if not _argv(value):
                raise ValueError("command must name a program, e.g. ['my-agent', '{prompt}']")
            return value

        @field_validator("session_id_from")
        @classmethod
        def _regex(cls, value: str | None) -> str | None:
            if value is not None:
                try:
                    re.compile(value)
                except re.error as exc:
                    raise ValueError(f"session_id_from is not a valid regex: {exc}") from None
            return value

        @model_validator(mode="after")
        def _output_file(self) -> CommandExecutor.Config:
            if self.output == "file" and not self.output_file:
                raise ValueError("output: file needs output_file (a path in the workspace)")
            argv = [*_argv(self.command), *_argv(self.resume or []), *self.env.values()]
            if self.mcp_config is None and any("{mcp_config}" in a for a in argv):
                raise ValueError(
                    "'{mcp_config}' is used but mcp_config is not set; add e.g. "
                    "mcp_config: {format: claude-code}"
                )
            return self

    def __init__(self, config: CommandExecutor.Config | None = None) -> None:
        super().__init__(config)
        if self.config.resume is None:
            # Multi-turn works only when the agent can resume its session.
            self.metadata = self.metadata.model_copy(update={"multi_turn": False})  # type: ignore[misc]

    # ----------------------------------------------------------------- helpers

    def _render(
        self,
        template: list[str],
        values: dict[str, str],
        *,
        via_arg: bool,
        prompt: str,
        model: str | None,
    ) -> list[str]:
        has_prompt = any("{prompt}" in a for a in template)
        has_model = any("{model}" in a for a in template)
        argv = []
        for arg in template:
            for key, value in values.items():
                if key in arg:
                    arg = arg.replace(key, value)
            argv.append(arg)
        if self.config.model_flag and model and not has_model:
            argv += [self.config.model_flag, model]
        if via_arg and not has_prompt:
            argv.append(prompt)
        return argv

    def _via_arg(self, template: list[str]) -> bool:
        if self.config.prompt_via is not None:
            return self.config.prompt_via == "arg"
        return any("{prompt}" in a for a in template)

    def _session_from_output(self, result: ExecResult) -> str | None:
        """The session id found by ``session_id_from`` (a search bounded in time: the
        agent's output must not be able to stall the run; past the bound, none)."""
        if not self.config.session_id_from:
            return None
        import regex  # only for session_id_from: not at start-up

        pattern = regex.compile(self.config.session_id_from, regex.VERSION0)
        for text in (result.stdout, result.stderr):
            try:
                match = pattern.search(text, timeout=SESSION_ID_TIMEOUT)
            except TimeoutError:
                return None
            if match:
                return str(match.group(1) if match.groups() else match.group(0))
        return None

    async def _write_mcp_config(self, sandbox: Sandbox, options: ExecutorOptions) -> str:
        """Write the trial's MCP servers where the agent reads them; return the file's path
        in the sandbox ("" when no file is configured).

        Raises:
            UnsupportedError: The trial declares servers but ``mcp_config`` is not set.
        """
        target = self.config.mcp_config
        if target is None:
            if options.mcp_servers:
                raise UnsupportedError(
                    "executor 'command' was given MCP servers "
                    f"({', '.join(options.mcp_servers)}) but does not know where the agent "
                    "reads them",
                    hint="set config.mcp_config, e.g. mcp_config: {format: claude-code} and "
                    "'--mcp-config {mcp_config}' in the command",
                )
            return ""
        from vally_builtin.mcp.config import render_mcp_config

        text = render_mcp_config(options.mcp_servers, target.format)
        await sandbox.write_file(target.file, text.encode("utf-8"))
        return str(PurePosixPath(sandbox.workdir, target.file))

    def _log_stream(self, options: ExecutorOptions, stdout: str, turn: int) -> None:
        """Save the raw event stream (best effort): the first turn starts the file afresh,
        later turns append to it."""
        if options.session_log_dir is None or self.config.events == "none":
            return
        log = SessionLog()
        log.open(options.session_log_dir, "events.jsonl", "w" if turn == 0 else "a")
        if stdout:
            log.write_line(stdout)
        log.close()

    # ----------------------------------------------------------------- execute

    async def execute(
        self, stimulus: Stimulus, sandbox: Sandbox, options: ExecutorOptions
    ) -> Trajectory:
        """Run each prompt of the stimulus through the agent command.

        A timeout ends the trajectory with ``end_reason="timeout"``. When the event stream
        reports that the agent failed or hit its turn limit, the run ends there with
        ``end_reason`` ``error`` or ``max_turns``. Otherwise a non-zero exit with output is
        recorded as an ``error`` event; an agent killed by a signal is a crash (a fatal
        ``killed_by_signal`` event and ``end_reason="error"``; the signals of the turns are
        in ``metadata.extra.signals``); a first-turn crash with no output at all raises
        :class:`ExecutionError`.

        Raises:
            UnsupportedError: A multi-turn stimulus without ``resume`` configured.
            ExecutionError: The agent could not start, or crashed without any output.
        """
        prompts = stimulus.prompts
        if len(prompts) > 1 and self.config.resume is None:
            raise UnsupportedError(
                "executor 'command' does not support turns; set config.resume",
                hint="resume is the argv for turns 2..n, e.g. with '--resume {session_id}'",
            )
        run = await self._start_run(sandbox, options)
        for turn, prompt in enumerate(prompts):
            run.recorder.turn = turn
            turn_id = f"turn-{turn + 1}"
            run.recorder.user_message(prompt)
            run.recorder.turn_start(turn_id)
            finished = await self._turn(run, turn, prompt, sandbox, options)
            run.recorder.turn_end(turn_id)
            if finished:
                break
        run.extra["exitCodes"] = run.exit_codes
        run.extra["signals"] = run.signals
        run.extra["eventFormat"] = self.config.events
        return run.recorder.trajectory(
            stimulus,
            output=run.output,
            work_dir=sandbox.workdir,
            metadata=run_metadata(
                self.metadata,
                options,
                model=options.model,
                session_id=run.session_id,
                extra=run.extra,
            ),
            end_reason=run.end_reason,
            end_detail=run.end_detail,
            truncated=run.truncated,
        )

    async def _start_run(self, sandbox: Sandbox, options: ExecutorOptions) -> _CommandRun:
        """The state of a new run: placeholders, environment and deadline."""
        recorder = TrajectoryRecorder()
        deadline = time.monotonic() + options.timeout
        skills_dir = (
            str(PurePosixPath(options.skills[0].sandbox_path).parent)
            if options.skills
            else str(PurePosixPath(sandbox.workdir, ".vally", "skills"))
        )
        mcp_config = await self._write_mcp_config(sandbox, options)
        env = {**options.env, **self.config.env}
        if mcp_config or any("{workdir}" in v for v in self.config.env.values()):
            env = {
                k: v.replace("{mcp_config}", mcp_config).replace("{workdir}", sandbox.workdir)
                for k, v in env.items()
            }
        run = _CommandRun(recorder, env, skills_dir, mcp_config, deadline)
        if mcp_config:
            run.extra["mcpConfig"] = mcp_config
        return run

    async def _turn(
        self,
        run: _CommandRun,
        turn: int,
        prompt: str,
        sandbox: Sandbox,
        options: ExecutorOptions,
    ) -> bool:
        """Run one turn of the agent; True when the run ends with it."""
        remaining = run.deadline - time.monotonic()
        if remaining <= 0:
            run.end_reason, run.end_detail = "timeout", f"timed out after {options.timeout:g}s"
            return True
        result = await self._exec_turn(run, turn, prompt, remaining, sandbox, options)
        run.exit_codes.append(result.exit_code)
        if result.truncated:
            run.truncated = True
            run.recorder.error(
                f"the agent's output in turn {turn + 1} passed the executor's output_limit "
                f"of {self.config.output_limit:,} bytes per stream; the rest was dropped, so "
                "graders see only the start (raise config.output_limit to keep more)",
                code="output_truncated",
            )
        run.signals.append(result.signal)
        self._log_stream(options, result.stdout, turn)
        turn_output = await self._turn_output(run, turn, result, sandbox)
        if turn_output:
            run.output = turn_output
        if result.timed_out:
            run.end_reason, run.end_detail = "timeout", f"timed out after {options.timeout:g}s"
            return True
        if run.stream_end is not None:
            # The agent said why it stopped; its exit code adds nothing to that.
            run.end_reason, run.end_detail = run.stream_end
            return True
        killed = result.signal is not None
        if not killed and result.exit_code in (0, None):
            return False
        stderr = _tail(result.stderr)
        silent = not result.stdout.strip() and not turn_output
        how = (
            f"was killed by signal {signal_name(result.signal)}"
            if result.signal is not None
            else f"exited with code {result.exit_code}"
        )
        if silent and turn == 0:
            raise ExecutionError(
                f"agent command {run.argv[0]!r} {how} and produced no output; "
                f"stderr: {stderr or '(empty)'}",
                hint="run the command by hand in the workspace to see why it fails",
            )
        crashed = silent or killed
        run.recorder.error(
            (f"agent {how}" if killed else f"agent exited with exit code {result.exit_code}")
            + (f"; stderr: {stderr}" if stderr else ""),
            code="killed_by_signal" if killed else "nonzero_exit",
            fatal=crashed,
        )
        if crashed:
            detail = f"agent crashed in turn {turn + 1}" + (f" ({how})" if killed else "")
            run.end_reason, run.end_detail = "error", detail
        return crashed

    async def _exec_turn(
        self,
        run: _CommandRun,
        turn: int,
        prompt: str,
        remaining: float,
        sandbox: Sandbox,
        options: ExecutorOptions,
    ) -> ExecResult:
        """Render the turn's argv and run it in the sandbox.

        Raises:
            ExecutionError: The agent command could not start.
        """
        template = _argv(self.config.command if turn == 0 else self.config.resume or [])
        via_arg = self._via_arg(template)
        values = {
            "{prompt}": prompt,
            "{model}": options.model or "",
            "{workdir}": sandbox.workdir,
            "{session_id}": run.session_id,
            "{skills_dir}": run.skills_dir,
            "{mcp_config}": run.mcp_config,
        }
        run.argv = self._render(
            template, values, via_arg=via_arg, prompt=prompt, model=options.model
        )
        try:
            return await sandbox.exec(
                run.argv,
                env=run.env,
                timeout=remaining,
                stdin=None if via_arg else prompt.encode("utf-8"),
                output_limit=self.config.output_limit,
            )
        except BackendError as exc:
            raise ExecutionError(
                f"agent command {run.argv[0]!r} could not start: {exc.message}",
                hint="check config.command of the 'command' executor",
            ) from exc

    async def _turn_output(
        self, run: _CommandRun, turn: int, result: ExecResult, sandbox: Sandbox
    ) -> str:
        """Record the turn's events and return its answer (from the event stream, stdout or
        the output file)."""
        recorder = run.recorder
        if self.config.events != "none":
            parsed = parse_stream(
                self.config.events, result.stdout, turn=turn, session=run.stream_session
            )
            for event in parsed.events:
                recorder.add(event)
            turn_output = parsed.output
            if parsed.session_id:
                run.session_id = parsed.session_id
            merge_extra(run.extra, parsed.extra)
            if parsed.end_reason is not None and not result.timed_out:
                run.stream_end = (parsed.end_reason, parsed.end_detail)
            if turn_output and not any(e.type == "assistant_message" for e in parsed.events):
                recorder.assistant_message(turn_output)
        else:
            turn_output = result.stdout.strip()
        found = self._session_from_output(result)
        if found:
            run.session_id = found
        if self.config.output == "file" and self.config.output_file and not result.timed_out:
            try:
                raw = await sandbox.read_file(self.config.output_file)
                turn_output = raw.decode("utf-8", errors="replace").strip()
            except FileNotFoundError:
                recorder.error(
                    f"output file {self.config.output_file!r} was not written by the agent",
                    code="missing_output_file",
                )
        if self.config.events == "none" and turn_output:
            recorder.assistant_message(turn_output)
        return turn_output


@dataclass
class _CommandRun:
    """The state of one trial's run of the agent command."""

    recorder: TrajectoryRecorder
    env: dict[str, str]
    skills_dir: str
    mcp_config: str
    deadline: float
    session_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    argv: list[str] = field(default_factory=list)
    output: str = ""
    end_reason: Literal["completed", "timeout", "error", "max_turns"] = "completed"
    end_detail: str | None = None
    exit_codes: list[int | None] = field(default_factory=list)
    signals: list[int | None] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    stream_session: dict[str, Any] = field(default_factory=dict)
    stream_end: tuple[Literal["error", "max_turns"], str | None] | None = None
    truncated: bool = False
