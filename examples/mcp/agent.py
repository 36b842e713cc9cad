"""A deterministic demo "agent" that uses MCP servers, for the MCP example.

It reads the prompt from standard input and the trial's MCP servers from the file named by
its first argument (the ``vally-json`` file the ``command`` executor writes, passed as
``{mcp_config}``). It starts each stdio server with the official MCP Python SDK, lists its
tools (named ``<server>__<tool>`` as vally's chat-agent names them) and, when a ``define``
tool exists and the prompt asks about a quoted term, calls it. Its work goes to standard
output as vally JSONL events. No model, no network.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


def emit(kind: str, **data: Any) -> None:
    print(json.dumps({"type": kind, "data": data}), flush=True)


async def connect(stack: AsyncExitStack, config: dict[str, Any]) -> ClientSession:
    params = StdioServerParameters(
        command=config["command"],
        args=config.get("args", []),
        env=config.get("env") or None,
        cwd=config.get("cwd"),
    )
    read, write = await stack.enter_async_context(stdio_client(params))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return session


async def main() -> int:
    prompt = sys.stdin.read().strip()
    servers = {}
    if len(sys.argv) > 1 and Path(sys.argv[1]).is_file():
        servers = json.loads(Path(sys.argv[1]).read_text())["mcpServers"]
    answer = "I have no glossary tool, so I cannot look that up."
    async with AsyncExitStack() as stack:
        tools: dict[str, tuple[str, ClientSession, str]] = {}
        for name, config in servers.items():
            if config.get("type", "stdio") != "stdio":
                continue
            session = await connect(stack, config)
            for tool in (await session.list_tools()).tools:
                tools[tool.name] = (name, session, f"{name}__{tool.name}")
        term = re.search(r"['\"]([^'\"]+)['\"]", prompt)
        if "define" in tools and term:
            server, session, exposed = tools["define"]
            arguments = {"term": term.group(1)}
            emit(
                "tool_call",
                toolName=exposed,
                toolCallId="call-1",
                arguments=arguments,
                server=server,
            )
            result = await session.call_tool("define", arguments)
            text = "\n".join(getattr(block, "text", "") for block in result.content)
            emit(
                "tool_result",
                toolName=exposed,
                toolCallId="call-1",
                success=not result.is_error,
                result=text,
                server=server,
            )
            answer = f"The glossary defines {term.group(1)!r} as: {text}."
    emit("token_usage", inputTokens=len(prompt.split()), outputTokens=len(answer.split()))
    emit("assistant_message", content=answer)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
