"""The ``mock`` executor."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from vally.contracts.protocols import ExecutorOptions, TrialContext, TrialKey
from vally.errors import ExecutionError
from vally.models.spec import EnvironmentConfig, Stimulus, Turn
from vally.plugins.capabilities import supports_turns
from vally_backends.local import LocalBackend, LocalSandbox
from vally_builtin.executors.mock import MockExecutor

pytestmark = pytest.mark.anyio


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


def _mock(**config: object) -> MockExecutor:
    return MockExecutor(MockExecutor.Config.model_validate(config))


OPTIONS = ExecutorOptions(model="m-1", timeout=10)


async def test_scripted_single_turn(sandbox: LocalSandbox) -> None:
    executor = _mock(
        output="Done: {prompt}",
        tool_calls=[{"name": "write_file", "arguments": {"path": "hello.txt"}}, {"name": "ls"}],
        files={"hello.txt": "hello\n", "sub/dir/x.md": "# x"},
        tokens={"input": 100, "output": 7},
    )
    trajectory = await executor.execute(Stimulus(name="s", prompt="make hello"), sandbox, OPTIONS)
    assert trajectory.output == "Done: make hello"
    assert await sandbox.read_file("hello.txt") == b"hello\n"
    assert await sandbox.list_files() == ["hello.txt", "sub/dir/x.md"]
    assert [e.type for e in trajectory.events] == [
        "user_message",
        "turn_start",
        "tool_call",
        "tool_result",
        "tool_call",
        "tool_result",
        "token_usage",
        "assistant_message",
        "turn_end",
    ]
    metrics = trajectory.metrics
    assert metrics.tool_call_breakdown == {"write_file": 1, "ls": 1}
    assert metrics.token_usage.total_tokens == 107
    assert metrics.token_usage.by_model == {
        "m-1": {"inputTokens": 100, "outputTokens": 7, "callCount": 1}
    }
    assert metrics.turn_count == 1
    assert trajectory.metadata.executor == "mock"
    assert trajectory.metadata.skills_loaded == []
    assert trajectory.end_reason == "completed"


async def test_responses_per_turn(sandbox: LocalSandbox) -> None:
    executor = _mock(responses=["first answer"], output="fallback to {prompt}")
    assert supports_turns(executor)
    stimulus = Stimulus(name="s", turns=[Turn(prompt="one"), Turn(prompt="two")])
    trajectory = await executor.execute(stimulus, sandbox, OPTIONS)
    assert trajectory.output == "fallback to two"
    assert trajectory.for_turn(0).output == "first answer"
    assert trajectory.metrics.turn_count == 2


async def test_error_and_empty_output(sandbox: LocalSandbox) -> None:
    with pytest.raises(ExecutionError, match="agent exploded"):
        await _mock(error="agent exploded").execute(
            Stimulus(name="s", prompt="p"), sandbox, OPTIONS
        )
    trajectory = await _mock().execute(Stimulus(name="s", prompt="p"), sandbox, OPTIONS)
    assert trajectory.output == ""
    assert [e.type for e in trajectory.events] == ["user_message", "turn_start", "turn_end"]


async def test_delay_is_awaited(sandbox: LocalSandbox) -> None:
    start = time.monotonic()
    await _mock(delay="50ms").execute(Stimulus(name="s", prompt="p"), sandbox, OPTIONS)
    assert time.monotonic() - start >= 0.05


def test_config_is_strict() -> None:
    with pytest.raises(ValidationError):
        MockExecutor.Config.model_validate({"delay": 5})
    with pytest.raises(ValidationError):
        MockExecutor.Config.model_validate({"tool_calls": [{"arguments": {}}]})
    with pytest.raises(ValidationError):
        MockExecutor.Config.model_validate({"outptu": "typo"})


async def test_mock_is_fast(sandbox: LocalSandbox) -> None:
    executor = _mock(output="ok {prompt}", tool_calls=[{"name": "t"}], tokens={"input": 1})
    stimulus = Stimulus(name="s", prompt="p")
    count = 500
    start = time.perf_counter()
    for _ in range(count):
        await executor.execute(stimulus, sandbox, OPTIONS)
    per_trial = (time.perf_counter() - start) / count
    # Generous bound (shared CI machines); the trial itself is well under 0.1 ms.
    assert per_trial < 0.002
