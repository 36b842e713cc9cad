"""The ``command`` executor, running real agent scripts in a real ``local`` sandbox."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from vally.contracts.protocols import ExecutorOptions, SkillRef, TrialContext, TrialKey
from vally.errors import ExecutionError, UnsupportedError
from vally.models.spec import EnvironmentConfig, Stimulus, Turn
from vally.plugins.capabilities import supports_turns
from vally_backends.local import LocalBackend, LocalSandbox
from vally_builtin.executors.command import CommandExecutor

pytestmark = pytest.mark.anyio

STREAMS = Path(__file__).parent.parent / "fixtures" / "streams"
PY = sys.executable


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


def _executor(**config: object) -> CommandExecutor:
    return CommandExecutor(CommandExecutor.Config.model_validate(config))


def _options(**kwargs: object) -> ExecutorOptions:
    values: dict[str, object] = {"model": None, "timeout": 30.0}
    values.update(kwargs)
    return ExecutorOptions(**values)  # type: ignore[arg-type]


def _stim(prompt: str = "say hi") -> Stimulus:
    return Stimulus(name="s", prompt=prompt)


async def test_prompt_as_argument_with_placeholders(sandbox: LocalSandbox) -> None:
    script = (
        "import sys, os\n"
        "open('answer.txt', 'w').write(sys.argv[1])\n"
        "print('prompt=' + sys.argv[1])\n"
        "print('args=' + '|'.join(sys.argv[2:]))\n"
        "print('cwd=' + os.getcwd())\n"
        "print('env=' + os.environ.get('AGENT_MODE', '') + os.environ.get('SPEC_VAR', ''))\n"
    )
    executor = _executor(
        command=[PY, "-c", script, "{prompt}", "{workdir}", "{skills_dir}", "sid={session_id}"],
        model_flag="--model",
        env={"AGENT_MODE": "test"},
    )
    skill = SkillRef("greeter", "d", Path("/x"), f"{sandbox.workdir}/.vally/skills/greeter")
    trajectory = await executor.execute(
        _stim("hello there world"),
        sandbox,
        _options(model="gpt-x", env={"SPEC_VAR": "+spec"}, skills=[skill]),
    )
    lines = trajectory.output.splitlines()
    assert lines[0] == "prompt=hello there world"
    args = lines[1].removeprefix("args=").split("|")
    assert args[0] == sandbox.workdir
    assert args[1] == f"{sandbox.workdir}/.vally/skills"
    assert args[2] == f"sid={trajectory.metadata.session_id}"
    assert args[3:] == ["--model", "gpt-x"]
    assert lines[2] == f"cwd={sandbox.workdir}"
    assert lines[3] == "env=test+spec"
    assert (await sandbox.read_file("answer.txt")) == b"hello there world"
    assert [e.type for e in trajectory.events] == [
        "user_message",
        "turn_start",
        "assistant_message",
        "turn_end",
    ]
    assert trajectory.end_reason == "completed"
    assert trajectory.metadata.executor == "command"
    assert trajectory.metadata.model == "gpt-x"
    assert trajectory.metadata.skills_loaded == ["greeter"]
    assert trajectory.metrics.turn_count == 1
    assert trajectory.work_dir == sandbox.workdir


async def test_prompt_via_stdin_by_default(sandbox: LocalSandbox) -> None:
    executor = _executor(command=f"{PY} -c 'import sys; print(\"got:\", sys.stdin.read())'")
    trajectory = await executor.execute(_stim("from stdin"), sandbox, _options())
    assert trajectory.output == "got: from stdin"
    forced = _executor(command=[PY, "-c", "import sys; print(sys.argv[-1])"], prompt_via="arg")
    trajectory = await forced.execute(_stim("appended arg"), sandbox, _options())
    assert trajectory.output == "appended arg"


async def test_claude_code_stream_and_session_log(sandbox: LocalSandbox, tmp_path: Path) -> None:
    fixture = STREAMS / "claude-code.jsonl"
    executor = _executor(
        command=["sh", "-c", f"cat {fixture}", "agent", "{prompt}"], events="claude-code"
    )
    logs = tmp_path / "session"
    trajectory = await executor.execute(_stim(), sandbox, _options(session_log_dir=logs))
    assert trajectory.output == "The project has two files: README.md and main.py."
    assert trajectory.metadata.session_id == "8c1f5d2e-5b7a-4f5e-9a51-3f2b7f0c9d11"
    assert trajectory.metrics.tool_call_count == 3
    assert trajectory.metrics.skill_activation_breakdown == {"python-style": 1}
    assert trajectory.events[0].type == "user_message"
    assert trajectory.events[1].type == "turn_start"
    assert trajectory.events[-1].type == "turn_end"
    assert (logs / "events.jsonl").read_text() == fixture.read_text()
    assert trajectory.metadata.extra["eventFormat"] == "claude-code"


async def test_codex_stream(sandbox: LocalSandbox) -> None:
    fixture = STREAMS / "codex.jsonl"
    executor = _executor(command=["sh", "-c", f"cat {fixture}"], events="codex")
    trajectory = await executor.execute(_stim(), sandbox, _options())
    assert trajectory.output.startswith("I updated main.py")
    assert trajectory.metadata.session_id == "0199a213-81c0-7800-8aa1-bbab2a035a53"
    assert trajectory.metrics.tool_call_breakdown == {
        "command_execution": 2,
        "file_change": 1,
        "search": 1,
        "web_search": 1,
    }
    assert trajectory.metrics.token_usage.input_tokens == 24763


RESUMABLE_AGENT = """
import json, sys
args = sys.argv[1:]
prompt = sys.stdin.read()
if args and args[0] == '--resume':
    sid = args[1]
    state = open('state-' + sid).read()
    text = f'turn2 sid={sid} prev={state} prompt={prompt}'
else:
    sid = 'session-123'
    open('state-' + sid, 'w').write(prompt)
    text = f'turn1 prompt={prompt}'
print(json.dumps({'type': 'session', 'data': {'sessionId': sid}}))
print(json.dumps({'type': 'tool_call', 'data': {'toolName': 'write', 'toolCallId': 'c'}}))
print(json.dumps({'type': 'assistant_message', 'data': {'content': text}}))
"""


async def test_multi_turn_with_resume(sandbox: LocalSandbox, tmp_path: Path) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text(RESUMABLE_AGENT)
    executor = _executor(
        command=[PY, str(agent)],
        resume=[PY, str(agent), "--resume", "{session_id}"],
        events="vally",
    )
    assert supports_turns(executor)
    stimulus = Stimulus(name="mt", turns=[Turn(prompt="first"), Turn(prompt="second")])
    logs = tmp_path / "logs"
    trajectory = await executor.execute(stimulus, sandbox, _options(session_log_dir=logs))
    assert trajectory.output == "turn2 sid=session-123 prev=first prompt=second"
    assert trajectory.metrics.turn_count == 2
    assert trajectory.metrics.tool_call_count == 2
    messages = [(e.turn, e.type, e.data.content) for e in trajectory.events if "message" in e.type]
    assert messages == [
        (0, "user_message", "first"),
        (0, "assistant_message", "turn1 prompt=first"),
        (1, "user_message", "second"),
        (1, "assistant_message", "turn2 sid=session-123 prev=first prompt=second"),
    ]
    assert trajectory.for_turn(0).output == "turn1 prompt=first"
    assert len((logs / "events.jsonl").read_text().splitlines()) == 6


async def test_session_id_from_regex(sandbox: LocalSandbox) -> None:
    script = (
        "import sys\n"
        "if len(sys.argv) > 1: print('resumed ' + sys.argv[1])\n"
        "else: print('started', file=sys.stderr); "
        "print('Session: abc-999 ready', file=sys.stderr)\n"
        "print('ok')\n"
    )
    executor = _executor(
        command=[PY, "-c", script],
        resume=[PY, "-c", script, "{session_id}"],
        session_id_from=r"Session: (\S+)",
    )
    stimulus = Stimulus(name="mt", turns=[Turn(prompt="a"), Turn(prompt="b")])
    trajectory = await executor.execute(stimulus, sandbox, _options())
    assert trajectory.output == "resumed abc-999\nok"
    assert trajectory.metadata.session_id == "abc-999"


async def test_turns_without_resume_are_unsupported(sandbox: LocalSandbox) -> None:
    executor = _executor(command=["echo", "x"])
    assert not supports_turns(executor)
    stimulus = Stimulus(name="mt", turns=[Turn(prompt="a"), Turn(prompt="b")])
    with pytest.raises(UnsupportedError, match=r"set config\.resume"):
        await executor.execute(stimulus, sandbox, _options())


async def test_timeout_ends_the_trajectory(sandbox: LocalSandbox) -> None:
    executor = _executor(command=["sh", "-c", "echo partial; sleep 1000"])
    trajectory = await executor.execute(_stim(), sandbox, _options(timeout=0.5))
    assert trajectory.end_reason == "timeout"
    assert trajectory.output == "partial"
    assert trajectory.events[-1].type == "turn_end"
    assert trajectory.metrics.wall_time_ms >= 500


async def test_crash_without_output_raises(sandbox: LocalSandbox) -> None:
    executor = _executor(command=["sh", "-c", "echo fatal-config-problem >&2; exit 2"])
    with pytest.raises(ExecutionError, match=r"exited with code 2.*fatal-config-problem"):
        await executor.execute(_stim(), sandbox, _options())
    missing = _executor(command=["definitely-not-an-agent-xyz"])
    with pytest.raises(ExecutionError, match="could not start"):
        await missing.execute(_stim(), sandbox, _options())


async def test_nonzero_exit_with_output_is_an_error_event(sandbox: LocalSandbox) -> None:
    executor = _executor(command=["sh", "-c", "echo half done; echo oops >&2; exit 1"])
    trajectory = await executor.execute(_stim(), sandbox, _options())
    assert trajectory.end_reason == "completed"
    assert trajectory.output == "half done"
    errors = [e.data for e in trajectory.events if e.type == "error"]
    assert len(errors) == 1
    assert "exit code 1" in errors[0].message and "oops" in errors[0].message
    assert trajectory.metrics.error_count == 1
    assert trajectory.metadata.extra["exitCodes"] == [1]


async def test_output_from_file(sandbox: LocalSandbox) -> None:
    executor = _executor(
        command=["sh", "-c", "echo noise; printf 'final answer' > out/answer.md", "a"],
        output="file",
        output_file="out/answer.md",
    )
    await sandbox.write_file("out/.keep", b"")
    trajectory = await executor.execute(_stim(), sandbox, _options())
    assert trajectory.output == "final answer"
    nothing = _executor(command=["true"], output="file", output_file="missing.md")
    trajectory = await nothing.execute(_stim(), sandbox, _options())
    assert trajectory.output == ""
    assert [e.data.code for e in trajectory.events if e.type == "error"] == [
        "missing_output_file"
    ]


def test_config_validation() -> None:
    with pytest.raises(ValidationError, match="output_file"):
        CommandExecutor.Config.model_validate({"command": ["x"], "output": "file"})
    with pytest.raises(ValidationError, match="command must name a program"):
        CommandExecutor.Config.model_validate({"command": []})
    with pytest.raises(ValidationError):
        CommandExecutor.Config.model_validate({"command": ["x"], "events": "json"})
    with pytest.raises(ValidationError):
        CommandExecutor.Config.model_validate({"command": ["x"], "unknown": 1})
    with pytest.raises(ValidationError, match="regex"):
        CommandExecutor.Config.model_validate({"command": ["x"], "session_id_from": "("})
    assert json.loads(CommandExecutor.Config(command="a b").model_dump_json())["command"] == "a b"
