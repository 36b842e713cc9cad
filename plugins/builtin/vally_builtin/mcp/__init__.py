"""MCP support of the built-in executors: the client side of ``environment.mcpServers``.

* :mod:`vally_builtin.mcp.config` (no ``mcp`` import): the names tools get when offered to a
  model (``<server>__<tool>``) and the configuration files agent CLIs read (Claude Code's
  ``--mcp-config`` JSON, Codex's ``config.toml``, vally's own JSON).
* :mod:`vally_builtin.mcp.transport`: the stdio transport over a sandbox
  :class:`vally.Process`, as the stream pair the ``mcp`` SDK's ``ClientSession`` reads.
* :mod:`vally_builtin.mcp.toolbox`: starting every declared server of a trial, listing and
  calling its tools, and stopping them all.

The last two import the optional ``mcp`` package (``pip install 'vally[mcp]'``); import them
only when a trial declares servers.
"""

from __future__ import annotations

from vally_builtin.mcp.config import (
    MCP_CONFIG_FORMATS,
    McpConfigFormat,
    render_mcp_config,
    tool_name_for,
)

__all__ = ["MCP_CONFIG_FORMATS", "McpConfigFormat", "render_mcp_config", "tool_name_for"]
