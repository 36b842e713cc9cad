from __future__ import annotations

import itertools
from typing import Any

import pytest
from graders_support import (
    call,
    context,
    error,
    run,
    say,
    skill,
    tokens,
    trajectory,
    turn_start,
    user,
)
from hypothesis import given, settings, strategies as st
from pydantic import ValidationError

from vally_builtin.graders.trajectory import (
    CompletedGrader,
    ErrorCountGrader,
    ExitSuccessGrader,
    SkillInvocationGrader,
    TokenBudgetGrader,
    ToolCallCountGrader,
    ToolCallsGrader,
    ToolMatcher,
    TurnCountGrader,
    WallTimeGrader,
    _matches,
    _ordered_match,
    tool_calls_of,
)


def tool_calls(config: dict[str, Any], events: list[Any]):
    return run(ToolCallsGrader, context("tool-calls", config, traj=trajectory(events)))


BASH_AZ = call("bash", {"command": "az rest --uri x --method get"})
READ = call("read_receipt", {"currency": "USD", "amount": 12.5, "tags": ["a", "b"]})
WRITE = call("write_file", {"path": "out.txt", "content": "hi"})


def test_required_shorthand_strings_are_name_regexes() -> None:
    ok = tool_calls({"required": ["^write_file$", "read"]}, [READ, WRITE, say("ok")])
    assert ok.passed
    assert "required tools called" in ok.evidence
    bad = tool_calls({"required": ["^write_file$", "^delete$"]}, [WRITE])
    assert not bad.passed
    assert bad.evidence == "required tools were not called: '^delete$'"


def test_required_with_command_and_args_regexes() -> None:
    matcher = {"name": "(?i)^(bash|shell)$", "command": "az rest .*--method get"}
    assert tool_calls({"required": [matcher]}, [BASH_AZ]).passed
    miss = tool_calls({"required": [{**matcher, "command": "--method post"}]}, [BASH_AZ])
    assert not miss.passed
    assert "command pattern '--method post'" in miss.evidence

    args_ok = {"name": "^read_receipt$", "args": {"currency": "^USD$", "amount": "^12\\.5$"}}
    assert tool_calls({"required": [args_ok]}, [READ]).passed
    args_bad = {"name": "^read_receipt$", "args": {"currency": "^EUR$"}}
    assert not tool_calls({"required": [args_bad]}, [READ]).passed
    missing_arg = {"args": {"nope": "."}}
    assert not tool_calls({"required": [missing_arg]}, [READ]).passed
    # `pattern` searches the serialised arguments (lists, numbers)
    assert tool_calls({"required": [{"pattern": '"tags": \\["a", "b"\\]'}]}, [READ]).passed
    # string arguments (not JSON) are matched by `command` as raw text
    raw = call("shell", "ls -la /tmp")
    assert tool_calls({"required": [{"command": "^ls -la"}]}, [raw]).passed


def test_disallowed() -> None:
    ok = tool_calls({"disallowed": [{"name": "^delete"}]}, [WRITE])
    assert ok.passed and ok.evidence == "no disallowed tools called"
    bad = tool_calls({"disallowed": ["write", {"name": "bash", "command": "rm -rf"}]}, [WRITE])
    assert not bad.passed
    assert bad.evidence == "disallowed tools were called: write_file (matched 'write')"


def test_ordered_and_batches() -> None:
    cfg = {"required": ["^read_receipt$", "^write_file$"], "ordered": True}
    assert tool_calls(cfg, [READ, WRITE]).passed
    wrong = tool_calls(cfg, [WRITE, READ])
    assert not wrong.passed
    assert "not called in order" in wrong.evidence
    assert "only the first 1 matched" in wrong.evidence
    # The same two calls issued in one model response are simultaneous: any order passes.
    batched = [
        call("write_file", {"p": 1}, batch="r1", call_id="a"),
        call("read_receipt", {"p": 2}, batch="r1", call_id="b"),
    ]
    assert tool_calls(cfg, batched).passed
    # ...but a batch after a later call does not help.
    later = [call("write_file", call_id="w0"), *batched[1:]]
    assert tool_calls(cfg, [batched[0], call("x", call_id="x")]).passed is False
    assert tool_calls(cfg, later).passed is False
    # unordered: any order passes
    assert tool_calls({"required": cfg["required"]}, [WRITE, READ]).passed


def test_ordered_needs_distinct_calls_and_backtracks_within_a_batch() -> None:
    cfg = {"required": ["write", "write"], "ordered": True}
    assert not tool_calls(cfg, [WRITE]).passed
    assert tool_calls(cfg, [WRITE, call("write_file", call_id="w2")]).passed
    # In one batch, x matches both matchers and y only the first: the first greedy choice
    # (x for matcher 1) fails, the search must try y for matcher 1.
    both = {"required": [{"name": "^(x|y)$"}, {"name": "^x$"}], "ordered": True}
    batch = [call("x", batch="b", call_id="1"), call("y", batch="b", call_id="2")]
    assert tool_calls(both, batch).passed


def test_ordered_search_is_fast_on_long_trajectories() -> None:
    # Every matcher is met somewhere, but '^first$' only before everything else: the
    # ordered search has to prove there is no way, over a long trajectory.
    calls = [call("first", call_id="f")] + [call("t", call_id=str(i)) for i in range(400)]
    cfg = {"required": [".*"] * 30 + ["^first$"], "ordered": True}
    result = tool_calls(cfg, calls)
    assert not result.passed
    assert "only the first 30 matched in order" in result.evidence
    batched = [call("t", batch=f"b{i // 4}", call_id=str(i)) for i in range(400)]
    assert tool_calls({"required": [".*"] * 60, "ordered": True}, batched).passed


def test_tool_calls_config_validation() -> None:
    with pytest.raises(ValidationError, match="at least one"):
        ToolCallsGrader.Config.model_validate({})
    with pytest.raises(ValidationError, match="invalid regular expression"):
        ToolCallsGrader.Config.model_validate({"required": ["(bad"]})
    with pytest.raises(ValidationError):
        ToolCallsGrader.Config.model_validate({"required": [{"nam": "x"}]})


def test_skill_invocation() -> None:
    traj = trajectory([skill("azure-deploy"), skill("docs"), say("done")])
    cfg = {"required": ["^azure-"], "disallowed": ["^legacy"]}
    ok = run(SkillInvocationGrader, context("skill-invocation", cfg, traj=traj))
    assert ok.passed and "activated: azure-deploy, docs" in ok.evidence
    bad_cfg = {"required": ["^terraform$"], "disallowed": ["docs"]}
    bad = run(SkillInvocationGrader, context("skill-invocation", bad_cfg, traj=traj))
    assert not bad.passed
    assert "required skills were not activated: ^terraform$" in bad.evidence
    assert "disallowed skills were activated: docs" in bad.evidence


@pytest.mark.parametrize(
    ("grader", "events", "limit", "value"),
    [
        (ToolCallCountGrader, [call("a", call_id="1"), call("b", call_id="2")], 2, 2),
        (TurnCountGrader, [turn_start(0), turn_start(1), turn_start(2)], 2, 3),
        (TokenBudgetGrader, [tokens(100, 50), tokens(10, 5)], 200, 165),
        (ErrorCountGrader, [error("boom")], 0, 1),
    ],
)
def test_budgets(grader: type, events: list[Any], limit: int, value: int) -> None:
    ctx = context(grader.metadata.name, {"max": limit}, traj=trajectory(events))
    result = run(grader, ctx)
    assert result.passed is (value <= limit)
    assert f": {value} {'<=' if value <= limit else '>'} max {limit}" in result.evidence


def test_budget_rejects_negative() -> None:
    with pytest.raises(ValidationError):
        ToolCallCountGrader.Config.model_validate({"max": -1})


def test_wall_time() -> None:
    traj = trajectory([say("x")], wall_time_ms=90_000)
    ok = run(WallTimeGrader, context("wall-time", {"max": "2m"}, traj=traj))
    assert ok.passed and ok.evidence == "Wall time: 90s <= max 2m"
    bad = run(WallTimeGrader, context("wall-time", {"max": "1m"}, traj=traj))
    assert not bad.passed and bad.evidence == "Wall time: 90s > max 1m"
    with pytest.raises(ValidationError, match="unit"):
        WallTimeGrader.Config.model_validate({"max": 60})


def test_completed_and_exit_success() -> None:
    good = trajectory([user("hi"), error("tool failed"), say("done")])
    assert run(CompletedGrader, context("completed", traj=good)).passed
    fatal = trajectory([say("partial"), error("model crashed", fatal=True)])
    result = run(CompletedGrader, context("completed", traj=fatal))
    assert not result.passed and "fatal error: model crashed" in result.evidence
    stopped = trajectory([say("x")], end_reason="max_turns", end_detail="5 turns")
    result = run(CompletedGrader, context("completed", traj=stopped))
    assert not result.passed and "'max_turns' (5 turns)" in result.evidence
    empty = trajectory([user("hi")])
    assert "no output" in run(CompletedGrader, context("completed", traj=empty)).evidence

    assert run(ExitSuccessGrader, context("exit-success", traj=good)).passed
    assert not run(ExitSuccessGrader, context("exit-success", traj=empty)).passed
    with pytest.raises(ValidationError):
        CompletedGrader.Config.model_validate({"x": 1})


@given(
    st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 2)), max_size=7),
    st.lists(st.sampled_from(["a", "b", "c", "a|b", "b|c"]), min_size=1, max_size=4),
)
@settings(max_examples=300, deadline=None)
def test_ordered_match_agrees_with_brute_force(
    spec: list[tuple[str, int]], patterns: list[str]
) -> None:
    # Consecutive calls with the same batch number form one batch (one model response).
    calls = tool_calls_of(
        trajectory([call(name, batch=f"b{b}", call_id=str(i)) for i, (name, b) in enumerate(spec)])
    )
    matchers = [ToolMatcher.model_validate(f"^({p})$") for p in patterns]
    expected = any(
        all(_matches(m, c) for m, c in zip(matchers, chosen, strict=True))
        and all(x.step <= y.step for x, y in itertools.pairwise(chosen))
        for chosen in itertools.permutations(calls, len(matchers))
    )
    assert _ordered_match(matchers, calls)[0] is expected
