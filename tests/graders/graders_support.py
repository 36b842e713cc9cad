"""Builders shared by the grader tests: trajectories with typed events, grade contexts, and
a one-call way to validate a config and run a grader."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vally.contracts.protocols import GradeContext, Sandbox
from vally.models.records import GraderResult
from vally.models.spec import GraderConfig, Stimulus
from vally.models.trajectory import (
    AssistantMessageEvent,
    ErrorData,
    ErrorEvent,
    MessageData,
    SkillActivationData,
    SkillActivationEvent,
    TokenUsageData,
    TokenUsageEvent,
    ToolCallData,
    ToolCallEvent,
    Trajectory,
    TurnData,
    TurnStartEvent,
    UserMessageEvent,
    compute_metrics,
)


def stimulus(name: str = "s1", turns: Sequence[str] | None = None) -> Stimulus:
    if turns is not None:
        return Stimulus(name=name, turns=[{"prompt": p} for p in turns])  # type: ignore[misc]
    return Stimulus(name=name, prompt="Do the task.")


def user(text: str, turn: int = 0) -> UserMessageEvent:
    return UserMessageEvent(turn=turn, data=MessageData(content=text))


def say(text: str, turn: int = 0) -> AssistantMessageEvent:
    return AssistantMessageEvent(turn=turn, data=MessageData(content=text))


def call(
    name: str,
    arguments: dict[str, Any] | str | None = None,
    *,
    batch: str | None = None,
    turn: int = 0,
    call_id: str | None = None,
) -> ToolCallEvent:
    return ToolCallEvent(
        turn=turn,
        data=ToolCallData(
            tool_name=name,
            tool_call_id=call_id or f"id-{name}-{id(arguments)}",
            arguments={} if arguments is None else arguments,
            batch_id=batch,
        ),
    )


def skill(name: str, turn: int = 0) -> SkillActivationEvent:
    return SkillActivationEvent(turn=turn, data=SkillActivationData(skill_name=name))


def error(message: str, *, fatal: bool = False, turn: int = 0) -> ErrorEvent:
    return ErrorEvent(turn=turn, data=ErrorData(message=message, fatal=fatal))


def tokens(inp: int, out: int, turn: int = 0) -> TokenUsageEvent:
    return TokenUsageEvent(turn=turn, data=TokenUsageData(input_tokens=inp, output_tokens=out))


def turn_start(turn: int) -> TurnStartEvent:
    return TurnStartEvent(turn=turn, data=TurnData(turn_id=f"turn-{turn + 1}"))


def trajectory(
    events: Sequence[Any] = (),
    *,
    output: str | None = None,
    stim: Stimulus | None = None,
    wall_time_ms: int = 0,
    **fields: Any,
) -> Trajectory:
    """A trajectory whose metrics are computed from ``events``; ``output`` defaults to the
    last assistant message."""
    evs = list(events)
    if output is None:
        output = next((e.data.content for e in reversed(evs) if e.type == "assistant_message"), "")
    return Trajectory(
        stimulus=stim or stimulus(),
        events=evs,
        metrics=compute_metrics(evs, wall_time_ms=wall_time_ms),
        output=output,
        **fields,
    )


def context(
    grader_type: str,
    config: dict[str, Any] | None = None,
    *,
    traj: Trajectory | None = None,
    sandbox: Sandbox | None = None,
    spec_dir: Path | None = None,
    name: str | None = None,
    required: bool = False,
) -> GradeContext:
    t = traj or trajectory([say("hello")])
    return GradeContext(
        trajectory=t,
        stimulus=t.stimulus,
        grader=GraderConfig(type=grader_type, config=config or {}, name=name, required=required),
        sandbox=sandbox,
        spec_dir=spec_dir,
    )


def run(grader_cls: type, ctx: GradeContext) -> GraderResult:
    """Validate ``ctx.grader.config`` with the grader's Config, build it, and grade."""
    config = grader_cls.Config.model_validate(ctx.grader.config)
    grader = grader_cls(config)
    result = asyncio.run(grader.grade(ctx))
    assert isinstance(result, GraderResult)
    return result
