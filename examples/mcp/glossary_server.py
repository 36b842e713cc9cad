"""A tiny MCP server for the example: a glossary of vally terms.

Written with the official MCP Python SDK (``pip install -e '.[mcp]'``). It speaks MCP over
stdio: ``python3 glossary_server.py``.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

GLOSSARY = {
    "stimulus": "one test case: a prompt, graders and an optional environment",
    "trajectory": "the sequence of events an agent produced in one trial",
    "grader": "a check that scores one trajectory between 0 and 1",
    "variant": "one configuration of an experiment, compared with the baseline",
}

server = MCPServer("glossary")


@server.tool()
def define(term: str) -> str:
    """The glossary's definition of a vally term."""
    return GLOSSARY.get(term.strip().lower(), f"the glossary has no entry for {term!r}")


@server.tool()
def terms() -> list[str]:
    """Every term the glossary defines."""
    return sorted(GLOSSARY)


if __name__ == "__main__":
    server.run()
