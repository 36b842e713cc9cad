"""Tests of the script executor: the parser on its own, then the real fake agent run as a
subprocess in a real ``local`` sandbox."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from vally_script_executor import ScriptExecutor, parse_output
from vally_script_executor.fake_agent import respond

from vally import EnvironmentConfig, ExecutionError, ExecutorOptions, TrialContext, TrialKey
from vally.plugins.session import Session
from vally.testing import make_stimulus


def test_parse_output_turns_lines_into_events() -> None:
    events = parse_output(
        "noise\nTOKENS in=3 out=2\n"
        'STEP tool=write_file args={"path": "a.txt"}\nRESULT ok\n'
        "STEP tool=search args=not json\nRESULT fail no hits\n"
        "ERROR flaky\nANSWER done\n",
        model="m",
    )
    assert [e.type for e in events] == [
        "token_usage", "tool_call", "tool_result", "tool_call", "tool_result", "error",
        "assistant_message",
    ]
    assert events[1].data.arguments == {"path": "a.txt"}
    assert events[3].data.arguments == "not json"
    assert events[4].data.success is False
    assert events[4].data.tool_call_id == events[3].data.tool_call_id == "step-2"
    assert events[6].data.content == "done"


def test_fake_agent_writes_files_and_adds(tmp_path: Path) -> None:
    lines, code = respond("Create a file named notes/a.txt that says hi there.", tmp_path)
    assert code == 0
    assert (tmp_path / "notes/a.txt").read_text() == "hi there\n"
    assert lines[-1] == "ANSWER I wrote notes/a.txt."
    lines, code = respond("What is 2 + 40?", tmp_path)
    assert lines[-1] == "ANSWER The answer is 42."


async def _execute(prompt: str, tmp_path: Path, config: dict[str, Any] | None = None) -> Any:
    session = Session(environ={})
    session.registrar().executor(ScriptExecutor)
    backend = session.create("backend", "local", {}, where="test")
    executor = session.create("executor", ScriptExecutor.metadata.name, config or {}, where="test")
    key = TrialKey("default", "demo", "s", "m", 0)
    trial = TrialContext(
        key=key, run_id="r", environment=EnvironmentConfig(), spec_dir=tmp_path
    )
    await backend.start("r")
    sandbox = await backend.open(trial)
    try:
        trajectory = await executor.execute(
            make_stimulus(prompt), sandbox, ExecutorOptions(model="m", timeout=30, key=key)
        )
        files = await sandbox.list_files()
        return trajectory, files
    finally:
        await sandbox.close()
        await backend.shutdown()


def test_runs_the_fake_agent_in_a_real_sandbox(tmp_path: Path) -> None:
    trajectory, files = asyncio.run(
        _execute("Create a file named hello.txt that says hello world.", tmp_path)
    )
    assert files == ["hello.txt"]
    assert trajectory.output == "I wrote hello.txt."
    assert trajectory.metrics.tool_call_count == 1
    assert trajectory.metrics.token_usage.input_tokens == 9
    assert trajectory.metadata.executor == ScriptExecutor.metadata.name


def test_prompt_as_argument(tmp_path: Path) -> None:
    config = {"command": [sys.executable, "-m", "vally_script_executor.fake_agent", "{prompt}"]}
    trajectory, _ = asyncio.run(_execute("What is 1 + 1?", tmp_path, config))
    assert trajectory.output == "The answer is 2."


def test_failing_agent_is_an_execution_error(tmp_path: Path) -> None:
    with pytest.raises(ExecutionError, match="exited with 3"):
        asyncio.run(_execute("fail now", tmp_path))
