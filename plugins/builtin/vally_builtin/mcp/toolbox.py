"""Start a trial's MCP servers, list and call their tools, and stop them.

:func:`start_toolbox` connects to every declared server with the official ``mcp`` SDK:

* ``type: stdio``: the command starts through the trial's sandbox (``Sandbox.spawn``), so it
  runs where the agent runs (in the workspace on the host for ``local``, inside the container
  for ``docker``) with the trial's ``env`` plus the server's ``env``; its stderr goes to a
  log file in the sandbox's ``/tmp`` so failures can quote it;
* ``type: http``: streamable HTTP to ``url`` with ``headers``, from the executor's process.

Each server must answer ``initialize`` and ``tools/list`` within its ``timeout`` (default
30 seconds), else the trial fails with :class:`~vally.errors.SetupError` quoting the tail of
the server's stderr. ``timeout``, when set, also bounds every tool call.

The returned :class:`McpToolbox` offers the allowed tools (``tools`` allow-list) under the
names ``<server>__<tool>`` and must be closed (:meth:`McpToolbox.aclose`); closing stops every
server, whatever happened.

Each server's transport and ``ClientSession`` live in a task of their own (they hold anyio
task groups): a transport that breaks (a refused connection, a crashed process) ends that
task and fails the pending and later requests with ``CONNECTION_CLOSED``, without ever
cancelling the executor's task.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from vally import McpServerConfig, Sandbox, SetupError, ToolSpec, format_duration
from vally_builtin.mcp.config import allows_tool, tool_name_for
from vally_builtin.mcp.transport import process_transport

DEFAULT_STARTUP_TIMEOUT = 30.0
"""Seconds a server may take to answer ``initialize`` and ``tools/list`` by default."""

STDERR_TAIL = 2000
"""Characters of a server's stderr quoted in errors."""

CLOSE_TIMEOUT = 15.0
"""Seconds to wait for a server's connection to shut down before cancelling it."""

CLIENT_INFO = mcp_types.Implementation(name="vally", version="1")


@dataclass(frozen=True)
class McpTool:
    """A tool of an MCP server as offered to the model.

    Attributes:
        name: The function name the model sees (``<server>__<tool>``).
        server: The server's name in ``mcpServers``.
        tool: The tool's own name on the server.
        description: The tool's description.
        parameters: JSON Schema of its arguments.
    """

    name: str
    server: str
    tool: str
    description: str
    parameters: Mapping[str, Any]

    def spec(self) -> ToolSpec:
        """The tool as a :class:`vally.contracts.llm.ToolSpec`."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)


@dataclass
class _Server:
    name: str
    config: McpServerConfig
    session: ClientSession | None = None
    stderr_path: str | None = None
    tools: list[McpTool] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    stop: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass(frozen=True)
class McpCallResult:
    """What a tool call returned: ``success`` is False for errors (``isError`` results,
    a dead server, a timeout); ``text`` is what the model gets back."""

    success: bool
    text: str


class McpToolbox:
    """The started MCP servers of one trial and their tools."""

    def __init__(self, sandbox: Sandbox, log_dir: Path | None = None) -> None:
        self._sandbox = sandbox
        self._log_dir = log_dir
        self._servers: dict[str, _Server] = {}
        self._tools: dict[str, McpTool] = {}
        self._closed = False

    @property
    def tools(self) -> list[McpTool]:
        """Every offered tool, servers in declaration order."""
        return list(self._tools.values())

    def get(self, name: str) -> McpTool | None:
        """The tool offered under ``name``, if any."""
        return self._tools.get(name)

    # ------------------------------------------------------------------ start

    async def _start(self, name: str, config: McpServerConfig, env: Mapping[str, str]) -> None:
        """Start one server in its own task and wait until it is ready or has failed.

        Raises:
            SetupError: The server did not start (see :func:`start_toolbox`).
        """
        server = _Server(name, config)
        self._servers[name] = server
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        server.task = asyncio.create_task(self._serve(server, env, ready), name=f"mcp-{name}")
        await ready

    async def _serve(
        self, server: _Server, env: Mapping[str, str], ready: asyncio.Future[None]
    ) -> None:
        """Own the server's transport and session from start to :meth:`aclose`."""
        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await self._open(server, env, stack)
                session = await stack.enter_async_context(
                    ClientSession(read, write, client_info=CLIENT_INFO)
                )
                listed = await self._handshake(server, session)
                await self._register(server, listed)
                server.session = session
                if not ready.done():  # the caller may have given up (cancelled)
                    ready.set_result(None)
                await server.stop.wait()
        except BaseException as exc:
            error = await self._failure(server, exc)
            if not ready.done():
                ready.set_exception(error)
            else:
                server.problems.append(f"the connection ended ({_describe(exc)})")
            if isinstance(exc, asyncio.CancelledError):
                raise

    async def _open(
        self, server: _Server, env: Mapping[str, str], stack: contextlib.AsyncExitStack
    ) -> Any:
        """The transport's (read, write) streams, entered on ``stack``."""
        config = server.config
        if config.type == "http":
            # The SDK's recommended timeouts: 30s to connect and write, 5 minutes to read.
            client = await stack.enter_async_context(
                httpx2.AsyncClient(
                    headers=dict(config.headers), timeout=httpx2.Timeout(30.0, read=300.0)
                )
            )
            return await stack.enter_async_context(
                streamable_http_client(config.url or "", http_client=client)
            )
        server.stderr_path = f"/tmp/vally-mcp-{uuid.uuid4().hex[:12]}.stderr"
        log = shlex.quote(server.stderr_path)
        # Keep stderr in a log when /tmp is writable; never fail the start over it.
        script = f'if ( : >>{log} ) 2>/dev/null; then exec 2>>{log}; fi; exec "$@"'
        argv = ["sh", "-c", script, "vally-mcp", config.command or "", *config.args]
        try:
            process = await self._sandbox.spawn(argv, env={**env, **config.env}, cwd=config.cwd)
        except Exception as exc:
            message = getattr(exc, "message", None) or str(exc)
            raise SetupError(
                f"MCP server {server.name!r} could not start ({config.command}): {message}",
                hint="check environment.mcpServers: the command must exist in the sandbox",
            ) from exc
        return await stack.enter_async_context(process_transport(process, server.problems))

    async def _handshake(self, server: _Server, session: ClientSession) -> list[mcp_types.Tool]:
        """``initialize`` and ``tools/list`` (every page) within the server's timeout."""
        timeout = _startup_timeout(server.config)
        listed: list[mcp_types.Tool] = []
        try:
            with anyio.fail_after(timeout):
                await session.initialize()
                cursor: str | None = None
                while True:
                    params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
                    page = await session.list_tools(params=params)
                    listed.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
        except TimeoutError:
            raise _Timeout() from None
        return listed

    async def _register(self, server: _Server, listed: list[mcp_types.Tool]) -> None:
        """Offer the allowed tools of ``server``."""
        config, name = server.config, server.name
        known = {t.name for t in listed}
        missing = [t for t in (config.tools or []) if t != "*" and t not in known]
        if missing:
            raise await self._startup_error(
                server,
                f"has no tool(s) {', '.join(map(repr, missing))} named in its 'tools' list; "
                f"it offers: {', '.join(sorted(known)) or '(none)'}",
            )
        for tool in listed:
            if not allows_tool(config, tool.name):
                continue
            exposed = tool_name_for(name, tool.name)
            if exposed in self._tools:
                raise await self._startup_error(
                    server, f"tool {tool.name!r} clashes with another tool named {exposed!r}"
                )
            schema = dict(tool.input_schema or {})
            schema.setdefault("type", "object")  # function parameters must be an object
            schema.setdefault("properties", {})
            description = (tool.description or tool.title or tool.name).strip()
            mcp_tool = McpTool(
                name=exposed,
                server=name,
                tool=tool.name,
                description=f"[MCP server {name}] {description}",
                parameters=schema,
            )
            server.tools.append(mcp_tool)
            self._tools[exposed] = mcp_tool

    async def _failure(self, server: _Server, exc: BaseException) -> BaseException:
        """The error a failed start raises (a SetupError unless it was a cancellation)."""
        found = _find(exc, (SetupError, _Timeout))
        if isinstance(found, SetupError):
            return found
        if isinstance(exc, asyncio.CancelledError) and found is None:
            return exc
        if isinstance(found, _Timeout):
            limit = format_duration(_startup_timeout(server.config))
            what = f"did not answer initialize within {limit}"
        else:
            what = f"failed to start: {_why(server, exc)}"
        return await self._startup_error(server, what)

    async def _startup_error(self, server: _Server, what: str) -> SetupError:
        tail = await self.stderr_tail(server.name)
        detail = f"; stderr: {tail}" if tail else "; stderr: (empty)"  # stdio only
        if server.config.type == "http":
            return SetupError(
                f"MCP server {server.name!r} at {server.config.url} {what}",
                hint="check that the server is running and reachable from vally's process, "
                "and its 'url' and 'headers' (authentication) in environment.mcpServers",
            )
        where = f"({shlex.join([server.config.command or '', *server.config.args])})"
        return SetupError(
            f"MCP server {server.name!r} {where} {what}{detail}",
            hint="run the server by hand in the sandbox to check it speaks MCP on stdout "
            "(stdio servers start through 'sh' in the workspace); raise its 'timeout' in "
            "environment.mcpServers if it starts slowly",
        )

    # ------------------------------------------------------------------ use

    async def stderr_tail(self, server: str, limit: int = STDERR_TAIL) -> str:
        """The last ``limit`` characters of a stdio server's stderr ("" when unknown)."""
        entry = self._servers.get(server)
        if entry is None or entry.stderr_path is None:
            return ""
        try:
            result = await self._sandbox.exec(
                ["tail", "-c", str(limit), entry.stderr_path], timeout=10, output_limit=limit * 4
            )
        except Exception:
            return ""
        return result.stdout.strip() if result.exit_code == 0 else ""

    async def call(self, name: str, arguments: Mapping[str, Any]) -> McpCallResult:
        """Call the tool offered as ``name`` and return its result as text."""
        tool = self._tools.get(name)
        if tool is None:
            return McpCallResult(False, f"no MCP tool named {name!r}")
        server = self._servers[tool.server]
        if server.session is None:  # pragma: no cover - tools exist only for started servers
            return McpCallResult(False, f"MCP server {tool.server!r} is not running")
        try:
            result = await server.session.call_tool(
                tool.tool, dict(arguments), read_timeout_seconds=server.config.timeout
            )
        except Exception as exc:
            text = f"MCP server {tool.server!r} failed on {tool.tool!r}: {_why(server, exc)}"
            tail = await self.stderr_tail(tool.server, 500)
            if tail:
                text += f"\nserver stderr (tail):\n{tail}"
            return McpCallResult(False, text)
        return McpCallResult(not result.is_error, _result_text(result))

    # ------------------------------------------------------------------ stop

    async def aclose(self) -> None:
        """Stop every server (idempotent). Never raises; keeps stderr logs in the session
        log folder when there is one."""
        if self._closed:
            return
        self._closed = True
        tasks = []
        for server in self._servers.values():
            server.stop.set()
            if server.task is not None:
                if server.session is None:  # still starting: nothing to finish
                    server.task.cancel()
                tasks.append(server.task)
        if tasks:
            # Each transport shuts its server down (bounded); a task still running after
            # that is cancelled, and its transport still stops the process (shielded).
            _, pending = await asyncio.wait(tasks, timeout=CLOSE_TIMEOUT)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=CLOSE_TIMEOUT)
        with anyio.CancelScope(shield=True):
            for server in self._servers.values():
                if server.stderr_path is None:
                    continue
                if self._log_dir is not None:
                    tail = await self.stderr_tail(server.name, 200_000)
                    if tail:
                        with contextlib.suppress(OSError):
                            self._log_dir.mkdir(parents=True, exist_ok=True)
                            (self._log_dir / f"mcp-{server.name}.stderr.log").write_text(
                                tail + "\n", encoding="utf-8"
                            )
                with contextlib.suppress(Exception):
                    await self._sandbox.exec(["rm", "-f", server.stderr_path], timeout=10)


class _Timeout(Exception):
    """A server did not finish its handshake within its timeout."""


def _startup_timeout(config: McpServerConfig) -> float:
    return config.timeout if config.timeout is not None else DEFAULT_STARTUP_TIMEOUT


def _find(exc: BaseException, kinds: tuple[type[BaseException], ...]) -> BaseException | None:
    """``exc`` or the first exception of those kinds inside (nested) exception groups."""
    if isinstance(exc, kinds):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _find(inner, kinds)
            if found is not None:
                return found
    return None


def _describe(exc: BaseException) -> str:
    """A one-line description, unwrapping exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip()
    closed = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)
    if text == "Connection closed" or isinstance(exc, closed):
        return "the server closed the connection (it exited or crashed)"
    if isinstance(exc, MCPError):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _why(server: _Server, exc: BaseException) -> str:
    """Why a request failed: the transport's own account when it broke, else the error."""
    if server.problems:
        return "the connection broke: " + "; ".join(server.problems)
    return _describe(exc)


def _result_text(result: mcp_types.CallToolResult) -> str:
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        elif isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
            parts.append(f"[{block.type}: {block.mime_type}, {len(block.data)} base64 chars]")
        elif isinstance(block, mcp_types.EmbeddedResource):
            res = block.resource
            if isinstance(res, mcp_types.TextResourceContents):
                parts.append(res.text)
            else:
                parts.append(f"[resource {res.uri}]")
        elif isinstance(block, mcp_types.ResourceLink):
            parts.append(f"[resource link {block.uri}]")
        else:
            parts.append(json.dumps(block.model_dump(mode="json"), ensure_ascii=False))
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


async def start_toolbox(
    servers: Mapping[str, McpServerConfig],
    sandbox: Sandbox,
    *,
    env: Mapping[str, str] | None = None,
    log_dir: Path | None = None,
    reserved: Sequence[str] = (),
) -> McpToolbox:
    """Start every server and list its tools; on any failure stop those already started.

    Args:
        servers: The trial's servers (resolved, nulls removed).
        sandbox: The trial's sandbox (stdio servers start through its ``spawn``).
        env: The trial's environment variables (stdio servers get them, then their own).
        log_dir: Where to keep each stdio server's stderr at close (the session log folder).
        reserved: Tool names already taken (the executor's built-in tools).

    Raises:
        SetupError: A server did not start, did not answer ``initialize`` within its
            ``timeout``, or lacks a tool of its ``tools`` list.
    """
    toolbox = McpToolbox(sandbox, log_dir)
    try:
        for name, config in servers.items():
            await toolbox._start(name, config, env or {})
        clash = sorted(set(reserved) & {t.name for t in toolbox.tools})
        if clash:
            raise SetupError(
                f"MCP tool name(s) {', '.join(clash)} clash with the executor's own tools",
                hint="rename the MCP server in environment.mcpServers",
            )
    except BaseException:
        await toolbox.aclose()
        raise
    return toolbox
