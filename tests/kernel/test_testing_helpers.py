"""The public test helpers of vally.testing, and observer registration on the session."""

from __future__ import annotations

from pathlib import Path

import pytest

from vally import BaseGrader, GraderMetadata, GraderResult, hookimpl
from vally.contracts.events import RunInfo
from vally.contracts.protocols import GradeContext
from vally.errors import ConfigError, PluginValidationError
from vally.plugins.session import Session
from vally.testing import (
    RecordingReporter,
    grade,
    make_session,
    make_stimulus,
    make_trajectory,
)


def test_make_trajectory_builds_consistent_events_and_metrics() -> None:
    trajectory = make_trajectory(
        "done",
        tool_calls=["bash", ("edit", {"path": "a.py"}), {"name": "bash", "success": False}],
        input_tokens=100,
        output_tokens=20,
        model="m1",
        errors=["tool failed"],
        prompt="fix it",
    )
    assert trajectory.output == "done"
    assert trajectory.stimulus.prompt == "fix it"
    assert [e.type for e in trajectory.events] == [
        "user_message",
        "tool_call",
        "tool_result",
        "tool_call",
        "tool_result",
        "tool_call",
        "tool_result",
        "token_usage",
        "error",
        "assistant_message",
    ]
    metrics = trajectory.metrics
    assert metrics.tool_call_count == 3
    assert metrics.tool_call_breakdown == {"bash": 2, "edit": 1}
    assert metrics.token_usage.total_tokens == 120
    assert metrics.error_count == 1
    assert metrics.turn_count == 1
    assert trajectory.metadata.model == "m1"


def test_make_stimulus_accepts_graders_and_turns() -> None:
    stimulus = make_stimulus(
        name="s1", turns=[{"prompt": "a"}, {"prompt": "b"}], graders=[{"type": "word-count"}]
    )
    assert stimulus.prompts == ["a", "b"]
    assert stimulus.graders[0].type == "word-count"


class EchoGrader(BaseGrader):
    metadata = GraderMetadata(name="echo-test", description="passes when output says yes")

    async def grade(self, context: GradeContext) -> GraderResult:
        sandbox_seen = context.sandbox is not None
        return self.result(
            context,
            passed=context.trajectory.output == "yes",
            evidence=f"sandbox={sandbox_seen}",
        )


def test_grade_runs_through_validation() -> None:
    result = grade(EchoGrader, make_trajectory("yes"), name="my label", required=True)
    assert result.passed and result.name == "my label" and result.required
    assert result.evidence == "sandbox=False"
    assert not grade(EchoGrader, make_trajectory("no")).passed
    with pytest.raises(ConfigError, match="echo-test"):
        grade(EchoGrader, make_trajectory("yes"), {"unexpected": 1})


def test_grade_rejects_invalid_classes() -> None:
    class NoMetadata(BaseGrader):
        pass

    with pytest.raises(PluginValidationError):
        grade(NoMetadata, make_trajectory("x"))


def test_recording_reporter_receives_events_through_the_emitter(tmp_path: Path) -> None:
    session = make_session(RecordingReporter)
    reporter = session.create("reporter", "recording")
    session.register_observer(reporter, "recording")
    run = RunInfo(run_id="r1", command="eval", run_dir=tmp_path, planned_trials=0, started_at="now")
    session.emitter.emit("vally_run_start", run=run)
    assert reporter.names() == ["vally_run_start"]
    assert reporter.events[0][1]["run"] is run


def test_misspelled_observer_hook_is_rejected() -> None:
    class Typo:
        @hookimpl
        def vally_trail_end(self, run: object, record: object) -> None:
            """Misspelled on purpose."""

    session = Session(environ={})
    with pytest.raises(PluginValidationError, match="vally_trail_end"):
        session.register_observer(Typo(), "typo")
    assert session.plugin_manager.get_plugin("typo") is None


def test_fake_sandbox_files_and_commands(tmp_path: Path) -> None:
    import asyncio

    from vally.contracts.protocols import ExecResult, Sandbox
    from vally.errors import PathEscapeError
    from vally.testing import FakeSandbox

    async def scenario() -> None:
        sandbox = FakeSandbox(
            {"src/a.py": "print(1)", "README.md": b"hi"},
            exec_handler=lambda argv: ExecResult(exit_code=3, stdout=" ".join(argv), stderr=""),
        )
        assert isinstance(sandbox, Sandbox)
        assert await sandbox.read_file("src/a.py") == b"print(1)"
        assert await sandbox.read_file("/workspace/README.md") == b"hi"
        await sandbox.write_file("src/b.py", b"x")
        assert await sandbox.list_files("src") == ["src/a.py", "src/b.py"]
        assert await sandbox.list_files() == ["README.md", "src/a.py", "src/b.py"]
        with pytest.raises(FileNotFoundError):
            await sandbox.read_file("missing.txt")
        with pytest.raises(PathEscapeError):
            await sandbox.read_file("../etc/passwd")
        result = await sandbox.exec(["pytest", "-q"])
        assert (result.exit_code, result.stdout) == (3, "pytest -q")
        assert sandbox.commands == [["pytest", "-q"]]
        await sandbox.copy_out("src", tmp_path / "out")
        assert (tmp_path / "out" / "b.py").read_bytes() == b"x"
        await sandbox.copy_in(tmp_path / "out", "copied")
        assert await sandbox.read_file("copied/a.py") == b"print(1)"
        await sandbox.close()
        assert sandbox.closed

    asyncio.run(scenario())


def test_base_sandbox_hands_exec_and_spawn_arguments_to_one_request() -> None:
    import asyncio

    from vally import BaseSandbox, ExecRequest, ExecResult, Process, Sandbox

    class Recording(BaseSandbox):
        workdir = "/w"
        host_workdir = None

        def __init__(self) -> None:
            self.requests: list[ExecRequest] = []

        async def run_command(self, request: ExecRequest) -> ExecResult:
            self.requests.append(request)
            return ExecResult(exit_code=0, stdout="", stderr="")

        async def start_process(self, request: ExecRequest) -> Process:
            self.requests.append(request)
            raise NotImplementedError

    async def scenario() -> Recording:
        sandbox = Recording()
        await sandbox.exec(["a"], env={"K": "v"}, cwd="sub", timeout=2.0, stdin=b"in")
        await sandbox.exec(["b"], output_limit=10)
        with pytest.raises(NotImplementedError):
            await sandbox.spawn(["c"], cwd="x")
        return sandbox

    sandbox = asyncio.run(scenario())
    assert isinstance(sandbox, Sandbox)
    assert sandbox.requests == [
        ExecRequest(["a"], {"K": "v"}, "sub", 2.0, b"in", 1_000_000),
        ExecRequest(["b"], output_limit=10),
        ExecRequest(["c"], cwd="x"),
    ]


def test_grade_passes_the_sandbox() -> None:
    from vally.testing import FakeSandbox

    result = grade(EchoGrader, make_trajectory("yes"), sandbox=FakeSandbox())
    assert result.evidence == "sandbox=True"
