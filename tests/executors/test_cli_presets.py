"""The ``claude-code`` and ``codex`` presets with stand-in programs in a real ``local``
sandbox: the argv and environment they give the CLI, where skills and configuration go,
and how streams recorded from the real CLIs become trajectories over several turns. (The
real CLIs run in ``tests/agents``.)"""

from __future__ import annotations

import json
import shlex
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from vally.contracts.protocols import ExecutorOptions, SkillRef, TrialContext, TrialKey
from vally.errors import ExecutionError, UnsupportedError
from vally.models.spec import Constraints, EnvironmentConfig, McpServerConfig, Stimulus, Turn
from vally.plugins.capabilities import supports_turns
from vally_backends.local import LocalBackend, LocalSandbox
from vally_builtin.executors.claude_code import ROOT_HINT, ClaudeCodeExecutor
from vally_builtin.executors.codex import CodexExecutor

pytestmark = pytest.mark.anyio

RECORDED = Path(__file__).parent.parent / "fixtures" / "streams" / "recorded"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def sandbox() -> AsyncIterator[LocalSandbox]:
    trial = TrialContext(
        key=TrialKey("v", "e", "s", "m", 1),
        run_id="r",
        environment=EnvironmentConfig(),
        spec_dir=Path.cwd(),
    )
    box = await LocalBackend().open(trial)
    yield box
    await box.close()


def _fake_cli(tmp_path: Path, *streams: str, stderr: str = "", code: int = 0) -> str:
    """A stand-in CLI: logs its argv, stdin and environment, then prints the next recorded
    stream (one per call)."""
    log = tmp_path / "calls.jsonl"
    counter = tmp_path / "count"
    script = tmp_path / "fake-cli"
    files = " ".join(shlex.quote(str(RECORDED / s)) for s in streams)
    script.write_text(
        "#!/bin/sh\n"
        f"n=$(cat {counter} 2>/dev/null || echo 0); echo $((n + 1)) > {counter}\n"
        f'python3 -c \'import json, os, sys; print(json.dumps({{"argv": sys.argv[1:], '
        f'"stdin": sys.stdin.read(), "env": dict(os.environ)}}))\' "$@" >> {log}\n'
        f'set -- {files}; shift $n; [ $# -gt 0 ] && cat "$1"\n'
        + (f"echo {shlex.quote(stderr)} >&2\n" if stderr else "")
        + f"exit {code}\n"
    )
    script.chmod(0o755)
    return str(script)


def _calls(tmp_path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]


def _options(**kwargs: Any) -> ExecutorOptions:
    values: dict[str, Any] = {"model": "claude-test", "timeout": 30.0}
    values.update(kwargs)
    return ExecutorOptions(**values)


def _skill(tmp_path: Path) -> SkillRef:
    folder = tmp_path / "skills" / "greet"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: greet\ndescription: d\n---\nSay hi.\n")
    return SkillRef("greet", "d", folder, "/unused")


def _two_turns() -> Stimulus:
    return Stimulus(name="s", turns=[Turn(prompt="first"), Turn(prompt="-second")])


async def test_claude_code_turns_flags_skills_and_config_dir(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    program = _fake_cli(tmp_path, "claude-code-turn1.jsonl", "claude-code-resume.jsonl")
    executor = ClaudeCodeExecutor(
        ClaudeCodeExecutor.Config(
            program=program,
            permission_mode="acceptEdits",
            allowed_tools=["Bash", "Skill"],
            base_url="http://127.0.0.1:9",
            env={"EXTRA": "1"},
        )
    )
    assert supports_turns(executor)
    options = _options(skills=[_skill(tmp_path)], constraints=Constraints(max_turns=7))
    trajectory = await executor.execute(_two_turns(), sandbox, options)
    first, second = _calls(tmp_path)
    flags = [
        "--output-format", "stream-json", "--verbose", "--permission-mode", "acceptEdits",
        "--allowedTools", "Bash,Skill", "--model", "claude-test", "--max-turns", "7",
        "--mcp-config", f"{sandbox.workdir}/.vally/claude-code-mcp.json", "--strict-mcp-config",
    ]  # fmt: skip
    assert first["argv"] == ["-p", *flags]
    sid = "751f37e1-a249-4283-a449-1c35864dcc4e"
    assert second["argv"] == ["-p", "--resume", sid, *flags]
    assert [first["stdin"], second["stdin"]] == ["first", "-second"]
    env = first["env"]
    assert env["CLAUDE_CONFIG_DIR"] == f"{sandbox.workdir}/.vally/claude"
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == env["EXTRA"] == "1"
    assert await sandbox.read_file(".claude/skills/greet/SKILL.md")
    written = json.loads(await sandbox.read_file(".vally/claude-code-mcp.json"))
    assert written == {"mcpServers": {}}
    assert trajectory.metadata.executor == "claude-code"
    assert trajectory.metadata.session_id == sid
    # Turn totals from the recorded streams: 1200/63 then 900 + 300 cached / 11.
    usage = trajectory.metrics.token_usage
    assert (usage.input_tokens, usage.output_tokens, usage.call_count) == (2400, 74, 3)
    extra = trajectory.metadata.extra
    assert extra["agentTurns"] == 3
    assert abs(extra["costUsd"] - 0.00994) < 1e-9
    assert trajectory.output == "second answer"


async def test_claude_code_error_stops_the_turns(sandbox: LocalSandbox, tmp_path: Path) -> None:
    program = _fake_cli(tmp_path, "claude-code-api-error.jsonl", code=1)
    executor = ClaudeCodeExecutor(ClaudeCodeExecutor.Config(program=program))
    trajectory = await executor.execute(_two_turns(), sandbox, _options())
    assert len(_calls(tmp_path)) == 1  # the second prompt is not sent
    assert trajectory.end_reason == "error"
    assert "Prompt is too long" in (trajectory.end_detail or "")
    errors = [e.data for e in trajectory.events if e.type == "error"]
    assert len(errors) == 1 and errors[0].fatal  # no extra error for the exit code
    assert trajectory.metrics.token_usage.call_count == 0


async def test_claude_code_max_turns_end(sandbox: LocalSandbox, tmp_path: Path) -> None:
    program = _fake_cli(tmp_path, "claude-code-max-turns.jsonl", code=1)
    executor = ClaudeCodeExecutor(ClaudeCodeExecutor.Config(program=program, max_turns=1))
    trajectory = await executor.execute(Stimulus(name="s", prompt="go"), sandbox, _options())
    assert "--max-turns" in _calls(tmp_path)[0]["argv"]
    assert trajectory.end_reason == "max_turns"
    assert trajectory.metrics.error_count == 0


async def test_claude_code_refused_as_root_says_what_to_do(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    message = (
        "--dangerously-skip-permissions cannot be used with root/sudo privileges "
        "for security reasons"
    )
    program = _fake_cli(tmp_path, stderr=message, code=1)
    executor = ClaudeCodeExecutor(ClaudeCodeExecutor.Config(program=program))
    with pytest.raises(ExecutionError) as caught:
        await executor.execute(Stimulus(name="s", prompt="go"), sandbox, _options())
    assert caught.value.hint == ROOT_HINT
    assert "root/sudo" in caught.value.message


async def test_claude_code_mcp_servers_go_to_a_strict_config(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    program = _fake_cli(tmp_path, "claude-code-turn1.jsonl")
    executor = ClaudeCodeExecutor(ClaudeCodeExecutor.Config(program=program, config_dir=None))
    servers = {"db": McpServerConfig(command="db-server", args=["--ro"])}
    await executor.execute(Stimulus(name="s", prompt="go"), sandbox, _options(mcp_servers=servers))
    call = _calls(tmp_path)[0]
    path = f"{sandbox.workdir}/.vally/claude-code-mcp.json"
    assert call["argv"][-3:] == ["--mcp-config", path, "--strict-mcp-config"]
    written = json.loads(await sandbox.read_file(".vally/claude-code-mcp.json"))
    assert written["mcpServers"]["db"]["command"] == "db-server"
    assert "CLAUDE_CONFIG_DIR" not in call["env"]


async def test_codex_turns_provider_home_and_skills(sandbox: LocalSandbox, tmp_path: Path) -> None:
    program = _fake_cli(tmp_path, "codex-turn1.jsonl", "codex-resume.jsonl")
    executor = CodexExecutor(
        CodexExecutor.Config.model_validate(
            {
                "program": program,
                "provider": {"base_url": "http://127.0.0.1:9/v1", "env_key": "KEY"},
                "config": {"model_providers.vally.stream_max_retries": 0},
            }
        )
    )
    options = _options(model="gpt-test", skills=[_skill(tmp_path)])
    trajectory = await executor.execute(_two_turns(), sandbox, options)
    first, second = _calls(tmp_path)
    flags = [
        "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
        "--model", "gpt-test",
        "-c", 'model_provider="vally"',
        "-c", 'model_providers.vally.name="vally"',
        "-c", 'model_providers.vally.base_url="http://127.0.0.1:9/v1"',
        "-c", 'model_providers.vally.wire_api="responses"',
        "-c", 'model_providers.vally.env_key="KEY"',
        "-c", "model_providers.vally.stream_max_retries=0",
    ]  # fmt: skip
    assert first["argv"] == ["exec", *flags, "-"]
    sid = "01a22c32-ed4b-7a53-84ad-7e98d2455ed2"
    assert second["argv"] == ["exec", "resume", *flags, sid, "-"]
    assert [first["stdin"], second["stdin"]] == ["first", "-second"]
    assert first["env"]["CODEX_HOME"] == f"{sandbox.workdir}/.vally/codex"
    assert await sandbox.read_file(".vally/codex/config.toml") == b""  # no servers
    assert await sandbox.read_file(".agents/skills/greet/SKILL.md")
    assert trajectory.metadata.executor == "codex"
    # 2200 + 1500 input, 40 + 8 output: the resumed run's session total is not re-added.
    usage = trajectory.metrics.token_usage
    assert (usage.input_tokens, usage.output_tokens) == (3700, 48)
    assert trajectory.metrics.error_count == 0
    assert len(trajectory.metadata.extra["warnings"]) == 2


async def test_codex_sandbox_mode_and_mcp(sandbox: LocalSandbox, tmp_path: Path) -> None:
    program = _fake_cli(tmp_path, "codex-skill.jsonl")
    executor = CodexExecutor(CodexExecutor.Config(program=program, sandbox="workspace-write"))
    servers = {"db": McpServerConfig(command="db-server")}
    trajectory = await executor.execute(
        Stimulus(name="s", prompt="go"), sandbox, _options(model=None, mcp_servers=servers)
    )
    argv = _calls(tmp_path)[0]["argv"]
    assert argv[:5] == ["exec", "--json", "--skip-git-repo-check", "--sandbox", "workspace-write"]
    assert "--model" not in argv
    config = (await sandbox.read_file(".vally/codex/config.toml")).decode()
    assert '[mcp_servers."db"]' in config
    assert trajectory.metrics.skill_activation_breakdown == {"greet": 1}
    homeless = CodexExecutor(CodexExecutor.Config(program=program, codex_home=None))
    with pytest.raises(UnsupportedError, match="codex_home: null"):
        await homeless.execute(
            Stimulus(name="s", prompt="go"), sandbox, _options(mcp_servers=servers)
        )


async def test_codex_failed_turn_ends_in_error(sandbox: LocalSandbox, tmp_path: Path) -> None:
    program = _fake_cli(tmp_path, "codex-http-error.jsonl", code=1)
    executor = CodexExecutor(CodexExecutor.Config(program=program))
    trajectory = await executor.execute(_two_turns(), sandbox, _options())
    assert len(_calls(tmp_path)) == 1
    assert trajectory.end_reason == "error"
    assert "bad request from test" in (trajectory.end_detail or "")
    assert trajectory.metrics.error_count == 1


async def test_missing_cli_says_how_to_install_it(sandbox: LocalSandbox, tmp_path: Path) -> None:
    for executor, package in (
        (ClaudeCodeExecutor(ClaudeCodeExecutor.Config(program="no-such-claude")), "claude-code"),
        (CodexExecutor(CodexExecutor.Config(program="no-such-codex")), "@openai/codex"),
    ):
        with pytest.raises(ExecutionError) as caught:
            await executor.execute(Stimulus(name="s", prompt="go"), sandbox, _options())
        assert "could not start" in caught.value.message
        assert package in (caught.value.hint or "")
