"""A small MCP server for the tests, written with the official SDK.

Tools: ``lookup(key)`` (a fixed dictionary), ``add(a, b)``, ``where()`` (the working folder
and ``NOTES_TAG`` from the environment), ``fail()`` (an error result), ``blob(size)`` (a long
text) and ``crash()`` (the process exits at once, mid-call).

``python notes_server.py`` serves stdio. ``python notes_server.py --http PORT [--token T]``
serves streamable HTTP on 127.0.0.1:PORT at ``/mcp``; with ``--token`` every request must
carry ``Authorization: Bearer T``.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from mcp.server.mcpserver import MCPServer

NOTES = {"alpha": "first letter", "omega": "last letter", "answer": "42"}

server = MCPServer("notes")


@server.tool()
def lookup(key: str) -> str:
    """Look up a note by its key."""
    return NOTES.get(key, f"no note named {key}")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def where() -> str:
    """The server's working folder and its NOTES_TAG variable."""
    return f"cwd={os.getcwd()} tag={os.environ.get('NOTES_TAG', '')} pid={os.getpid()}"


@server.tool()
def fail() -> str:
    """Always fails."""
    raise ValueError("the notes database is read-only")


@server.tool()
def blob(size: int) -> str:
    """A text of ``size`` characters."""
    return "x" * size


@server.tool()
def crash() -> str:
    """Exit the server process at once."""
    print("notes server: crashing on purpose", file=sys.stderr, flush=True)
    os._exit(3)


def _http(port: int, token: str | None) -> None:
    import uvicorn

    app = server.streamable_http_app()

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if token is not None and scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization") != f"Bearer {token}".encode():
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await app(scope, receive, send)

    uvicorn.run(guarded, host="127.0.0.1", port=port, log_level="info")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None)
    parser.add_argument("--token", default=None)
    options = parser.parse_args()
    print("notes server: starting", file=sys.stderr, flush=True)
    if options.http is not None:
        _http(options.http, options.token)
    else:
        server.run()
