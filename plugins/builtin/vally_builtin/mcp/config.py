"""Tool names for MCP tools and the MCP configuration files agent CLIs read.

Nothing here imports the ``mcp`` SDK, so the ``command`` executor can write configuration
files without it.

Formats written by :func:`render_mcp_config`:

``claude-code``
    The JSON file Claude Code reads with ``--mcp-config`` (and as a project ``.mcp.json``)::

        {"mcpServers": {"db": {"type": "stdio", "command": "db-server", "args": [], "env": {}},
                        "web": {"type": "http", "url": "https://...", "headers": {}}}}

``codex``
    Codex's ``config.toml`` tables (``$CODEX_HOME/config.toml`` or a project's
    ``.codex/config.toml``)::

        [mcp_servers."db"]
        command = "db-server"
        args = []
        startup_timeout_sec = 30
        [mcp_servers."db".env]
        K = "V"

        [mcp_servers."web"]
        url = "https://..."
        http_headers = { "Authorization" = "Bearer ..." }

``vally-json``
    The resolved servers as vally sees them (every set field of ``McpServerConfig``, as
    written in ``eval.yaml``, e.g. ``"timeout": "45s"``): ``{"mcpServers": {name: {...}}}``,
    for agents written for vally (``McpServerConfig.model_validate`` reads each entry).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, Literal

from vally import McpServerConfig

McpConfigFormat = Literal["claude-code", "codex", "vally-json"]
MCP_CONFIG_FORMATS: tuple[McpConfigFormat, ...] = ("claude-code", "codex", "vally-json")
"""The formats :func:`render_mcp_config` writes."""

TOOL_NAME_SEPARATOR = "__"
"""Between the server name and the tool name in the name offered to a model."""

MAX_TOOL_NAME = 64
"""Function names of Chat Completions tools: at most 64 of ``[a-zA-Z0-9_-]``."""

_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


def _safe(text: str) -> str:
    return _UNSAFE.sub("_", text) or "_"


def tool_name_for(server: str, tool: str) -> str:
    """The function name a model sees for ``tool`` of ``server``: ``<server>__<tool>``.

    Characters outside ``[a-zA-Z0-9_-]`` become ``_``. A name longer than 64 characters is
    cut and ends with 8 hex digits of a hash of the full name, so it stays unique.
    """
    name = f"{_safe(server)}{TOOL_NAME_SEPARATOR}{_safe(tool)}"
    if len(name) <= MAX_TOOL_NAME:
        return name
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:8]
    return f"{name[: MAX_TOOL_NAME - 9]}_{digest}"


def allows_tool(server: McpServerConfig, tool: str) -> bool:
    """Whether the server's ``tools`` allow-list lets ``tool`` through (no list, or ``*``,
    allows every tool)."""
    if server.tools is None or "*" in server.tools:
        return True
    return tool in server.tools


# --------------------------------------------------------------------------- files


def _claude_code(servers: Mapping[str, McpServerConfig]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, server in servers.items():
        if server.type == "http":
            out[name] = {"type": "http", "url": server.url, "headers": dict(server.headers)}
        else:
            out[name] = {
                "type": "stdio",
                "command": server.command,
                "args": list(server.args),
                "env": dict(server.env),
            }
    return {"mcpServers": out}


_FIELDS = {
    "stdio": ("type", "command", "args", "env", "cwd", "timeout", "tools"),
    "http": ("type", "url", "headers", "timeout", "tools"),
}


def _vally_json(servers: Mapping[str, McpServerConfig]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, server in servers.items():
        dumped = server.model_dump(mode="json")
        out[name] = {k: dumped[k] for k in _FIELDS[server.type] if dumped[k] is not None}
    return {"mcpServers": out}


def _toml_str(value: str) -> str:
    # A JSON string with non-ASCII escaped is a valid TOML basic string.
    return json.dumps(value, ensure_ascii=True)


def _toml_inline(values: Mapping[str, str]) -> str:
    if not values:
        return "{}"
    return "{ " + ", ".join(f"{_toml_str(k)} = {_toml_str(v)}" for k, v in values.items()) + " }"


def _toml_number(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else repr(float(seconds))


def _codex(servers: Mapping[str, McpServerConfig]) -> str:
    lines: list[str] = []
    for name, server in servers.items():
        if lines:
            lines.append("")
        lines.append(f"[mcp_servers.{_toml_str(name)}]")
        if server.type == "http":
            lines.append(f"url = {_toml_str(server.url or '')}")
            if server.headers:
                lines.append(f"http_headers = {_toml_inline(server.headers)}")
        else:
            lines.append(f"command = {_toml_str(server.command or '')}")
            lines.append("args = [" + ", ".join(_toml_str(a) for a in server.args) + "]")
            if server.cwd:
                lines.append(f"cwd = {_toml_str(server.cwd)}")
        if server.timeout is not None:
            lines.append(f"startup_timeout_sec = {_toml_number(server.timeout)}")
        if server.tools is not None and "*" not in server.tools:
            lines.append("enabled_tools = [" + ", ".join(_toml_str(t) for t in server.tools) + "]")
        if server.type == "stdio" and server.env:
            lines.append(f"env = {_toml_inline(server.env)}")
    return "\n".join(lines) + "\n" if lines else ""


def render_mcp_config(servers: Mapping[str, McpServerConfig], fmt: McpConfigFormat) -> str:
    """The text of an MCP configuration file listing ``servers`` in format ``fmt``.

    Raises:
        ValueError: ``fmt`` is not one of :data:`MCP_CONFIG_FORMATS`.
    """
    if fmt == "claude-code":
        return json.dumps(_claude_code(servers), indent=2, ensure_ascii=False) + "\n"
    if fmt == "codex":
        return _codex(servers)
    if fmt == "vally-json":
        return json.dumps(_vally_json(servers), indent=2, ensure_ascii=False) + "\n"
    raise ValueError(f"unknown MCP config format {fmt!r}; use one of {MCP_CONFIG_FORMATS}")
