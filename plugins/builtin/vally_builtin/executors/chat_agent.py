"""The ``chat-agent`` executor: a minimal tool-using coding agent over an LLM provider.

The agent talks to the model through ``options.llm`` (the ``llm:`` provider of
``.vally.yaml``) and acts only through tools that run in the trial's sandbox, confined to the
workspace:

* ``list_files(path)``, ``read_file(path, offset, limit)``, ``write_file(path, content)``;
* ``run_command(command, timeout)``: ``sh -c`` in the workspace;
* ``load_skill(name)``, offered when skills are staged: returns the skill's ``SKILL.md`` body
  and records a ``skill_activation`` event. The system prompt lists each skill's name and
  description, so skills are disclosed progressively.

Every model call becomes an agent turn (``turn_start`` / ``turn_end`` events around it and the
tools it asked for), with a ``token_usage`` event, an ``assistant_message`` when the model
wrote text, and a ``tool_call`` / ``tool_result`` pair per tool call (calls of one response
share a ``batch_id``). ``turns`` of a stimulus run in one conversation; the events of each
authored prompt carry its 0-based index as ``turn``.

Limits (``constraints``) are enforced in flight:

* ``max_turns``: agent turns, i.e. **model calls** over the whole trial (the ``turnCount``
  metric counts the same thing); a model that wants another call after that ends the trial;
* ``max_tokens``: input plus output tokens over all calls, checked after each call;
* ``max_duration``: wall-clock seconds of the whole trial (also ``options.timeout``);
* ``max_tool_calls``: tool calls over the whole trial; the next one ends the trial.

The trajectory's ``end_reason`` says why the agent stopped (``completed`` or the limit), and
``end_detail`` explains it. The config's ``max_steps`` is a safety cap on model calls per
authored prompt (ends with ``max_turns``). A provider failure that survived the provider's
retries raises :class:`~vally.errors.ExecutionError` (an error of that trial only).

MCP servers declared for the trial (``environment.mcpServers``) are started with the official
``mcp`` SDK before the first model call (stdio servers through the sandbox, so inside the
container for ``docker``), and their tools are offered beside the built-in ones as
``<server>__<tool>`` (honouring each server's ``tools`` allow-list). Their ``tool_call`` and
``tool_result`` events carry the server's name in ``server``. A server that does not start or
answer ``initialize`` within its ``timeout`` is a :class:`~vally.errors.SetupError` of the
trial; a server that dies mid-trial turns its tool calls into error results the model sees.
Every server is stopped when the trial ends (see :mod:`vally_builtin.mcp.toolbox`).

The system prompt lives in ``chat_agent_system.md`` next to this module (``{{workdir}}`` and
``{{skills}}`` are filled in); its sha256 is recorded in ``metadata.extra["harness_sha256"]``.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import uuid
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vally import (
    BaseExecutor,
    ChatMessage,
    ChatRequest,
    Constraints,
    EndReason,
    ExecutionError,
    ExecutorMetadata,
    ExecutorOptions,
    LLMError,
    LLMProvider,
    Sandbox,
    SetupError,
    SkillRef,
    Stimulus,
    StrictConfig,
    ToolCall,
    ToolSpec,
    Trajectory,
    TrajectoryRecorder,
    VallyError,
    loads_bounded,
)

from .shared import AgentStop, SessionLog, run_metadata, run_prompts, trial_constraints

if TYPE_CHECKING:
    from vally_builtin.mcp.toolbox import McpToolbox

SYSTEM_PROMPT_RESOURCE = "chat_agent_system.md"
"""The default system prompt, a file of this package."""

SKILL_FILE = "SKILL.md"


# --------------------------------------------------------------------------- tool arguments


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ListFilesArgs(_Args):
    """Arguments of ``list_files``."""

    path: str = Field(default=".", description="Folder to list, relative to the workspace.")


class ReadFileArgs(_Args):
    """Arguments of ``read_file``."""

    path: str = Field(description="File to read, relative to the workspace.")
    offset: int = Field(default=1, ge=1, description="First line to return (1-based).")
    limit: int = Field(default=2000, ge=1, description="Maximum number of lines to return.")


class WriteFileArgs(_Args):
    """Arguments of ``write_file``."""

    path: str = Field(description="File to create or replace, relative to the workspace.")
    content: str = Field(description="The complete new content of the file.")


class RunCommandArgs(_Args):
    """Arguments of ``run_command``."""

    command: str = Field(description="Shell command, run with 'sh -c' in the workspace.")
    timeout: float | None = Field(
        default=None, gt=0, description="Seconds before the command is killed."
    )


class LoadSkillArgs(_Args):
    """Arguments of ``load_skill``."""

    name: str = Field(description="Name of the skill to load, as listed in the system prompt.")


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    schema["additionalProperties"] = False
    return schema


TOOL_DESCRIPTIONS: dict[str, tuple[str, type[_Args]]] = {
    "list_files": ("List the files below a folder of the workspace.", ListFilesArgs),
    "read_file": (
        "Read lines of a text file of the workspace (offset is the first line, 1-based).",
        ReadFileArgs,
    ),
    "write_file": (
        "Create or replace a file of the workspace with the given content.",
        WriteFileArgs,
    ),
    "run_command": (
        "Run a shell command in the workspace; returns exit code, stdout and stderr.",
        RunCommandArgs,
    ),
    "load_skill": (
        "Load a skill's instructions by name (see the skills listed in the system prompt).",
        LoadSkillArgs,
    ),
}
"""Tool name -> (description, argument model)."""


class ToolError(Exception):
    """A tool call that failed; the message goes back to the model as the tool result."""


# --------------------------------------------------------------------------- executor


class ChatAgentExecutor(BaseExecutor["ChatAgentExecutor.Config"]):
    """A minimal coding agent: an LLM provider in a loop with workspace tools and skills."""

    metadata: ClassVar[ExecutorMetadata] = ExecutorMetadata(
        name="chat-agent",
        description="Built-in tool-using coding agent over the configured LLM provider.",
        needs_llm=True,
        multi_turn=True,
        needs_workspace=True,
    )

    class Config(StrictConfig):
        """Options of the ``chat-agent`` executor.

        Attributes:
            model: Model used when the run gives none (``--model`` / ``defaults.model`` win).
            max_steps: Safety cap on model calls per authored prompt.
            temperature: Sampling temperature (None: the server's default).
            max_output_tokens: Cap on tokens per model answer (None: the server's default).
            system_prompt_file: A file replacing the built-in system prompt, relative to the
                eval file. ``{{workdir}}`` and ``{{skills}}`` in it are filled in.
            command_timeout: Default seconds for ``run_command``.
            max_command_timeout: Largest timeout the model may ask ``run_command`` for.
            tool_output_limit: Characters of a tool result sent back to the model.
            request_timeout: Seconds per model call (None: the provider's default).
        """

        model: str | None = None
        max_steps: int = Field(default=50, ge=1)
        temperature: float | None = Field(default=None, ge=0)
        max_output_tokens: int | None = Field(default=None, ge=1)
        system_prompt_file: str | None = None
        command_timeout: float = Field(default=60.0, gt=0)
        max_command_timeout: float = Field(default=600.0, gt=0)
        tool_output_limit: int = Field(default=30_000, ge=200)
        request_timeout: float | None = Field(default=None, gt=0)

    # ------------------------------------------------------------------ setup

    def _system_template(self, options: ExecutorOptions) -> tuple[str, str, str]:
        """(template text, sha256 of its bytes, where it came from)."""
        if self.config.system_prompt_file:
            base = options.spec_dir or Path.cwd()
            path = (base / self.config.system_prompt_file).resolve()
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise ExecutionError(
                    f"chat-agent: cannot read system_prompt_file {path}: {exc.strerror or exc}",
                    hint="system_prompt_file is relative to the eval file's folder",
                ) from exc
            source = str(path)
        else:
            data = (
                resources.files("vally_builtin.executors")
                .joinpath(SYSTEM_PROMPT_RESOURCE)
                .read_bytes()
            )
            source = f"vally_builtin.executors/{SYSTEM_PROMPT_RESOURCE}"
        text = data.decode("utf-8", errors="replace")
        return text, hashlib.sha256(data).hexdigest(), source

    @staticmethod
    def _skills_section(skills: Sequence[SkillRef]) -> str:
        if not skills:
            return ""
        lines = [
            "",
            "## Skills",
            "",
            "Skills hold instructions for specific tasks. Before working on a task that matches",
            "a skill's description, call `load_skill(name)` and follow what it says.",
            "",
        ]
        lines += [f"- `{s.name}`: {' '.join(s.description.split())}" for s in skills]
        return "\n".join(lines) + "\n"

    def _tools(self, skills: Sequence[SkillRef]) -> list[ToolSpec]:
        names = ["list_files", "read_file", "write_file", "run_command"]
        if skills:
            names.append("load_skill")
        return [
            ToolSpec(
                name=n,
                description=TOOL_DESCRIPTIONS[n][0],
                parameters=_schema(TOOL_DESCRIPTIONS[n][1]),
            )
            for n in names
        ]

    # ------------------------------------------------------------------ execute

    async def execute(
        self, stimulus: Stimulus, sandbox: Sandbox, options: ExecutorOptions
    ) -> Trajectory:
        """Run the stimulus's prompt (or turns, in one conversation) and record everything.

        Raises:
            ExecutionError: No provider or model configured, the system prompt file is
                unreadable, or a model call failed after the provider's retries.
        """
        provider, model = self._provider_and_model(options)
        template, harness_sha, prompt_source = self._system_template(options)
        system = template.replace("{{workdir}}", sandbox.workdir).replace(
            "{{skills}}", self._skills_section(options.skills)
        )
        constraints = trial_constraints(options, stimulus)
        tools = self._tools(options.skills)
        log = SessionLog()
        recorder = TrajectoryRecorder(on_event=lambda event: log.write_line(event.to_json_line()))
        toolbox = await _start_mcp(options, sandbox, [t.name for t in tools])
        try:
            if toolbox is not None:
                tools += [t.spec() for t in toolbox.tools]
            log.open(options.session_log_dir, "events.jsonl")
            run = _Run(
                executor=self,
                provider=provider,
                model=model,
                sandbox=sandbox,
                options=options,
                constraints=constraints,
                tools=tools,
                system=system,
                recorder=recorder,
                mcp=toolbox,
            )
            try:
                end_reason, end_detail = await run.run(stimulus.prompts)
            finally:
                log.close()
        finally:
            if toolbox is not None:
                await toolbox.aclose()
        extra: dict[str, Any] = {
            "harness_sha256": harness_sha,
            "system_prompt": prompt_source,
            "model_calls": run.calls,
            "skills_activated": sorted(run.activated),
        }
        if toolbox is not None:
            extra["mcp_tools"] = {
                name: [t.tool for t in toolbox.tools if t.server == name]
                for name in options.mcp_servers
            }
        return recorder.trajectory(
            stimulus,
            work_dir=sandbox.workdir,
            metadata=run_metadata(
                self.metadata, options, model=model, session_id=run.session_id, extra=extra
            ),
            end_reason=end_reason,
            end_detail=end_detail,
        )

    def _provider_and_model(self, options: ExecutorOptions) -> tuple[LLMProvider, str]:
        """The LLM provider and the model the run uses.

        Raises:
            ExecutionError: No provider or no model is configured.
        """
        provider = options.llm
        if provider is None:
            raise ExecutionError(
                "chat-agent needs an LLM provider, but none is configured",
                hint="add an 'llm:' section to .vally.yaml (e.g. llm: {provider: openai, "
                "base_url: http://localhost:11434/v1}) or set OPENAI_BASE_URL and "
                "OPENAI_API_KEY",
            )
        model = options.model or self.config.model
        if not model:
            raise ExecutionError(
                "chat-agent needs a model name, but none was given",
                hint="set 'defaults.model' in the eval, pass --model, or set the executor's "
                "config.model",
            )
        return provider, model


async def _start_mcp(
    options: ExecutorOptions, sandbox: Sandbox, reserved: Sequence[str]
) -> McpToolbox | None:
    """Start the trial's MCP servers (None when it declares none).

    Raises:
        SetupError: The ``mcp`` package is missing, or a server did not start.
    """
    if not options.mcp_servers:
        return None
    try:
        from vally_builtin.mcp.toolbox import start_toolbox
    except ImportError as exc:
        raise SetupError(
            "chat-agent: this trial declares MCP servers "
            f"({', '.join(options.mcp_servers)}) but the 'mcp' package is not installed "
            f"({exc})",
            hint="install the MCP extra: pip install 'vally[mcp]'",
        ) from exc
    return await start_toolbox(
        options.mcp_servers,
        sandbox,
        env=options.env,
        log_dir=options.session_log_dir,
        reserved=reserved,
    )


class _Run:
    """The state of one trial's conversation."""

    def __init__(
        self,
        *,
        executor: ChatAgentExecutor,
        provider: LLMProvider,
        model: str,
        sandbox: Sandbox,
        options: ExecutorOptions,
        constraints: Constraints,
        tools: list[ToolSpec],
        system: str,
        recorder: TrajectoryRecorder,
        mcp: McpToolbox | None = None,
    ) -> None:
        self.config = executor.config
        self.mcp = mcp
        self.provider = provider
        self.model = model
        self.sandbox = sandbox
        self.options = options
        self.constraints = constraints
        self.tools = tools
        self.tool_names = {t.name for t in tools}
        self.messages: list[ChatMessage] = [ChatMessage(role="system", content=system)]
        self.recorder = recorder
        self.session_id = uuid.uuid4().hex
        self.calls = 0
        self.tool_calls = 0
        self.tokens = 0
        self.activated: set[str] = set()
        self._pending: tuple[str, str] | None = None  # (tool name, id) of a running tool
        self._open_turn: str | None = None  # turn_id of an agent turn not yet ended

    # ------------------------------------------------------------------ limits

    def _deadline(self) -> tuple[float | None, EndReason]:
        """Seconds the whole trial may take and the end reason when they run out."""
        candidates: list[tuple[float, EndReason]] = []
        if self.constraints.max_duration is not None:
            candidates.append((float(self.constraints.max_duration), "max_duration"))
        timeout = self.options.timeout
        if timeout and timeout > 0 and timeout != float("inf"):
            candidates.append((float(timeout), "timeout"))
        if not candidates:
            return None, "timeout"
        return min(candidates, key=lambda c: (c[0], c[1] != "max_duration"))

    async def run(self, prompts: list[str]) -> tuple[EndReason, str | None]:
        """Drive the conversation through every prompt; return the end reason and detail."""
        return await run_prompts(
            self.recorder,
            prompts,
            self._prompt,
            deadline=self._deadline(),
            on_stop=self._interrupt,
            on_timeout=self._interrupt,
        )

    def _interrupt(self, detail: str) -> None:
        """Close the tool call and the agent turn that were open when the agent stopped."""
        if self._pending is not None:
            name, call_id = self._pending
            self._pending = None
            self.recorder.tool_result(
                name,
                call_id,
                f"interrupted: {detail}",
                success=False,
                server=self._server_of(name),
            )
        if self._open_turn is not None:
            self._end_turn()

    def _end_turn(self) -> None:
        if self._open_turn is not None:
            self.recorder.turn_end(self._open_turn)
            self._open_turn = None

    # ------------------------------------------------------------------ one prompt

    async def _prompt(self, prompt: str) -> None:
        self.recorder.user_message(prompt)
        self.messages.append(ChatMessage(role="user", content=prompt))
        steps = 0
        while True:
            max_turns = self.constraints.max_turns
            if max_turns is not None and self.calls >= max_turns:
                raise AgentStop.max_turns(max_turns)
            if steps >= self.config.max_steps:
                raise AgentStop(
                    "max_turns",
                    f"stopped: the executor's max_steps safety cap of {self.config.max_steps} "
                    "model calls for one prompt was reached",
                )
            steps += 1
            if not await self._step():
                return

    async def _step(self) -> bool:
        """One agent turn: a model call and the tools it asked for. False when it answered
        without tool calls (the prompt is done)."""
        self.calls += 1
        turn_id = f"turn-{self.calls}"
        self.recorder.turn_start(turn_id)
        self._open_turn = turn_id
        request = ChatRequest(
            model=self.model,
            messages=list(self.messages),
            tools=self.tools,
            reasoning_effort=self.options.reasoning_effort,
            temperature=self.config.temperature,
            max_tokens=self.config.max_output_tokens,
            timeout=self.config.request_timeout,
        )
        try:
            response = await self.provider.chat(request)
        except LLMError as exc:
            self.recorder.error(exc.message, code=exc.code, fatal=True)
            raise ExecutionError(
                f"chat-agent: the model call failed ({exc.error_class}"
                f"{', retries exhausted' if exc.retryable else ''}): {exc.message}",
                hint="check the llm: settings in .vally.yaml and that the server is reachable",
            ) from exc
        self.recorder.token_usage(
            response.input_tokens,
            response.output_tokens,
            model=response.model or self.model,
            cache_read_tokens=response.cache_read_tokens,
        )
        self.tokens += response.input_tokens + response.output_tokens
        message = response.message
        if message.content:
            self.recorder.assistant_message(message.content)
        self.messages.append(
            ChatMessage(role="assistant", content=message.content, tool_calls=message.tool_calls)
        )
        max_tokens = self.constraints.max_tokens
        if max_tokens is not None and self.tokens > max_tokens:
            raise AgentStop(
                "max_tokens",
                f"stopped: {self.tokens} tokens used, over max_tokens of {max_tokens}",
            )
        if not message.tool_calls:
            self._end_turn()
            return False
        batch_id = uuid.uuid4().hex[:12]
        for call in message.tool_calls:
            limit = self.constraints.max_tool_calls
            if limit is not None and self.tool_calls >= limit:
                raise AgentStop(
                    "max_tool_calls",
                    f"stopped: max_tool_calls of {limit} reached and the model asked for "
                    f"another ({call.name})",
                )
            self.tool_calls += 1
            await self._tool(call, batch_id)
        self._end_turn()
        return True

    # ------------------------------------------------------------------ tools

    def _server_of(self, name: str) -> str | None:
        """The MCP server offering the tool ``name`` (None for built-in tools)."""
        tool = self.mcp.get(name) if self.mcp is not None else None
        return tool.server if tool is not None else None

    async def _tool(self, call: ToolCall, batch_id: str) -> None:
        parsed: Any
        try:
            parsed = loads_bounded(call.arguments) if call.arguments.strip() else {}
        except ValueError:
            parsed = None
        server = self._server_of(call.name)
        arguments = parsed if isinstance(parsed, dict) else call.arguments
        self.recorder.tool_call(call.name, call.id, arguments, server=server, batch_id=batch_id)
        self._pending = (call.name, call.id)
        success = True
        try:
            result = await self._dispatch(call, parsed)
        except ToolError as exc:
            success, result = False, f"error: {exc}"
        except VallyError as exc:
            success, result = False, f"error: {exc.message}"
        except (OSError, UnicodeError) as exc:
            success, result = False, f"error: {type(exc).__name__}: {exc}"
        if isinstance(result, tuple):
            success, result = result
        result = self._cap(str(result))
        self._pending = None
        self.recorder.tool_result(call.name, call.id, result, success=success, server=server)
        self.messages.append(
            ChatMessage(role="tool", content=result, tool_call_id=call.id, name=call.name)
        )

    def _cap(self, text: str) -> str:
        limit = self.config.tool_output_limit
        if len(text) <= limit:
            return text
        return text[:limit] + f"\n[... {len(text) - limit} more characters cut]"

    async def _dispatch(self, call: ToolCall, parsed: Any) -> str | tuple[bool, str]:
        if call.name not in self.tool_names:
            raise ToolError(
                f"unknown tool {call.name!r}; available tools: {', '.join(sorted(self.tool_names))}"
            )
        if self.mcp is not None and self.mcp.get(call.name) is not None:
            if not isinstance(parsed, dict):
                what = "not valid JSON" if parsed is None else "not a JSON object"
                raise ToolError(
                    f"the arguments of {call.name} are {what}: {call.arguments[:200]!r}; "
                    "send a JSON object matching the tool's parameters"
                )
            outcome = await self.mcp.call(call.name, parsed)
            return outcome.success, outcome.text
        model = TOOL_DESCRIPTIONS[call.name][1]
        example = json.dumps({k: f"<{k}>" for k in model.model_json_schema().get("required", [])})
        if not isinstance(parsed, dict):
            what = "not valid JSON" if parsed is None else "not a JSON object"
            raise ToolError(
                f"the arguments of {call.name} are {what}: {call.arguments[:200]!r}; "
                f"send a JSON object such as {example}"
            )
        try:
            args = model.model_validate(parsed)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(arguments)'}: {err['msg']}"
                for err in exc.errors()
            )
            allowed = ", ".join(model.model_fields)
            raise ToolError(
                f"invalid arguments for {call.name}: {problems}. Allowed fields: {allowed}; "
                f"for example {example}"
            ) from None
        if isinstance(args, ListFilesArgs):
            return await self._list_files(args)
        if isinstance(args, ReadFileArgs):
            return await self._read_file(args)
        if isinstance(args, WriteFileArgs):
            return await self._write_file(args)
        if isinstance(args, RunCommandArgs):
            return await self._run_command(args)
        if isinstance(args, LoadSkillArgs):
            return await self._load_skill(args)
        raise ToolError(f"tool {call.name!r} is not implemented")  # pragma: no cover

    def _confine(self, path: str) -> str:
        """A workspace-relative POSIX path, refusing anything that leaves the workspace."""
        raw = path.strip().replace("\\", "/") or "."
        workdir = self.sandbox.workdir.rstrip("/") or "/"
        if raw.startswith("~"):
            raise ToolError(f"path {path!r} is outside the workspace; use a relative path")
        if posixpath.isabs(raw):
            normal = posixpath.normpath(raw)
            if normal != workdir and not normal.startswith(workdir + "/"):
                raise ToolError(
                    f"path {path!r} is outside the workspace {workdir}; use a relative path"
                )
            raw = posixpath.relpath(normal, workdir)
        rel = posixpath.normpath(raw)
        if rel == ".." or rel.startswith("../"):
            raise ToolError(f"path {path!r} leaves the workspace; use a path inside it")
        return rel

    async def _list_files(self, args: ListFilesArgs) -> str:
        rel = self._confine(args.path)
        files = await self.sandbox.list_files(rel)
        if not files:
            return f"(no files below {rel})"
        shown = files[:1000]
        text = "\n".join(shown)
        if len(files) > len(shown):
            text += f"\n[... {len(files) - len(shown)} more files]"
        return text

    async def _read_file(self, args: ReadFileArgs) -> str:
        rel = self._confine(args.path)
        try:
            data = await self.sandbox.read_file(rel)
        except FileNotFoundError:
            raise ToolError(
                f"no file {rel!r} in the workspace; call list_files to see what exists"
            ) from None
        except IsADirectoryError:
            raise ToolError(f"{rel!r} is a folder; call list_files on it") from None
        lines = data.decode("utf-8", errors="replace").splitlines(keepends=True)
        start = args.offset - 1
        if lines and start >= len(lines):
            raise ToolError(f"offset {args.offset} is past the end of {rel} ({len(lines)} lines)")
        chunk = lines[start : start + args.limit]
        text = "".join(chunk)
        rest = len(lines) - (start + len(chunk))
        if rest > 0:
            text += (
                f"\n[... {rest} more lines; call read_file with offset="
                f"{start + len(chunk) + 1} to continue]"
            )
        return text

    async def _write_file(self, args: WriteFileArgs) -> str:
        rel = self._confine(args.path)
        if rel == ".":
            raise ToolError("write_file needs a file path, not the workspace itself")
        data = args.content.encode("utf-8")
        await self.sandbox.write_file(rel, data)
        return f"wrote {len(data)} bytes to {rel}"

    async def _run_command(self, args: RunCommandArgs) -> tuple[bool, str]:
        timeout = min(args.timeout or self.config.command_timeout, self.config.max_command_timeout)
        result = await self.sandbox.exec(
            ["sh", "-c", args.command],
            env=dict(self.options.env) or None,
            timeout=timeout,
            output_limit=self.config.tool_output_limit,
        )
        parts = []
        if result.timed_out:
            parts.append(f"command timed out after {timeout:g}s and was killed")
        parts.append(f"exit code: {result.exit_code}")
        parts.append(f"stdout:\n{result.stdout}" if result.stdout else "stdout: (empty)")
        parts.append(f"stderr:\n{result.stderr}" if result.stderr else "stderr: (empty)")
        if result.truncated:
            parts.append("[output was cut]")
        return (result.exit_code == 0 and not result.timed_out), "\n".join(parts)

    async def _load_skill(self, args: LoadSkillArgs) -> str:
        skills = {s.name: s for s in self.options.skills}
        skill = skills.get(args.name.strip())
        if skill is None:
            raise ToolError(
                f"no skill named {args.name!r}; available skills: {', '.join(sorted(skills))}"
            )
        path = posixpath.join(skill.sandbox_path, SKILL_FILE)
        try:
            data = await self.sandbox.read_file(path)
        except (OSError, VallyError):
            result = await self.sandbox.exec(["cat", path], timeout=30)
            if result.exit_code != 0:
                raise ToolError(
                    f"cannot read {path} for skill {skill.name!r}: {result.stderr.strip()}"
                ) from None
            data = result.stdout.encode("utf-8")
        text = data.decode("utf-8", errors="replace")
        body = _strip_frontmatter(text)
        self.recorder.skill_activation(skill.name)
        self.activated.add(skill.name)
        folder = skill.sandbox_path
        return (
            f"# Skill: {skill.name}\n"
            f"(files of this skill are in {folder}; paths in it are relative to that folder)\n\n"
            f"{body}"
        )


def _strip_frontmatter(text: str) -> str:
    """The Markdown body of a SKILL.md (without its ``---`` YAML frontmatter)."""
    if text.startswith("---"):
        end = text.find("\n---", 3)
        if end >= 0:
            after = text.find("\n", end + 4)
            return text[after + 1 :] if after >= 0 else ""
    return text
