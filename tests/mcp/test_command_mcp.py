"""The ``command`` executor writes the trial's MCP servers where the agent CLI reads them."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from tests.llm.support import open_sandbox, run
from vally.contracts.protocols import ExecutorOptions
from vally.errors import UnsupportedError
from vally.models.spec import McpServerConfig, Stimulus
from vally.models.trajectory import Trajectory
from vally_builtin.executors.command import CommandExecutor
from vally_builtin.mcp.config import MAX_TOOL_NAME, render_mcp_config, tool_name_for

# An "agent" that prints the file named by its first argument, then an env variable.
DUMP = (
    "import os, sys; print(open(sys.argv[1]).read()); "
    "print('CODEX_HOME=' + os.environ.get('CODEX_HOME', ''))"
)

SERVERS = {
    "notes": McpServerConfig(
        command="python3",
        args=["server.py", "--flag"],
        env={"TOKEN": 'q"uote'},
        timeout="45s",
        tools=["lookup"],
    ),
    "web": McpServerConfig(
        type="http", url="https://mcp.example.test/mcp", headers={"Authorization": "Bearer t"}
    ),
}


def _run(config: dict[str, Any], servers: dict[str, McpServerConfig], tmp_path: Path) -> Any:
    executor = CommandExecutor(CommandExecutor.Config.model_validate(config))
    options = ExecutorOptions(model=None, timeout=60.0, mcp_servers=servers)

    async def go() -> tuple[Trajectory, str, dict[str, bytes]]:
        sandbox = await open_sandbox(tmp_path)
        try:
            traj = await executor.execute(Stimulus(name="s", prompt="p"), sandbox, options)
            files = {p: await sandbox.read_file(p) for p in await sandbox.list_files(".")}
            files.update(
                {p: await sandbox.read_file(p) for p in await sandbox.list_files(".codex")}
            )
            return traj, sandbox.workdir, files
        finally:
            await sandbox.close()

    return run(go())


def test_claude_code_mcp_config_file_and_placeholder(tmp_path: Path) -> None:
    traj, workdir, files = _run(
        {
            "command": [sys.executable, "-c", DUMP, "{mcp_config}"],
            "prompt_via": "stdin",
            "mcp_config": {"format": "claude-code"},
        },
        SERVERS,
        tmp_path,
    )
    written = json.loads(files[".mcp.json"])
    assert written == {
        "mcpServers": {
            "notes": {
                "type": "stdio",
                "command": "python3",
                "args": ["server.py", "--flag"],
                "env": {"TOKEN": 'q"uote'},
            },
            "web": {
                "type": "http",
                "url": "https://mcp.example.test/mcp",
                "headers": {"Authorization": "Bearer t"},
            },
        }
    }
    # The agent got the absolute path through {mcp_config} and read the same file.
    assert json.loads(traj.output.split("CODEX_HOME=")[0]) == written
    assert traj.metadata.extra["mcpConfig"] == f"{workdir}/.mcp.json"


def test_codex_config_toml_with_env_placeholders(tmp_path: Path) -> None:
    traj, workdir, files = _run(
        {
            "command": [sys.executable, "-c", DUMP, "{workdir}/.codex/config.toml"],
            "prompt_via": "stdin",
            "env": {"CODEX_HOME": "{workdir}/.codex"},
            "mcp_config": {"format": "codex"},
        },
        SERVERS,
        tmp_path,
    )
    parsed = tomllib.loads(files[".codex/config.toml"].decode())
    assert parsed == {
        "mcp_servers": {
            "notes": {
                "command": "python3",
                "args": ["server.py", "--flag"],
                "env": {"TOKEN": 'q"uote'},
                "startup_timeout_sec": 45,
                "enabled_tools": ["lookup"],
            },
            "web": {
                "url": "https://mcp.example.test/mcp",
                "http_headers": {"Authorization": "Bearer t"},
            },
        }
    }
    assert f"CODEX_HOME={workdir}/.codex" in traj.output


def test_vally_json_at_a_custom_path_and_an_empty_server_list(tmp_path: Path) -> None:
    config = {
        "command": [sys.executable, "-c", DUMP, "{mcp_config}"],
        "prompt_via": "stdin",
        "mcp_config": {"format": "vally-json", "path": "cfg/servers.json"},
    }
    _, _, files = _run(config, SERVERS, tmp_path)
    written = json.loads(files["cfg/servers.json"])
    assert McpServerConfig.model_validate(written["mcpServers"]["notes"]) == SERVERS["notes"]
    assert written["mcpServers"]["notes"]["tools"] == ["lookup"]
    assert written["mcpServers"]["web"]["type"] == "http"
    # A variant without servers still gets a (empty) file, so the agent starts the same way.
    _, _, files = _run(config, {}, tmp_path)
    assert json.loads(files["cfg/servers.json"]) == {"mcpServers": {}}


def test_servers_without_mcp_config_are_unsupported(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedError, match=r"MCP servers \(notes, web\)"):
        _run({"command": [sys.executable, "-c", "print(1)"]}, SERVERS, tmp_path)
    with pytest.raises(ValidationError, match="mcp_config is not set"):
        CommandExecutor.Config.model_validate(
            {"command": ["agent", "--mcp-config", "{mcp_config}"]}
        )
    with pytest.raises(ValidationError, match="relative path inside the workspace"):
        CommandExecutor.Config.model_validate(
            {"command": ["agent"], "mcp_config": {"path": "../outside.json"}}
        )


def test_toml_quoting_round_trips_odd_names_and_values() -> None:
    odd = {
        'my.server "x"': McpServerConfig(
            command="C:\\tools\\srv.exe", args=["a b", "é", "line\nbreak"], env={"K.1": "v=1"}
        )
    }
    parsed = tomllib.loads(render_mcp_config(odd, "codex"))
    assert parsed["mcp_servers"]['my.server "x"']["args"] == ["a b", "é", "line\nbreak"]
    assert parsed["mcp_servers"]['my.server "x"']["command"] == "C:\\tools\\srv.exe"
    assert parsed["mcp_servers"]['my.server "x"']["env"] == {"K.1": "v=1"}
    assert render_mcp_config({}, "codex") == ""


def test_tool_names_are_prefixed_safe_and_short() -> None:
    assert tool_name_for("db", "query") == "db__query"
    assert tool_name_for("my.server", "get item") == "my_server__get_item"
    long_a = tool_name_for("s" * 40, "t" * 40 + "a")
    long_b = tool_name_for("s" * 40, "t" * 40 + "b")
    assert len(long_a) == len(long_b) == MAX_TOOL_NAME
    assert long_a != long_b
