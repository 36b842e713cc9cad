"""Helpers of the MCP tests: the test servers, an HTTP server process, the agent runner."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vally.contracts.llm import LLMProvider
from vally.contracts.protocols import ExecutorOptions, Sandbox
from vally.models.spec import Constraints, McpServerConfig, Stimulus
from vally.models.trajectory import Trajectory
from vally_builtin.executors.chat_agent import ChatAgentExecutor

SERVERS = Path(__file__).parent / "servers"
NOTES = SERVERS / "notes_server.py"
SILENT = SERVERS / "silent_server.py"
BROKEN = SERVERS / "broken_server.py"


def stdio(script: Path = NOTES, **fields: Any) -> McpServerConfig:
    """A stdio server running ``script`` with this interpreter."""
    return McpServerConfig(type="stdio", command=sys.executable, args=[str(script)], **fields)


async def run_agent(
    provider: LLMProvider,
    sandbox: Sandbox,
    servers: dict[str, McpServerConfig],
    prompt: str = "Use the notes.",
    *,
    session_log_dir: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 60.0,
) -> Trajectory:
    """Run the chat-agent on one prompt with these MCP servers."""
    executor = ChatAgentExecutor(ChatAgentExecutor.Config.model_validate({"max_steps": 6}))
    options = ExecutorOptions(
        model="test-model",
        timeout=timeout,
        mcp_servers=servers,
        constraints=Constraints(),
        llm=provider,
        session_log_dir=session_log_dir,
        env=env or {},
    )
    return await executor.execute(Stimulus(name="s1", prompt=prompt), sandbox, options)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class HttpServer:
    """A notes server serving streamable HTTP on 127.0.0.1."""

    url: str
    token: str
    process: subprocess.Popen[str]


@contextmanager
def http_notes_server(token: str = "test-token") -> Iterator[HttpServer]:
    """Start ``notes_server.py --http`` in a subprocess; wait until uvicorn says it listens."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, str(NOTES), "--http", str(port), "--token", token],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stderr is not None
        seen: list[str] = []
        for line in proc.stderr:  # blocks until uvicorn reports, or the process dies
            seen.append(line)
            if "Uvicorn running on" in line:
                break
        else:
            raise RuntimeError("the HTTP MCP server did not start:\n" + "".join(seen))
        # Keep reading its log so the pipe never fills up and blocks the server.
        threading.Thread(target=proc.stderr.read, daemon=True).start()
        yield HttpServer(f"http://127.0.0.1:{port}/mcp", token, proc)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
