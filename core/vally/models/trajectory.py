"""The trajectory: the full record of one trial, as executors return it.

Events are a flat, time-ordered list tagged by ``type``. Each event carries ``timestamp``
(ISO 8601, UTC), a 0-based ``turn`` (the index of the authored prompt it belongs to) and a
typed ``data`` object. Metrics are computed from events by :func:`compute_metrics`, so an
executor only has to record what happened.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, TypeVar

from pydantic import Field, NonNegativeInt

from vally.models.base import RecordModel
from vally.models.spec import Stimulus


def utc_now() -> str:
    """Current time as an ISO 8601 UTC string with milliseconds (``...Z``)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class _EventBase(RecordModel):
    timestamp: str = Field(default_factory=utc_now)
    turn: int = 0


class ToolCallData(RecordModel):
    """A tool the agent called. ``server`` names the MCP server for MCP tools.

    ``batch_id`` groups calls issued in one model response (parallel calls), so ordered
    matching can treat them as unordered among themselves.
    """

    tool_name: str
    tool_call_id: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    server: str | None = None
    batch_id: str | None = None


class ToolCallEvent(_EventBase):
    """The agent called a tool."""

    type: Literal["tool_call"] = "tool_call"
    data: ToolCallData


class ToolResultData(RecordModel):
    """The result of a tool call, matched to it by ``tool_call_id``."""

    tool_name: str
    tool_call_id: str
    success: bool = True
    result: Any = None
    server: str | None = None


class ToolResultEvent(_EventBase):
    """A tool call's result."""

    type: Literal["tool_result"] = "tool_result"
    data: ToolResultData


class TokenUsageData(RecordModel):
    """Usage of one model call. ``cache_read_tokens`` is a subset of ``input_tokens``.
    Every count is a whole number >= 0: an event stream's ``token_usage`` line with another
    count is an invalid event (recorded as an error, never counted)."""

    input_tokens: NonNegativeInt = 0
    output_tokens: NonNegativeInt = 0
    model: str | None = None
    cache_read_tokens: NonNegativeInt = 0
    cache_write_tokens: NonNegativeInt = 0


def token_count(value: Any) -> int | None:
    """A token count as an agent reported it: 0 when missing, the count when it is a whole
    number >= 0 (``12`` or ``12.0``), None when it is anything else (negative, NaN,
    infinite, fractional, a boolean, text): a count that must be reported, never counted."""
    if value is None:
        return 0
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer() and value >= 0:
        return int(value)
    return None


class TokenUsageEvent(_EventBase):
    """Token usage of one model call."""

    type: Literal["token_usage"] = "token_usage"
    data: TokenUsageData


class TurnData(RecordModel):
    """Marks the start or end of an agent turn."""

    turn_id: str


class TurnStartEvent(_EventBase):
    """An agent turn started."""

    type: Literal["turn_start"] = "turn_start"
    data: TurnData


class TurnEndEvent(_EventBase):
    """An agent turn ended."""

    type: Literal["turn_end"] = "turn_end"
    data: TurnData


class MessageData(RecordModel):
    """Text of a message."""

    content: str


class AssistantMessageEvent(_EventBase):
    """Text the agent said."""

    type: Literal["assistant_message"] = "assistant_message"
    data: MessageData


class UserMessageEvent(_EventBase):
    """A prompt sent to the agent."""

    type: Literal["user_message"] = "user_message"
    data: MessageData


class ReasoningEvent(_EventBase):
    """Reasoning text the agent exposed."""

    type: Literal["reasoning"] = "reasoning"
    data: MessageData


class ErrorData(RecordModel):
    """Something went wrong during the run (a failed tool, a model error, a violation)."""

    message: str
    code: str | None = None
    fatal: bool = False


class ErrorEvent(_EventBase):
    """An error during the run."""

    type: Literal["error"] = "error"
    data: ErrorData


class SkillActivationData(RecordModel):
    """The agent activated (loaded) a skill."""

    skill_name: str


class SkillActivationEvent(_EventBase):
    """The agent activated a skill."""

    type: Literal["skill_activation"] = "skill_activation"
    data: SkillActivationData


TrajectoryEvent = Annotated[
    ToolCallEvent
    | ToolResultEvent
    | TokenUsageEvent
    | TurnStartEvent
    | TurnEndEvent
    | AssistantMessageEvent
    | UserMessageEvent
    | ReasoningEvent
    | ErrorEvent
    | SkillActivationEvent,
    Field(discriminator="type"),
]
"""One trajectory event, tagged by ``type``."""


class TokenUsage(RecordModel):
    """Token totals over all model calls."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    call_count: int = 0
    by_model: dict[str, dict[str, int]] = Field(default_factory=dict)


class TrajectoryMetrics(RecordModel):
    """Aggregates computed from events (:func:`compute_metrics`)."""

    token_usage: TokenUsage = Field(default_factory=TokenUsage)
    wall_time_ms: int = 0
    tool_call_count: int = 0
    tool_call_breakdown: dict[str, int] = Field(default_factory=dict)
    skill_activation_count: int = 0
    skill_activation_breakdown: dict[str, int] = Field(default_factory=dict)
    turn_count: int = 0
    error_count: int = 0


EndReason = Literal[
    "completed",
    "timeout",
    "error",
    "max_turns",
    "max_tokens",
    "max_duration",
    "max_tool_calls",
    "cancelled",
]


class TrajectoryMetadata(RecordModel):
    """Execution context. ``extra`` holds executor-specific facts (e.g. a harness hash)."""

    model: str | None = None
    executor: str | None = None
    skills_loaded: list[str] = Field(default_factory=list)
    started_at: str | None = None
    completed_at: str | None = None
    session_id: str | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


class Trajectory(RecordModel):
    """Everything one trial produced.

    ``truncated`` is true when the executor's capture limit cut the agent's output (its
    ``output_limit``): what was captured is kept, the rest was dropped, and an ``error``
    event with code ``output_truncated`` says where.
    """

    id: str = Field(default_factory=lambda: str(uuid.uuid4()))
    stimulus: Stimulus
    events: list[TrajectoryEvent] = Field(default_factory=list)
    metrics: TrajectoryMetrics = Field(default_factory=TrajectoryMetrics)
    output: str = ""
    work_dir: str = ""
    metadata: TrajectoryMetadata = Field(default_factory=TrajectoryMetadata)
    workspace_status: Literal["local", "materialized", "remote"] = "local"
    end_reason: EndReason = "completed"
    end_detail: str | None = None
    diff: str | None = None
    truncated: bool = False

    def for_turn(self, turn: int) -> Trajectory:
        """A copy holding only the events of one 0-based turn, with metrics and output
        recomputed for that turn (used for grader ``turn:`` scoping)."""
        events = [e for e in self.events if e.turn == turn]
        output = last_assistant_text(events)
        metrics = compute_metrics(events, wall_time_ms=_span_ms(events))
        return self.model_copy(update={"events": events, "output": output, "metrics": metrics})


def last_assistant_text(events: list[Any]) -> str:
    """The content of the last ``assistant_message`` event, or ``""``."""
    for event in reversed(events):
        if event.type == "assistant_message":
            return str(event.data.content)
    return ""


def _parse_ts(value: str) -> datetime | None:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _span_ms(events: list[Any]) -> int:
    stamps = [t for t in (_parse_ts(e.timestamp) for e in events) if t is not None]
    if len(stamps) < 2:
        return 0
    return int((max(stamps) - min(stamps)).total_seconds() * 1000)


def compute_metrics(events: list[Any], *, wall_time_ms: int = 0) -> TrajectoryMetrics:
    """Aggregate events into metrics.

    Turns are counted from ``turn_start`` events when there are any, otherwise from the
    number of distinct ``turn`` indices that hold an assistant message.
    """
    usage = TokenUsage()
    tools: dict[str, int] = {}
    skills: dict[str, int] = {}
    turn_starts = 0
    assistant_turns: set[int] = set()
    errors = 0
    for event in events:
        if event.type == "token_usage":
            d = event.data
            usage.input_tokens += d.input_tokens
            usage.output_tokens += d.output_tokens
            usage.cache_read_tokens += d.cache_read_tokens
            usage.cache_write_tokens += d.cache_write_tokens
            usage.call_count += 1
            per = usage.by_model.setdefault(
                d.model or "unknown", {"inputTokens": 0, "outputTokens": 0, "callCount": 0}
            )
            per["inputTokens"] += d.input_tokens
            per["outputTokens"] += d.output_tokens
            per["callCount"] += 1
        elif event.type == "tool_call":
            tools[event.data.tool_name] = tools.get(event.data.tool_name, 0) + 1
        elif event.type == "skill_activation":
            skills[event.data.skill_name] = skills.get(event.data.skill_name, 0) + 1
        elif event.type == "turn_start":
            turn_starts += 1
        elif event.type == "assistant_message":
            assistant_turns.add(event.turn)
        elif event.type == "error":
            errors += 1
    usage.total_tokens = usage.input_tokens + usage.output_tokens
    return TrajectoryMetrics(
        token_usage=usage,
        wall_time_ms=wall_time_ms,
        tool_call_count=sum(tools.values()),
        tool_call_breakdown=tools,
        skill_activation_count=sum(skills.values()),
        skill_activation_breakdown=skills,
        turn_count=turn_starts or len(assistant_turns),
        error_count=errors,
    )


EventT = TypeVar("EventT", bound=_EventBase)


class TrajectoryRecorder:
    """Collects a trial's events in order, each tagged with the current :attr:`turn`, and
    builds the trajectory from them. One method per thing that happened::

        recorder = TrajectoryRecorder()
        recorder.user_message(prompt)
        recorder.tool_call("write_file", "call-1", {"path": "hello.txt"})
        recorder.tool_result("write_file", "call-1", "ok")
        recorder.assistant_message("Done.")
        return recorder.trajectory(stimulus, work_dir=sandbox.workdir)

    Args:
        turn: The turn the first events belong to.
        on_event: Called with each event as it is recorded (e.g. to mirror it to a log).

    Attributes:
        events: The events recorded so far, in order.
        turn: The 0-based turn (authored prompt) new events belong to.
        started_at: When the recorder was created (ISO 8601 UTC).
    """

    def __init__(
        self, *, turn: int = 0, on_event: Callable[[RecordModel], None] | None = None
    ) -> None:
        self.events: list[Any] = []
        self.turn = turn
        self.started_at = utc_now()
        self._started = time.monotonic()
        self._on_event = on_event

    def add(self, event: EventT) -> EventT:
        """Tag ``event`` with the current turn, append it and return it."""
        event.turn = self.turn
        self.events.append(event)
        if self._on_event is not None:
            self._on_event(event)
        return event

    def user_message(self, content: str) -> UserMessageEvent:
        """Record a prompt sent to the agent."""
        return self.add(UserMessageEvent(data=MessageData(content=content)))

    def assistant_message(self, content: str) -> AssistantMessageEvent:
        """Record text the agent said."""
        return self.add(AssistantMessageEvent(data=MessageData(content=content)))

    def reasoning(self, content: str) -> ReasoningEvent:
        """Record reasoning text the agent exposed."""
        return self.add(ReasoningEvent(data=MessageData(content=content)))

    def turn_start(self, turn_id: str) -> TurnStartEvent:
        """Record that an agent turn started."""
        return self.add(TurnStartEvent(data=TurnData(turn_id=turn_id)))

    def turn_end(self, turn_id: str) -> TurnEndEvent:
        """Record that an agent turn ended."""
        return self.add(TurnEndEvent(data=TurnData(turn_id=turn_id)))

    def tool_call(
        self,
        tool_name: str,
        tool_call_id: str,
        arguments: dict[str, Any] | str | None = None,
        *,
        server: str | None = None,
        batch_id: str | None = None,
    ) -> ToolCallEvent:
        """Record a tool call (``arguments`` default to an empty object)."""
        data = ToolCallData(
            tool_name=tool_name,
            tool_call_id=tool_call_id,
            arguments={} if arguments is None else arguments,
            server=server,
            batch_id=batch_id,
        )
        return self.add(ToolCallEvent(data=data))

    def tool_result(
        self,
        tool_name: str,
        tool_call_id: str,
        result: Any = None,
        *,
        success: bool = True,
        server: str | None = None,
    ) -> ToolResultEvent:
        """Record the result of the tool call ``tool_call_id``."""
        data = ToolResultData(
            tool_name=tool_name,
            tool_call_id=tool_call_id,
            success=success,
            result=result,
            server=server,
        )
        return self.add(ToolResultEvent(data=data))

    def token_usage(
        self,
        input_tokens: Any = 0,
        output_tokens: Any = 0,
        *,
        model: str | None = None,
        cache_read_tokens: Any = 0,
        cache_write_tokens: Any = 0,
    ) -> TokenUsageEvent:
        """Record the token usage of one model call (cached tokens are part of
        ``input_tokens``), with the counts as the agent reported them: see
        :meth:`checked_token_counts`."""
        counts = self.checked_token_counts(
            {
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "cache_read_tokens": cache_read_tokens,
                "cache_write_tokens": cache_write_tokens,
            },
            source=f"the usage of model {model}" if model else "a model call's usage",
        )
        data = TokenUsageData(model=model, **counts)
        return self.add(TokenUsageEvent(data=data))

    def checked_token_counts(self, counts: Mapping[str, Any], *, source: str) -> dict[str, int]:
        """``counts`` as whole numbers >= 0: a missing one is 0, and one that is not a whole
        number >= 0 (negative, NaN, infinite, fractional) is counted as 0 and recorded as an
        ``invalid_token_count`` error naming it, so a lying agent can neither lower what a
        trial spent nor hide that it reported nonsense."""
        checked: dict[str, int] = {}
        bad: list[str] = []
        for name, value in counts.items():
            count = token_count(value)
            if count is None:
                bad.append(f"{name}={value!r}")
            checked[name] = count or 0
        if bad:
            self.error(
                f"{source} has token counts that are not whole numbers >= 0, counted as 0: "
                + ", ".join(bad),
                code="invalid_token_count",
            )
        return checked

    def error(self, message: str, *, code: str | None = None, fatal: bool = False) -> ErrorEvent:
        """Record an error during the run (``fatal`` when it ended the run)."""
        return self.add(ErrorEvent(data=ErrorData(message=message, code=code, fatal=fatal)))

    def skill_activation(self, skill_name: str) -> SkillActivationEvent:
        """Record that the agent activated a skill."""
        return self.add(SkillActivationEvent(data=SkillActivationData(skill_name=skill_name)))

    def elapsed_ms(self) -> int:
        """Milliseconds since the recorder was created."""
        return int((time.monotonic() - self._started) * 1000)

    def trajectory(
        self,
        stimulus: Stimulus,
        *,
        output: str | None = None,
        work_dir: str = "",
        metadata: TrajectoryMetadata | None = None,
        wall_time_ms: int | None = None,
        end_reason: EndReason = "completed",
        end_detail: str | None = None,
        truncated: bool = False,
    ) -> Trajectory:
        """The trajectory of the recorded events, with metrics computed from them.

        Args:
            stimulus: The stimulus the agent ran.
            output: The final answer (default: the last assistant message).
            work_dir: The workspace path.
            metadata: Execution context; ``started_at`` and ``completed_at`` default to the
                recorder's creation and now.
            wall_time_ms: The wall time (default: :meth:`elapsed_ms`).
            end_reason: Why the run ended.
            end_detail: More about why, for a run that did not complete.
            truncated: The agent's output was cut at the executor's capture limit.
        """
        meta = metadata or TrajectoryMetadata()
        meta = meta.model_copy(
            update={
                "started_at": meta.started_at or self.started_at,
                "completed_at": meta.completed_at or utc_now(),
            }
        )
        wall = self.elapsed_ms() if wall_time_ms is None else wall_time_ms
        return Trajectory(
            stimulus=stimulus,
            events=self.events,
            metrics=compute_metrics(self.events, wall_time_ms=wall),
            output=last_assistant_text(self.events) if output is None else output,
            work_dir=work_dir,
            metadata=meta,
            end_reason=end_reason,
            end_detail=end_detail,
            truncated=truncated,
        )
