"""The ``copilot`` executor: one GitHub Copilot CLI session per trial, through the SDK."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, ClassVar

from vally import (
    BaseExecutor,
    Constraints,
    EndReason,
    ExecutionError,
    ExecutorMetadata,
    ExecutorOptions,
    Sandbox,
    SetupError,
    Stimulus,
    Trajectory,
    TrajectoryRecorder,
    VallyError,
)

from ..shared import AgentStop, SessionLog, run_metadata, run_prompts, trial_constraints
from .config import CopilotConfig
from .events import CopilotEventMapper, SessionFacts
from .permissions import PermissionPolicy
from .processes import descendants, kill_all
from .setup import (
    Provider,
    cli_environment,
    default_cache_dir,
    import_sdk,
    resolve_cli,
    resolve_provider,
)

STOP_TIMEOUT = 2.0
"""Seconds each step of a graceful shutdown (session, then CLI) may take before the CLI and
its children are killed. Everything stays well inside the kernel's grace period after a
trial's timeout."""

POLL_SECONDS = 1.0
"""How often the executor checks that the CLI is still alive while it waits for events."""

CONTAINER_HOME = "/tmp/vally-copilot-home"
"""The CLI's home inside a trial's container."""


class _Limits:
    """Checks the trial's constraints after each counted event; the first one crossed
    sets :attr:`stop` (the executor then aborts the session)."""

    def __init__(self, constraints: Constraints) -> None:
        self.constraints = constraints
        self.stop: AgentStop | None = None
        self.changed = asyncio.Event()

    def check(self, facts: SessionFacts) -> None:
        c = self.constraints
        if self.stop is None:
            if c.max_turns is not None and facts.agent_turns > c.max_turns:
                self.stop = AgentStop.max_turns(c.max_turns)
            elif c.max_tool_calls is not None and facts.tool_calls > c.max_tool_calls:
                self.stop = AgentStop(
                    "max_tool_calls",
                    f"stopped: max_tool_calls of {c.max_tool_calls} reached and the agent "
                    "asked for another",
                )
            elif c.max_tokens is not None and facts.tokens > c.max_tokens:
                self.stop = AgentStop(
                    "max_tokens",
                    f"stopped: {facts.tokens} tokens used, over max_tokens of {c.max_tokens}",
                )
        self.changed.set()


class CopilotExecutor(BaseExecutor[CopilotConfig]):
    """Runs the GitHub Copilot CLI agent through its official Python SDK."""

    metadata: ClassVar[ExecutorMetadata] = ExecutorMetadata(
        name="copilot",
        description="GitHub Copilot CLI agent through the official SDK (github-copilot-sdk).",
        needs_llm=True,
        multi_turn=True,
        needs_workspace=True,
    )
    Config = CopilotConfig

    def __init__(self, config: CopilotConfig | None = None) -> None:
        super().__init__(config)
        self._sdk = import_sdk()

    async def execute(
        self, stimulus: Stimulus, sandbox: Sandbox, options: ExecutorOptions
    ) -> Trajectory:
        """Run the stimulus's prompts as turns of one Copilot session and record it.

        Raises:
            SetupError: The CLI or a model provider is missing.
            ExecutionError: The CLI did not start, or the session failed (a model error
                after Copilot's own retries); the message is the session's.
        """
        provider = resolve_provider(self.config, options, os.environ)
        constraints = trial_constraints(options, stimulus)
        run = _SessionRun(self, sandbox, options, provider, constraints)
        try:
            reason, detail = await run.run(stimulus.prompts)
        except BaseException:
            await run.close(graceful=False)
            raise
        await run.close(graceful=reason in {"completed", "error"})
        facts = run.mapper.facts
        if reason == "error":
            raise ExecutionError(
                f"copilot: the session failed: {detail}",
                hint="the raw session events are in copilot-events.jsonl in the trial's folder",
            )
        return run.recorder.trajectory(
            stimulus,
            work_dir=sandbox.workdir,
            metadata=run_metadata(
                self.metadata,
                options,
                model=provider.model,
                session_id=facts.session_id,
                extra={**facts.extra, "provider": "byok" if provider.byok else "github"},
            ),
            end_reason=reason,
            end_detail=detail,
        )


class _SessionRun:
    """One trial's CLI process, session and recorder."""

    def __init__(
        self,
        executor: CopilotExecutor,
        sandbox: Sandbox,
        options: ExecutorOptions,
        provider: Provider,
        constraints: Constraints,
    ) -> None:
        self.executor = executor
        self.config = executor.config
        self.sdk = executor._sdk
        self.sandbox = sandbox
        self.options = options
        self.provider = provider
        self.limits = _Limits(constraints)
        self.recorder = TrajectoryRecorder()
        self.mapper = CopilotEventMapper(self.recorder, on_change=self.limits.check)
        self.log = SessionLog()
        self.log.open(options.session_log_dir, "copilot-events.jsonl", "w")
        self.client: Any = None
        self.session: Any = None
        self.home: str | None = None
        self.loop = asyncio.get_running_loop()

    # ------------------------------------------------------------------ run

    def _deadline(self) -> tuple[float, EndReason]:
        limit = self.limits.constraints.max_duration
        if limit is not None and limit < self.options.timeout:
            return float(limit), "max_duration"
        return float(self.options.timeout), "timeout"

    async def run(self, prompts: list[str]) -> tuple[EndReason, str | None]:
        """Start the CLI, open the session and send every prompt; return the end reason
        and its detail."""
        return await run_prompts(
            self.recorder,
            prompts,
            self._prompt,
            deadline=self._deadline(),
            on_stop=lambda _detail: self._abort(),
            # No time for a polite abort: the CLI is killed at close.
            on_timeout=lambda _detail: self._interrupt(),
            start=self._open,
        )

    async def _prompt(self, prompt: str) -> None:
        facts = self.mapper.facts
        facts.idle = False
        self.limits.changed.clear()
        await self.session.send(prompt)
        while not facts.idle and self.limits.stop is None:
            try:
                await asyncio.wait_for(self.limits.changed.wait(), timeout=POLL_SECONDS)
            except TimeoutError:
                exited = self._cli_exit()
                if exited is not None:
                    raise AgentStop("error", exited) from None
            self.limits.changed.clear()
        if self.limits.stop is not None:
            raise self.limits.stop
        if facts.fatal_error is not None:
            raise AgentStop("error", facts.fatal_error)

    def _cli_exit(self) -> str | None:
        """Why the CLI is gone (None while it runs)."""
        process = getattr(self.client, "_process", None)
        code = process.poll() if process is not None and hasattr(process, "poll") else None
        if code is not None:
            return f"the Copilot CLI exited unexpectedly with code {code}"
        if getattr(self.client, "_state", "connected") == "disconnected":
            return "the Copilot CLI closed its connection unexpectedly"
        return None

    async def _abort(self) -> None:
        """Cancel the agent's current work (best effort, bounded)."""
        if self.session is None:
            return
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.session.abort(), timeout=STOP_TIMEOUT)
        self._interrupt()

    def _interrupt(self) -> None:
        """Close the tool calls and the agent turn that were open when the session stopped."""
        for call_id, name, server in self.mapper.pending_calls():
            self.recorder.tool_result(
                name, call_id, "interrupted: the session was stopped", success=False, server=server
            )
        self.mapper.close_turn()

    # ------------------------------------------------------------------ events

    def _on_event(self, event: Any) -> None:
        """Called by the SDK for every session event (possibly from its reader thread)."""
        try:
            wire = event.to_dict()
        except Exception:
            return
        self.loop.call_soon_threadsafe(self._handle, wire)

    def _handle(self, wire: dict[str, Any]) -> None:
        self.log.write_json(wire)
        self.mapper.handle(wire)
        self.limits.changed.set()

    def _on_permission(self, request: Any, invocation: Any) -> Any:
        rpc = importlib.import_module("copilot.generated.rpc")
        try:
            wire = request.to_dict()
        except Exception:
            wire = {"kind": getattr(request, "kind", "")}
        decision = self.policy.decide(wire)
        if decision.approved:
            return rpc.PermissionDecisionApproveOnce()
        return rpc.PermissionDecisionReject(feedback=f"denied by the eval: {decision.reason}")

    # ------------------------------------------------------------------ start and stop

    async def _open(self) -> None:
        """Start the CLI and create the session."""
        workdir = self.sandbox.workdir
        roots = [workdir, *(s.sandbox_path for s in self.options.skills)]
        self.policy = PermissionPolicy(self.config.permissions, roots, self.options.mcp_servers)
        connection, env = self._connection()
        sdk = self.sdk
        self.client = sdk.CopilotClient(
            connection=connection,
            env=env,
            github_token=self.provider.github_token,
            use_logged_in_user=False,
            working_directory=workdir if self.sandbox.host_workdir is not None else None,
            log_level=self.config.log_level,
        )
        try:
            await asyncio.wait_for(self.client.start(), timeout=self.config.startup_timeout)
            self.session = await asyncio.wait_for(
                self.client.create_session(**self._session_options()),
                timeout=self.config.startup_timeout,
            )
        except TimeoutError as exc:
            raise ExecutionError(
                f"copilot: the CLI did not start within {self.config.startup_timeout:g}s",
                hint="raise executor config startup_timeout; the first start unpacks the CLI",
            ) from exc
        except VallyError:
            raise
        except Exception as exc:
            raise ExecutionError(f"copilot: the CLI could not start: {exc}") from exc

    def _session_options(self) -> dict[str, Any]:
        config, options = self.config, self.options
        kwargs: dict[str, Any] = {
            "on_permission_request": self._on_permission,
            "on_event": self._on_event,
            "working_directory": self.sandbox.workdir,
            "model": self.provider.model,
            "streaming": True,
        }
        if self.provider.byok is not None:
            kwargs["provider"] = dict(self.provider.byok)
        if options.reasoning_effort:
            kwargs["reasoning_effort"] = options.reasoning_effort
        if options.skills:
            folders = {str(Path(s.sandbox_path).parent) for s in options.skills}
            kwargs["skill_directories"] = sorted(folders)
        if options.mcp_servers:
            kwargs["mcp_servers"] = mcp_config(options, self.sandbox.workdir)
        if config.available_tools is not None:
            kwargs["available_tools"] = list(config.available_tools)
        if config.excluded_tools:
            kwargs["excluded_tools"] = list(config.excluded_tools)
        if config.system_message:
            kwargs["system_message"] = {"mode": "append", "content": config.system_message}
        return kwargs

    def _connection(self) -> tuple[Any, dict[str, str]]:
        """The SDK connection that starts the CLI, and the CLI's environment."""
        sdk = self.sdk
        if self.sandbox.host_workdir is not None:
            cli = resolve_cli(self.config)
            cache = default_cache_dir(self.config)
            cache.mkdir(parents=True, exist_ok=True)
            self.home = tempfile.mkdtemp(prefix="vally-copilot-home-")
            env = cli_environment(
                self.config,
                self.options,
                self.provider,
                home=self.home,
                cache_dir=str(cache),
                environ=os.environ,
            )
            return sdk.RuntimeConnection.for_stdio(path=cli), env
        return self._container_connection()

    def _container_connection(self) -> tuple[Any, dict[str, str]]:
        """Run the CLI inside the trial's container through ``docker exec -i``."""
        container = getattr(self.sandbox, "container_id", None)
        docker = shutil.which("docker")
        if not isinstance(container, str) or docker is None:
            raise SetupError(
                "the copilot executor runs the CLI inside the trial's container with "
                "'docker exec', which needs the docker CLI on the host and a docker sandbox",
                hint="use the local or docker backend, and install the docker CLI",
            )
        inner = cli_environment(
            self.config,
            self.options,
            self.provider,
            home=CONTAINER_HOME,
            cache_dir=self.config.cache_dir,
            environ={},
        )
        inner.pop("PATH", None)  # keep the image's PATH
        args = ["exec", "-i", "-w", self.sandbox.workdir]
        for key, value in inner.items():
            args += ["-e", f"{key}={value}"]
        if self.provider.github_token:
            args += ["-e", "COPILOT_SDK_AUTH_TOKEN"]
        args += [container, self.config.cli_path or "copilot"]
        env = {k: v for k, v in os.environ.items() if k in {"PATH", "DOCKER_HOST", "HOME"}}
        return self.sdk.RuntimeConnection.for_stdio(path=docker, args=args), env

    async def close(self, *, graceful: bool) -> None:
        """Stop the session and the CLI (politely when ``graceful``, each step bounded by
        :data:`STOP_TIMEOUT`), then kill anything of theirs still alive."""
        pid = getattr(getattr(self.client, "_process", None), "pid", None)
        tree = descendants(pid) if isinstance(pid, int) else []
        stopped = False
        try:
            if graceful and self.session is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self.session.disconnect(), timeout=STOP_TIMEOUT)
            if graceful and self.client is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self.client.stop(), timeout=STOP_TIMEOUT)
                    stopped = True
        finally:
            if isinstance(pid, int):
                kill_all([pid, *tree, *descendants(pid)])
            if self.client is not None and not stopped:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self.client.force_stop(), timeout=STOP_TIMEOUT)
            self.log.close()
            if self.home is not None:
                shutil.rmtree(self.home, ignore_errors=True)


def mcp_config(options: ExecutorOptions, workdir: str) -> dict[str, dict[str, Any]]:
    """The trial's MCP servers in the SDK's ``mcp_servers`` form."""
    servers: dict[str, dict[str, Any]] = {}
    for name, server in options.mcp_servers.items():
        entry: dict[str, Any] = {"tools": list(server.tools) if server.tools else ["*"]}
        if server.timeout is not None:
            entry["timeout"] = int(server.timeout * 1000)
        if server.type == "http":
            entry.update({"type": "http", "url": server.url, "headers": dict(server.headers)})
        else:
            entry.update(
                {
                    "type": "stdio",
                    "command": server.command,
                    "args": list(server.args),
                    "env": dict(server.env),
                    "working_directory": str(Path(workdir) / server.cwd) if server.cwd else workdir,
                }
            )
        servers[name] = entry
    return servers


class CopilotSdkExecutor(CopilotExecutor):
    """The ``copilot`` executor under the reference tool's name, ``copilot-sdk``, so its eval
    files run unchanged."""

    metadata: ClassVar[ExecutorMetadata] = CopilotExecutor.metadata.model_copy(
        update={
            "name": "copilot-sdk",
            "description": "The copilot executor under the reference tool's name.",
        }
    )
