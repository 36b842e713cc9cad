"""Which tool permissions the ``copilot`` executor grants.

The Copilot CLI asks before running a tool (``permission.requested``); the executor answers
from :class:`PermissionPolicy`, never by approving everything: a request is approved only
when its kind is in ``config.permissions``, a ``read`` or ``write`` names a path inside the
workspace (or a staged skill), and an ``mcp`` call goes to one of the trial's servers.
"""

from __future__ import annotations

import posixpath
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Decision:
    """The answer to one permission request: approved, or denied with the reason the agent
    is told."""

    approved: bool
    reason: str = ""


def _inside(path: str, roots: Sequence[str]) -> bool:
    normal = posixpath.normpath(path)
    return any(normal == root or normal.startswith(root.rstrip("/") + "/") for root in roots)


class PermissionPolicy:
    """Decides permission requests given as wire dicts (``{"kind": "write", ...}``).

    Args:
        kinds: The approved kinds (``shell``, ``write``, ``read``, ``mcp``, ``url``,
            ``memory``, ``custom-tool``).
        roots: Folders ``read`` and ``write`` may touch (the workspace, skill folders).
        servers: The trial's MCP server names.
    """

    def __init__(
        self, kinds: Collection[str], roots: Sequence[str], servers: Collection[str]
    ) -> None:
        self.kinds = frozenset(kinds)
        self.roots = [posixpath.normpath(r) for r in roots]
        self.servers = frozenset(servers)

    def decide(self, request: Mapping[str, Any]) -> Decision:
        """Approve or deny one request."""
        kind = str(request.get("kind") or "")
        if kind not in self.kinds:
            allowed = ", ".join(sorted(self.kinds)) or "none"
            return Decision(False, f"'{kind}' tools are not allowed in this eval ({allowed} are)")
        if kind in {"read", "write"}:
            path = request.get("path") if kind == "read" else request.get("fileName")
            if isinstance(path, str) and path and not _inside(path, self.roots):
                return Decision(False, f"{path} is outside the workspace {self.roots[0]}")
        if kind == "mcp":
            server = str(request.get("serverName") or "")
            if server not in self.servers:
                return Decision(False, f"MCP server {server!r} is not one of this eval's servers")
        return Decision(True)
