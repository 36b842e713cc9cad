"""The copilot executor's setup: provider, CLI lookup, environment, permissions, limits."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from vally import Constraints, ExecutorOptions, SetupError
from vally_builtin.executors.copilot.config import CopilotConfig
from vally_builtin.executors.copilot.events import SessionFacts
from vally_builtin.executors.copilot.executor import _Limits
from vally_builtin.executors.copilot.permissions import PermissionPolicy
from vally_builtin.executors.copilot.setup import (
    cli_environment,
    import_sdk,
    resolve_cli,
    resolve_provider,
)


def _options(**kw: object) -> ExecutorOptions:
    return ExecutorOptions(model=kw.pop("model", "m1"), timeout=60, **kw)  # type: ignore[arg-type]


def _project_llm(base_url: str | None, key_env: str = "PROJECT_KEY") -> object:
    return SimpleNamespace(config=SimpleNamespace(base_url=base_url, api_key_env=key_env))


def test_byok_comes_from_the_config_then_the_projects_llm_settings() -> None:
    config = CopilotConfig(base_url="http://127.0.0.1:9/v1", api_key_env="MY_KEY")
    provider = resolve_provider(config, _options(), {"MY_KEY": "sk-1"})
    assert provider.byok == {
        "type": "openai",
        "base_url": "http://127.0.0.1:9/v1",
        "wire_api": "completions",
        "api_key": "sk-1",
    }
    assert provider.github_token is None and provider.model == "m1"
    from_project = resolve_provider(
        CopilotConfig(wire_api="responses"),
        _options(llm=_project_llm("http://127.0.0.1:8/v1")),
        {"PROJECT_KEY": "sk-2", "GITHUB_TOKEN": "gh-ignored"},
    )
    assert from_project.base_url == "http://127.0.0.1:8/v1"
    assert from_project.byok is not None and from_project.byok["api_key"] == "sk-2"
    assert from_project.byok["wire_api"] == "responses"


def test_without_a_server_a_github_token_is_used_and_without_one_setup_fails() -> None:
    provider = resolve_provider(
        CopilotConfig(), _options(llm=_project_llm(None)), {"GH_TOKEN": "t"}
    )
    assert provider.byok is None and provider.github_token == "t"
    with pytest.raises(SetupError) as info:
        resolve_provider(CopilotConfig(), _options(), {})
    assert "COPILOT_GITHUB_TOKEN" in info.value.message or "COPILOT_GITHUB_TOKEN" in str(info.value)
    with pytest.raises(SetupError, match="needs a model name"):
        resolve_provider(CopilotConfig(base_url="http://h/v1"), _options(model=None), {})


def test_the_cli_environment_is_an_allow_list_with_an_isolated_home() -> None:
    config = CopilotConfig(base_url="http://127.0.0.1:9/v1", pass_env=["EXTRA_OK"])
    provider = resolve_provider(config, _options(), {})
    host = {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "GITHUB_TOKEN": "leak",
        "COPILOT_CUSTOM_INSTRUCTIONS_DIRS": "/leak",
        "OPENAI_API_KEY": "leak",
        "EXTRA_OK": "1",
    }
    env = cli_environment(
        config,
        _options(env={"SPEC_VAR": "x"}),
        provider,
        home="/h",
        cache_dir="/c",
        environ=host,
    )
    assert "leak" not in env.values() and "/leak" not in env.values()
    assert env["HOME"] == "/h" and env["COPILOT_HOME"] == "/h/.copilot"
    assert env["XDG_CACHE_HOME"] == "/c"
    assert env["SPEC_VAR"] == "x" and env["EXTRA_OK"] == "1" and env["PATH"] == "/usr/bin"
    assert env["COPILOT_OFFLINE"] == "true"
    assert env["COPILOT_PROVIDER_BASE_URL"] == "http://127.0.0.1:9/v1"
    assert env["COPILOT_MODEL"] == "m1"


def test_an_npm_loader_resolves_to_the_native_binary(tmp_path: Path) -> None:
    scope = tmp_path / "node_modules" / "@github"
    loader = scope / "copilot" / "npm-loader.js"
    loader.parent.mkdir(parents=True)
    loader.write_text("// loader\n")
    import platform

    arch = {"x86_64": "x64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    native = scope / f"copilot-{platform.system().lower()}-{arch}" / "copilot"
    native.parent.mkdir()
    native.write_text("#!/bin/sh\n")
    native.chmod(0o755)
    link = tmp_path / "bin" / "copilot"
    link.parent.mkdir()
    link.symlink_to(loader)
    assert resolve_cli(CopilotConfig(cli_path=str(link))) == str(native)


def test_a_missing_cli_names_the_install_command(tmp_path: Path) -> None:
    with pytest.raises(SetupError) as info:
        resolve_cli(CopilotConfig(cli_path=str(tmp_path / "nope")))
    assert "npm install -g @github/copilot@" in str(info.value)


def test_a_missing_sdk_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "copilot", None)
    with pytest.raises(SetupError) as info:
        import_sdk()
    assert "pip install 'vally[copilot]'" in str(info.value)


def test_permissions_follow_the_config_the_workspace_and_the_trials_servers() -> None:
    policy = PermissionPolicy(
        ["shell", "write", "read", "mcp"], ["/ws", "/ws/.vally/skills/s"], ["notes"]
    )
    assert policy.decide({"kind": "shell", "fullCommandText": "ls"}).approved
    assert policy.decide({"kind": "write", "fileName": "/ws/a/b.txt"}).approved
    assert not policy.decide({"kind": "write", "fileName": "/ws/../etc/passwd"}).approved
    assert not policy.decide({"kind": "read", "path": "/wsx/file"}).approved
    assert policy.decide({"kind": "read", "path": "/ws"}).approved
    assert policy.decide({"kind": "mcp", "serverName": "notes"}).approved
    denied = policy.decide({"kind": "mcp", "serverName": "github"})
    assert not denied.approved and "github" in denied.reason
    url = policy.decide({"kind": "url", "url": "https://example.com"})
    assert not url.approved and "'url' tools are not allowed" in url.reason


@pytest.mark.parametrize(
    ("constraints", "facts", "reason"),
    [
        (Constraints(max_turns=2), SessionFacts(agent_turns=3), "max_turns"),
        (Constraints(max_turns=2), SessionFacts(agent_turns=2), None),
        (Constraints(max_tool_calls=1), SessionFacts(tool_calls=2), "max_tool_calls"),
        (Constraints(max_tokens=100), SessionFacts(tokens=101), "max_tokens"),
        (Constraints(max_tokens=100), SessionFacts(tokens=100), None),
    ],
)
def test_limits_stop_when_crossed(
    constraints: Constraints, facts: SessionFacts, reason: str | None
) -> None:
    limits = _Limits(constraints)
    limits.check(facts)
    assert (limits.stop.reason if limits.stop else None) == reason
    assert limits.changed.is_set()


def test_no_secret_of_the_host_reaches_the_cli_by_default() -> None:
    config = CopilotConfig(base_url="http://127.0.0.1:9/v1")
    env = cli_environment(
        config,
        _options(),
        resolve_provider(config, _options(), {}),
        home="/h",
        cache_dir="/c",
        environ=dict(os.environ),
    )
    assert not {k for k in env if k.startswith(("GITHUB_", "GH_", "OPENAI_", "AWS_"))}
