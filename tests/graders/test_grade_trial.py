"""The grading kernel (vally.engine.trials.grading) with the real built-in graders."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, ClassVar

import pytest
from graders_support import call, say, skill, stimulus, tokens, trajectory, turn_start, user

from vally.contracts.bases import BaseGrader, EmptyConfig
from vally.contracts.metadata import GraderMetadata
from vally.contracts.protocols import GradeContext
from vally.engine.trials.grading import check_constraints, grade_trial
from vally.errors import ConfigError, GradingError
from vally.models.records import GradeResult, GraderResult
from vally.models.spec import Constraints, GraderConfig
from vally.models.trajectory import Trajectory
from vally_builtin.graders.files import FileExistsGrader
from vally_builtin.graders.output import OutputContainsGrader
from vally_builtin.graders.trajectory import ToolCallsGrader


class Boom(BaseGrader[EmptyConfig]):
    metadata: ClassVar[GraderMetadata] = GraderMetadata(name="boom")

    async def grade(self, context: GradeContext) -> GraderResult:
        raise RuntimeError("kaput")


class Judge(BaseGrader[EmptyConfig]):
    metadata: ClassVar[GraderMetadata] = GraderMetadata(name="judge", needs_llm=True)

    async def grade(self, context: GradeContext) -> GraderResult:
        return self.result(context, passed=True, evidence="fine")


class Wrong(BaseGrader[EmptyConfig]):
    metadata: ClassVar[GraderMetadata] = GraderMetadata(name="wrong")

    async def grade(self, context: GradeContext) -> Any:
        return {"passed": True}


REGISTRY: dict[str, type] = {
    "output-contains": OutputContainsGrader,
    "file-exists": FileExistsGrader,
    "tool-calls": ToolCallsGrader,
    "boom": Boom,
    "judge": Judge,
    "wrong": Wrong,
}


def create(config: GraderConfig) -> Any:
    cls = REGISTRY[config.type]
    return cls(cls.Config.model_validate(config.config))


def grade(
    traj: Trajectory,
    graders: list[dict[str, Any]],
    **kwargs: Any,
) -> GradeResult:
    configs = [GraderConfig.model_validate(g) for g in graders]
    return asyncio.run(grade_trial(traj, traj.stimulus, configs, create_grader=create, **kwargs))


def test_docs_example_weighted_threshold_fail(workspace: Path, sandbox) -> None:
    (workspace / "add.test.js").write_text("x")
    traj = trajectory([say("no greeting here")])
    seen: list[str] = []
    result = grade(
        traj,
        [
            {"type": "file-exists", "config": {"path": "*.test.js"}},
            {"type": "output-contains", "config": {"substring": "hello"}},
        ],
        sandbox=sandbox,
        weights={"file-exists": 1.0, "output-contains": 0.5},
        threshold=0.7,
        on_result=lambda r: seen.append(r.name),
    )
    assert seen == ["file-exists", "output-contains"]
    assert result.mode == "threshold" and result.has_graders and not result.errored
    assert round(result.score, 3) == 0.667
    assert not result.passed
    assert [d.weight for d in result.details] == [1.0, 0.5]
    # Binary mode: one failing grader fails the trial.
    binary = grade(
        traj,
        [{"type": "file-exists", "config": {"path": "*.test.js"}}],
        sandbox=sandbox,
    )
    assert binary.mode == "binary" and binary.passed and binary.score == 1.0


def test_grader_exceptions_become_errored_results() -> None:
    traj = trajectory([say("hello")])
    result = grade(
        traj,
        [
            {"type": "output-contains", "config": {"substring": "hello"}},
            {"type": "boom", "name": "exploder"},
            {"type": "file-exists", "config": {"path": "a.txt"}},
            {"type": "wrong"},
        ],
        threshold=0.1,
    )
    assert result.errored and not result.passed
    ok, boom, files, wrong = result.details
    assert ok.status == "success" and ok.passed
    assert boom.status == "error" and boom.score == 0 and not boom.passed
    assert boom.name == "exploder"
    where = boom.metadata["location"]
    assert where.startswith(f"{__file__}:")
    assert boom.evidence == f"grader 'exploder' (boom) raised RuntimeError: kaput (at {where})"
    assert "RuntimeError: kaput" in boom.metadata["traceback"]
    assert files.status == "error" and "needs the trial workspace" in files.evidence
    assert wrong.status == "error" and "instead of a GraderResult" in wrong.evidence
    assert result.score == pytest.approx(0.25)


def test_invalid_config_from_create_grader_is_an_errored_result() -> None:
    result = grade(trajectory([say("x")]), [{"type": "output-contains", "config": {"nope": 1}}])
    assert result.errored and result.details[0].status == "error"
    assert "substring" in result.details[0].evidence


def test_llm_graders_need_a_provider() -> None:
    result = grade(trajectory([say("x")]), [{"type": "judge"}])
    assert result.errored
    assert "needs an LLM provider" in result.details[0].evidence


def test_turn_scoping() -> None:
    stim = stimulus("chat", turns=["first", "second"])
    traj = trajectory(
        [
            turn_start(0),
            user("first", 0),
            call("search", turn=0, call_id="s"),
            say("found it", 0),
            turn_start(1),
            user("second", 1),
            call("write_file", turn=1, call_id="w"),
            say("written", 1),
        ],
        stim=stim,
    )
    result = grade(
        traj,
        [
            {"type": "output-contains", "config": {"substring": "found"}, "turn": 0},
            {"type": "output-contains", "config": {"substring": "found"}},
            {"type": "tool-calls", "config": {"required": ["search"]}, "turn": 1},
            {"type": "tool-calls", "config": {"required": ["write_file"]}, "turn": 1},
            {"type": "tool-calls", "config": {"required": ["search"]}, "turn": 2},
        ],
    )
    turn0, whole, search1, write1, beyond = result.details
    assert turn0.passed and turn0.turn == 0
    assert not whole.passed  # the whole trajectory's output is the last message
    assert not search1.passed and write1.passed
    assert beyond.status == "error" and "has 2 turns" in beyond.evidence
    assert result.errored


def test_required_grader_fails_the_trial_in_threshold_mode() -> None:
    traj = trajectory([say("hello world")])
    graders = [
        {"type": "output-contains", "config": {"substring": "hello"}},
        {"type": "output-contains", "config": {"substring": "world"}},
        {"type": "output-contains", "config": {"substring": "bye"}, "required": True},
    ]
    result = grade(traj, graders, threshold=0.5)
    assert result.score == pytest.approx(2 / 3)
    assert not result.passed and not result.errored
    assert result.details[2].required
    graders[2]["required"] = False
    assert grade(traj, graders, threshold=0.5).passed


def test_constraints_become_violations() -> None:
    traj = trajectory(
        [
            turn_start(0),
            call("bash", {"command": "rm -rf /"}, call_id="1"),
            call("write_file", call_id="2"),
            skill("azure-deploy"),
            tokens(900, 200),
            say("done"),
        ],
        wall_time_ms=5_000,
    )
    constraints = Constraints(
        max_turns=3,
        max_tokens=1000,
        max_duration="4s",  # type: ignore[arg-type]
        max_tool_calls=5,
        expect_tools=["^write_file$", "^read_file$"],
        reject_tools=["^bash$"],
        expect_skills=["azure"],
        reject_skills=["^legacy"],
    )
    violations = check_constraints(traj, constraints)
    assert violations == [
        "expect_tools: nothing matching '^read_file$' was used",
        "reject_tools: '^bash$' matched bash",
        "max_tokens exceeded: 1100 tokens > 1000",
        "max_duration exceeded: 5 seconds of wall time > 4",
    ]
    result = grade(
        traj,
        [{"type": "output-contains", "config": {"substring": "done"}}],
        constraints=constraints,
    )
    assert not result.passed and not result.errored
    assert result.constraint_violations == violations


def test_end_reason_limit_is_a_violation() -> None:
    traj = trajectory([say("partial")], end_reason="max_turns", end_detail="stopped after 5")
    assert check_constraints(traj, Constraints(max_turns=5)) == [
        "max_turns: the run was stopped at the limit: stopped after 5"
    ]
    assert check_constraints(traj, None) == check_constraints(traj, Constraints(max_turns=5))
    assert check_constraints(trajectory([say("fine")]), None) == []


def test_invalid_constraint_regex_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="expect_tools"):
        check_constraints(trajectory([say("x")]), Constraints(expect_tools=["(bad"]))


def test_no_graders() -> None:
    traj = trajectory([say("x")])
    result = grade(traj, [])
    assert result.mode == "no-graders" and result.passed and not result.has_graders
    violated = grade(traj, [], constraints=Constraints(expect_tools=["x"]))
    assert not violated.passed and violated.mode == "no-graders"


def test_negative_weight_is_rejected() -> None:
    with pytest.raises(ConfigError, match="weights"):
        grade(trajectory([say("x")]), [], weights={"output-contains": -1})


def test_grading_error_message_is_kept_verbatim() -> None:
    class Refuses(BaseGrader[EmptyConfig]):
        metadata: ClassVar[GraderMetadata] = GraderMetadata(name="refuses")

        async def grade(self, context: GradeContext) -> GraderResult:
            raise GradingError("judge answered garbage twice")

    REGISTRY["refuses"] = Refuses
    try:
        result = grade(trajectory([say("x")]), [{"type": "refuses"}])
    finally:
        del REGISTRY["refuses"]
    assert result.details[0].evidence == "judge answered garbage twice"


class WhereAmI(BaseGrader[EmptyConfig]):
    """Says which thread graded it; sleeps on the event loop when the output says so."""

    metadata: ClassVar[GraderMetadata] = GraderMetadata(name="where")
    threads: ClassVar[list[int]] = []

    async def grade(self, context: GradeContext) -> GraderResult:
        import threading

        self.threads.append(threading.get_ident())
        if context.trajectory.output == "sleep":
            await asyncio.sleep(30)
        if context.trajectory.output == "own timeout":
            raise TimeoutError("the grader's own wait ran out")
        return self.result(context, passed=True, evidence="here")


class WhereAmINonblocking(WhereAmI):
    metadata: ClassVar[GraderMetadata] = GraderMetadata(name="where-nb", nonblocking=True)


def _grade_where(output: str, nonblocking: bool, timeout: str = "5s") -> tuple[GradeResult, int]:
    """Grade a trial with ``output`` by one ``WhereAmI`` grader; also return the thread the
    event loop ran on."""
    import threading

    name = "where-nb" if nonblocking else "where"
    REGISTRY[name] = WhereAmINonblocking if nonblocking else WhereAmI
    WhereAmI.threads.clear()
    configs = [GraderConfig.model_validate({"type": name, "timeout": timeout})]
    traj = trajectory([say(output)])
    result = asyncio.run(grade_trial(traj, traj.stimulus, configs, create_grader=create))
    return result, threading.get_ident()


def test_a_nonblocking_grader_runs_on_the_event_loop_and_others_on_a_grader_thread() -> None:
    result, loop_thread = _grade_where("fine", nonblocking=True)
    assert result.passed and WhereAmI.threads == [loop_thread]
    result, loop_thread = _grade_where("fine", nonblocking=False)
    assert result.passed and WhereAmI.threads and WhereAmI.threads != [loop_thread]


def test_a_nonblocking_grader_is_stopped_at_its_timeout() -> None:
    result, _ = _grade_where("sleep", nonblocking=True, timeout="0.2s")
    detail = result.details[0]
    assert detail.status == "error" and "did not finish within" in detail.evidence


def test_a_nonblocking_grader_s_own_timeout_error_is_a_crash_not_a_timeout() -> None:
    result, _ = _grade_where("own timeout", nonblocking=True)
    detail = result.details[0]
    assert detail.status == "error"
    assert "did not finish within" not in detail.evidence
    assert "the grader's own wait ran out" in detail.evidence


def test_built_in_graders_with_user_regexes_stay_off_the_event_loop() -> None:
    from vally_builtin.graders import files, output, trajectory as budgets

    assert OutputContainsGrader.metadata.nonblocking
    assert FileExistsGrader.metadata.nonblocking
    assert budgets.TurnCountGrader.metadata.nonblocking
    for cls in (
        output.OutputMatchesGrader,
        output.OutputNotMatchesGrader,
        files.FileMatchesGrader,
        files.FileNotMatchesGrader,
        ToolCallsGrader,
        budgets.SkillInvocationGrader,
    ):
        assert not cls.metadata.nonblocking, cls
