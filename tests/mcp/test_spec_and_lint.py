"""``environment.mcpServers`` in the models and through the real ``vally lint`` command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from vally.models.spec import EnvironmentConfig, McpServerConfig

VALID = """\
name: mcp-lint
environment:
  mcpServers:
    notes: {type: stdio, command: python3, args: [server.py], env: {K: V}, timeout: 2m}
    web:
      type: http
      url: https://mcp.example.test/mcp
      headers: {Authorization: Bearer x}
      tools: [lookup]
stimuli:
  - name: s1
    prompt: hi
    environment:
      mcpServers:
        web: null
        extra: {command: other-server}
    graders:
      - {type: tool-calls, config: {required: [notes__lookup]}}
"""

INVALID = """\
name: mcp-lint-bad
environment:
  mcpServers:
    db:
      type: stdio
      args: [x]
    web:
      type: http
      url: 127.0.0.1:9/mcp
stimuli:
  - name: s1
    prompt: hi
    environment:
      mcpServers:
        other: {type: sse, url: http://x}
        slow: {command: x, timeout: 5}
        mixed: {type: http, url: http://x/mcp, command: y}
        typo: {command: x, headrs: {A: b}}
    graders:
      - {type: output-contains, config: {value: x}}
"""


def _lint(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "eval.yaml").write_text(text)
    return subprocess.run(
        [sys.executable, "-m", "vally", "lint", "eval.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_lint_accepts_stdio_http_and_null_servers(tmp_path: Path) -> None:
    proc = _lint(tmp_path, VALID)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_lint_reports_each_invalid_server_with_file_and_line(tmp_path: Path) -> None:
    proc = _lint(tmp_path, INVALID)
    assert proc.returncode == 1
    out = proc.stdout + proc.stderr
    lines = out.splitlines()

    def line_of(fragment: str) -> str:
        hits = [line for line in lines if fragment in line]
        assert hits, f"{fragment!r} not in:\n{out}"
        return hits[0]

    prefix = str(tmp_path / "eval.yaml")
    expected = {
        "environment.mcpServers.db: an MCP server of type 'stdio' needs 'command'": 5,
        "environment.mcpServers.web: the url of an MCP server must start with http://": 8,
        "mcpServers.other.type: Input should be 'stdio' or 'http'": 15,
        "mcpServers.slow.timeout: a duration needs a unit suffix; write '5s'": 16,
        "mcpServers.mixed: 'command' cannot be used with an MCP server of type 'http'": 17,
        "unknown key 'headrs' in stimuli[0].environment.mcpServers.typo; did you mean": 18,
    }
    for fragment, line in expected.items():
        assert line_of(fragment).startswith(f"{prefix}:{line}:"), (fragment, out)
    assert "6 error(s)" in out


def test_models_validate_and_merge_servers() -> None:
    with pytest.raises(ValidationError, match="set 'type: http'"):
        McpServerConfig.model_validate({"url": "http://x/mcp"})
    with pytest.raises(ValidationError, match="'url', 'headers' cannot be used"):
        McpServerConfig.model_validate({"command": "x", "url": "http://x", "headers": {}})
    with pytest.raises(ValidationError, match="must be positive"):
        McpServerConfig.model_validate({"command": "x", "timeout": "0s"})
    server = McpServerConfig.model_validate(
        {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"A": "b"}, "timeout": "2m"}
    )
    assert (server.timeout, server.headers) == (120.0, {"A": "b"})
    env = EnvironmentConfig.model_validate({"mcpServers": {"a": {"command": "x"}, "b": None}})
    assert env.mcpServers["b"] is None
