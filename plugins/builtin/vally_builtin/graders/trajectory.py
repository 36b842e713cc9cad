"""Graders over the trajectory: tool calls, skills, budgets and liveness.

``tool-calls`` matchers (reference §6.2) are either a string (a regex on the tool name) or an
object with any of:

* ``name``: regex on the tool name;
* ``command``: regex on the call's ``command`` argument (or on the raw argument text when
  the arguments are not a JSON object);
* ``args``: ``{argument: regex}``; non-string values are matched in their JSON form;
* ``pattern``: regex over the JSON-serialised arguments.

Every regex is searched (unanchored, like ``re.search``); anchor with ``^...$``. With
``ordered: true`` the ``required`` matchers must be met by distinct calls in that order,
except that calls issued in one model response (same ``batch_id``) count as simultaneous, so
their relative order does not matter.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import Field, model_validator

from vally import (
    BaseGrader,
    Duration,
    EmptyConfig,
    GradeContext,
    GraderMetadata,
    GraderResult,
    StrictConfig,
    Trajectory,
    format_duration,
)
from vally_builtin.graders import compile_pattern, describe_list


def _metadata(
    name: str, description: str, cost: Any = "free", *, nonblocking: bool = True
) -> GraderMetadata:
    """A trajectory grader's metadata; those that match a user's regular expressions may
    block (``nonblocking=False``)."""
    return GraderMetadata(
        name=name,
        description=description,
        determinism="static",
        cost_profile=cost,
        portability="t1-universal",
        temporal_scope="trajectory-level",
        nonblocking=nonblocking,
    )


# --------------------------------------------------------------------------- tool-calls


class ToolMatcher(StrictConfig):
    """One ``tool-calls`` matcher: a plain string is shorthand for ``{name: STRING}``; at
    least one field must be set, and every regex is searched unanchored (use ``^...$``).

    Attributes:
        name: Regex searched in the tool name.
        command: Regex searched in the call's ``command`` argument (or in the raw argument
            text when the arguments are not a JSON object).
        args: Argument name to a regex searched in that argument's value (non-string
            values in their JSON form).
        pattern: Regex searched in the JSON-serialised arguments.
    """

    name: str | None = None
    command: str | None = None
    args: dict[str, str] = Field(default_factory=dict)
    pattern: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _check(self) -> ToolMatcher:
        if self.name is None and self.command is None and not self.args and self.pattern is None:
            raise ValueError("a tool matcher needs at least one of name, command, args, pattern")
        for value in (self.name, self.command, self.pattern, *self.args.values()):
            if value is not None:
                compile_pattern(value)
        return self

    def describe(self) -> str:
        """A short human description for evidence."""
        parts = [f"'{self.name}'" if self.name is not None else "any tool"]
        if self.command is not None:
            parts.append(f"command pattern '{self.command}'")
        for key, value in self.args.items():
            parts.append(f"{key} pattern '{value}'")
        if self.pattern is not None:
            parts.append(f"arguments pattern '{self.pattern}'")
        return " with ".join([parts[0], ", ".join(parts[1:])]) if len(parts) > 1 else parts[0]


@dataclass(frozen=True)
class _Call:
    index: int
    step: int
    name: str
    arguments: dict[str, Any] | str


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _matches(matcher: ToolMatcher, call: _Call) -> bool:
    if matcher.name is not None and not compile_pattern(matcher.name).search(call.name):
        return False
    args = call.arguments
    if matcher.command is not None:
        if isinstance(args, dict):
            if "command" not in args:
                return False
            target = _as_text(args["command"])
        else:
            target = args
        if not compile_pattern(matcher.command).search(target):
            return False
    for key, regex in matcher.args.items():
        if not isinstance(args, dict) or key not in args:
            return False
        if not compile_pattern(regex).search(_as_text(args[key])):
            return False
    return matcher.pattern is None or bool(compile_pattern(matcher.pattern).search(_as_text(args)))


def tool_calls_of(trajectory: Trajectory) -> list[_Call]:
    """The trajectory's tool calls in order, with batch-aware step numbers."""
    calls: list[_Call] = []
    step = -1
    previous_batch: str | None = None
    for event in trajectory.events:
        if event.type != "tool_call":
            continue
        batch = event.data.batch_id
        if batch is None or batch != previous_batch:
            step += 1
        previous_batch = batch
        calls.append(_Call(len(calls), step, event.data.tool_name, event.data.arguments))
    return calls


def _ordered_match(matchers: Sequence[ToolMatcher], calls: Sequence[_Call]) -> tuple[bool, int]:
    """Can every matcher be met by distinct calls with non-decreasing steps, in order?

    Returns (success, number of leading matchers met by the best attempt).

    A depth-first search with two prunings: failed states are remembered, and after the
    first later step holding a match only that step's candidates are tried (a state at an
    earlier step can reach everything a state at a later step can).
    """
    best = 0
    failed: set[tuple[int, int, frozenset[int]]] = set()
    steps = [c.step for c in calls]

    def search(i: int, min_step: int, used: frozenset[int]) -> bool:
        # Only calls at ``min_step`` or later are reachable, so ``used`` only matters
        # within the current step: that makes failed states memoizable.
        nonlocal best
        best = max(best, i)
        if i == len(matchers):
            return True
        key = (i, min_step, used)
        if key in failed:
            return False
        stop_step: int | None = None
        for call in calls[bisect.bisect_left(steps, min_step) :]:
            if stop_step is not None and call.step > stop_step:
                break
            if call.index in used or not _matches(matchers[i], call):
                continue
            if call.step > min_step and stop_step is None:
                stop_step = call.step
            kept = used if call.step == min_step else frozenset()
            if search(i + 1, call.step, kept | {call.index}):
                return True
        failed.add(key)
        return False

    return search(0, 0, frozenset()), best


class ToolCallsConfig(StrictConfig):
    """Config of ``tool-calls``.

    Attributes:
        required: Matchers that some call must meet.
        disallowed: Matchers no call may meet.
        ordered: Required matchers must be met in order (batched calls are unordered).
    """

    required: list[ToolMatcher] = Field(default_factory=list)
    disallowed: list[ToolMatcher] = Field(default_factory=list)
    ordered: bool = False

    @model_validator(mode="after")
    def _something(self) -> ToolCallsConfig:
        if not self.required and not self.disallowed:
            raise ValueError("tool-calls needs at least one 'required' or 'disallowed' matcher")
        return self


class ToolCallsGrader(BaseGrader[ToolCallsConfig]):
    """Required tools were called (optionally in order); disallowed ones were not."""

    metadata: ClassVar[GraderMetadata] = _metadata(
        "tool-calls",
        "Required, disallowed and optionally ordered tool calls.",
        cost="low",
        nonblocking=False,
    )

    async def grade(self, context: GradeContext) -> GraderResult:
        """Match the trajectory's tool calls against the matchers."""
        cfg = self.config
        calls = tool_calls_of(context.trajectory)
        problems: list[str] = []
        missing = [m for m in cfg.required if not any(_matches(m, c) for c in calls)]
        if missing:
            problems.append(
                "required tools were not called: " + "; ".join(m.describe() for m in missing)
            )
        elif cfg.ordered and cfg.required:
            ok, met = _ordered_match(cfg.required, calls)
            if not ok:
                problems.append(
                    "required tools were not called in order: "
                    + " -> ".join(m.describe() for m in cfg.required)
                    + f" (only the first {met} matched in order)"
                )
        called_bad: list[str] = []
        for matcher in cfg.disallowed:
            names = sorted({c.name for c in calls if _matches(matcher, c)})
            if names:
                called_bad.append(f"{', '.join(names)} (matched {matcher.describe()})")
        if called_bad:
            problems.append("disallowed tools were called: " + "; ".join(called_bad))
        seen = [c.name for c in calls]
        meta = {"toolCalls": seen}
        if problems:
            return self.result(context, passed=False, evidence="; ".join(problems), metadata=meta)
        parts = []
        if cfg.required:
            parts.append(
                f"required tools called{' in order' if cfg.ordered else ''}: "
                + ", ".join(m.describe() for m in cfg.required)
            )
        if cfg.disallowed:
            parts.append("no disallowed tools called")
        return self.result(context, passed=True, evidence="; ".join(parts), metadata=meta)


# --------------------------------------------------------------------------- skills


def skills_activated(trajectory: Trajectory) -> list[str]:
    """Names of activated skills, from events and the metrics breakdown, in order."""
    names: list[str] = []
    for event in trajectory.events:
        if event.type == "skill_activation" and event.data.skill_name not in names:
            names.append(event.data.skill_name)
    for name in trajectory.metrics.skill_activation_breakdown:
        if name not in names:
            names.append(name)
    return names


class SkillInvocationConfig(StrictConfig):
    """Config of ``skill-invocation``.

    Attributes:
        required: Skill-name regexes that must each match an activated skill.
        disallowed: Skill-name regexes no activated skill may match.
    """

    required: list[str] = Field(default_factory=list)
    disallowed: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self) -> SkillInvocationConfig:
        if not self.required and not self.disallowed:
            raise ValueError("skill-invocation needs 'required' or 'disallowed' skill names")
        for value in (*self.required, *self.disallowed):
            compile_pattern(value)
        return self


class SkillInvocationGrader(BaseGrader[SkillInvocationConfig]):
    """Required skills were activated; disallowed skills were not."""

    metadata: ClassVar[GraderMetadata] = _metadata(
        "skill-invocation",
        "Required skills were activated and disallowed ones were not.",
        nonblocking=False,
    )

    async def grade(self, context: GradeContext) -> GraderResult:
        """Match activated skills against the lists."""
        active = skills_activated(context.trajectory)
        missing = [
            r for r in self.config.required if not any(compile_pattern(r).search(s) for s in active)
        ]
        bad = [
            s for s in active if any(compile_pattern(r).search(s) for r in self.config.disallowed)
        ]
        problems = []
        if missing:
            problems.append("required skills were not activated: " + ", ".join(missing))
        if bad:
            problems.append("disallowed skills were activated: " + ", ".join(bad))
        shown = describe_list(active) if active else "none"
        meta = {"skills": active}
        if problems:
            return self.result(
                context,
                passed=False,
                evidence="; ".join(problems) + f" (activated: {shown})",
                metadata=meta,
            )
        return self.result(
            context, passed=True, evidence=f"skills as expected (activated: {shown})", metadata=meta
        )


# --------------------------------------------------------------------------- budgets


class MaxConfig(StrictConfig):
    """Config of the count budgets: ``max`` (an integer >= 0).

    Attributes:
        max: The largest count that still passes (inclusive).
    """

    max: int = Field(ge=0)


class MaxDurationConfig(StrictConfig):
    """Config of ``wall-time``: ``max`` (a duration such as ``5m``).

    Attributes:
        max: The longest wall-clock time that still passes, with a unit (``90s``, ``5m``).
    """

    max: Duration

    @model_validator(mode="after")
    def _check(self) -> MaxDurationConfig:
        if self.max < 0:
            raise ValueError("max must not be negative")
        return self


class _BudgetGrader(BaseGrader[MaxConfig]):
    label: ClassVar[str]

    def measure(self, trajectory: Trajectory) -> int:
        raise NotImplementedError

    async def grade(self, context: GradeContext) -> GraderResult:
        """Compare the measured value with ``max``."""
        value = self.measure(context.trajectory)
        limit = self.config.max
        passed = value <= limit
        relation = "<=" if passed else ">"
        return self.result(
            context,
            passed=passed,
            evidence=f"{self.label}: {value} {relation} max {limit}",
            metadata={"value": value, "max": limit},
        )


class ToolCallCountGrader(_BudgetGrader):
    """Number of tool calls <= ``max``."""

    metadata: ClassVar[GraderMetadata] = _metadata(
        "tool-call-count", "The number of tool calls stays within a maximum."
    )
    label = "Tool calls"

    def measure(self, trajectory: Trajectory) -> int:
        """Tool calls of the (scoped) trajectory."""
        return max(trajectory.metrics.tool_call_count, len(tool_calls_of(trajectory)))


class TurnCountGrader(_BudgetGrader):
    """Number of agent turns <= ``max``."""

    metadata: ClassVar[GraderMetadata] = _metadata(
        "turn-count", "The number of agent turns stays within a maximum."
    )
    label = "Turns"

    def measure(self, trajectory: Trajectory) -> int:
        """Turns of the (scoped) trajectory."""
        return trajectory.metrics.turn_count


class TokenBudgetGrader(_BudgetGrader):
    """Total tokens (input + output) <= ``max``."""

    metadata: ClassVar[GraderMetadata] = _metadata(
        "token-budget", "Total tokens (input + output) stay within a budget."
    )
    label = "Tokens"

    def measure(self, trajectory: Trajectory) -> int:
        """Input plus output tokens of the (scoped) trajectory."""
        usage = trajectory.metrics.token_usage
        return max(usage.total_tokens, usage.input_tokens + usage.output_tokens)


class ErrorCountGrader(_BudgetGrader):
    """Number of ``error`` events <= ``max``."""

    metadata: ClassVar[GraderMetadata] = _metadata(
        "error-count", "The number of error events stays within a maximum."
    )
    label = "Errors"

    def measure(self, trajectory: Trajectory) -> int:
        """Error events of the (scoped) trajectory."""
        events = sum(1 for e in trajectory.events if e.type == "error")
        return max(trajectory.metrics.error_count, events)


class WallTimeGrader(BaseGrader[MaxDurationConfig]):
    """Wall-clock time <= ``max``."""

    metadata: ClassVar[GraderMetadata] = _metadata(
        "wall-time", "The run's wall-clock time stays within a maximum."
    )

    async def grade(self, context: GradeContext) -> GraderResult:
        """Compare ``wallTimeMs`` with ``max``."""
        value_ms = context.trajectory.metrics.wall_time_ms
        limit_ms = round(self.config.max * 1000)
        passed = value_ms <= limit_ms
        relation = "<=" if passed else ">"
        return self.result(
            context,
            passed=passed,
            evidence=f"Wall time: {format_duration(value_ms / 1000)} {relation} max "
            f"{format_duration(self.config.max)}",
            metadata={"valueMs": value_ms, "maxMs": limit_ms},
        )


# --------------------------------------------------------------------------- liveness


class CompletedGrader(BaseGrader[EmptyConfig]):
    """Session health: non-empty output, no fatal error, and the run ended normally."""

    metadata: ClassVar[GraderMetadata] = _metadata(
        "completed", "The session completed: non-empty output, no fatal error, normal end."
    )

    async def grade(self, context: GradeContext) -> GraderResult:
        """Check output, fatal errors and the end reason."""
        trajectory = context.trajectory
        problems = []
        if not trajectory.output.strip():
            problems.append("the agent produced no output")
        fatal = [e for e in trajectory.events if e.type == "error" and e.data.fatal]
        if fatal:
            problems.append(f"fatal error: {fatal[0].data.message}")
        if trajectory.end_reason != "completed":
            detail = f" ({trajectory.end_detail})" if trajectory.end_detail else ""
            problems.append(f"the run ended with '{trajectory.end_reason}'{detail}")
        if problems:
            return self.result(context, passed=False, evidence="; ".join(problems))
        return self.result(context, passed=True, evidence="the session completed with output")


class ExitSuccessGrader(BaseGrader[EmptyConfig]):
    """The agent produced non-empty output (legacy liveness check)."""

    metadata: ClassVar[GraderMetadata] = _metadata(
        "exit-success", "The agent produced non-empty output."
    )

    async def grade(self, context: GradeContext) -> GraderResult:
        """Check the output is non-empty."""
        if context.trajectory.output.strip():
            return self.result(context, passed=True, evidence="the agent produced output")
        return self.result(context, passed=False, evidence="the agent produced no output")


__all__ = [
    "CompletedGrader",
    "ErrorCountGrader",
    "ExitSuccessGrader",
    "SkillInvocationGrader",
    "TokenBudgetGrader",
    "ToolCallCountGrader",
    "ToolCallsGrader",
    "TurnCountGrader",
    "WallTimeGrader",
]
