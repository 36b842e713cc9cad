"""ATIF (Agent Trajectory Interchange Format) documents mapped onto vally trajectories
(:func:`atif_to_trajectory`), for ``vally grade``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from vally import (
    AssistantMessageEvent,
    MessageData,
    ReasoningEvent,
    Stimulus,
    TokenUsageData,
    TokenUsageEvent,
    ToolCallData,
    ToolCallEvent,
    ToolResultData,
    ToolResultEvent,
    Trajectory,
    TrajectoryEvent,
    TrajectoryMetadata,
    UserMessageEvent,
    compute_metrics,
    last_assistant_text,
)
from vally_regrade.formats import FORMAT_KEY

ATIF_STIMULUS_PREFIX = "atif-"
"""Stimulus names given to ATIF trajectories, which carry none (``atif-<session id>``)."""


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # content parts: [{"type": "text", "text": ...}, ...]
        return "".join(str(p.get("text", "")) if isinstance(p, Mapping) else str(p) for p in value)
    return json.dumps(value, ensure_ascii=False)


@dataclass
class _AtifReader:
    """The state of one ATIF document's conversion: events so far, the current turn, the
    first prompt, and the tool names by call id (for the results)."""

    default_model: str | None
    events: list[TrajectoryEvent] = field(default_factory=list)
    turn: int = -1
    first_prompt: str | None = None
    tool_names: dict[str, str] = field(default_factory=dict)
    saw_metrics: bool = False

    def step(self, step: Mapping[str, Any]) -> None:
        """Add the events of one step (system steps carry nothing graders use)."""
        stamp = step.get("timestamp")
        base: dict[str, Any] = {"timestamp": stamp} if isinstance(stamp, str) else {}
        source = step.get("source")
        message = _text(step.get("message"))
        if source == "user":
            self.turn += 1
            if self.first_prompt is None:
                self.first_prompt = message
            data = MessageData(content=message)
            self.events.append(UserMessageEvent(turn=self.turn, data=data, **base))
        elif source == "agent":
            self._agent_step(step, message, base)

    def _agent_step(self, step: Mapping[str, Any], message: str, base: dict[str, Any]) -> None:
        t = max(self.turn, 0)
        reasoning = step.get("reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            self.events.append(ReasoningEvent(turn=t, data=MessageData(content=reasoning), **base))
        self._tool_calls(step, t, base)
        observation = step.get("observation")
        results = observation.get("results") if isinstance(observation, Mapping) else None
        for result in results if isinstance(results, list) else []:
            if not isinstance(result, Mapping):
                continue
            call_id = str(result.get("source_call_id") or "")
            data = ToolResultData(
                tool_name=self.tool_names.get(call_id, "unknown"),
                tool_call_id=call_id,
                success=not bool(result.get("is_error", False)),
                result=result.get("content"),
            )
            self.events.append(ToolResultEvent(turn=t, data=data, **base))
        if message:
            self.events.append(
                AssistantMessageEvent(turn=t, data=MessageData(content=message), **base)
            )
        metrics = step.get("metrics")
        if isinstance(metrics, Mapping):
            self.saw_metrics = True
            model = step.get("model_name") if isinstance(step.get("model_name"), str) else None
            usage = _usage(metrics, "", model or self.default_model)
            self.events.append(TokenUsageEvent(turn=t, data=usage, **base))

    def _tool_calls(self, step: Mapping[str, Any], t: int, base: dict[str, Any]) -> None:
        calls = step.get("tool_calls")
        if not isinstance(calls, list):
            return
        batch = f"step-{step.get('step_id')}" if len(calls) > 1 else None
        for index, call in enumerate(calls):
            if not isinstance(call, Mapping):
                continue
            call_id = str(call.get("tool_call_id") or f"step-{step.get('step_id')}-{index}")
            name = str(call.get("function_name") or call.get("name") or "unknown")
            self.tool_names[call_id] = name
            arguments = call.get("arguments")
            data = ToolCallData(
                tool_name=name,
                tool_call_id=call_id,
                arguments=arguments if isinstance(arguments, dict | str) else {},
                batch_id=batch,
            )
            self.events.append(ToolCallEvent(turn=t, data=data, **base))

    def final_metrics(self, final: Any) -> None:
        """One usage event from ``final_metrics`` when no step had metrics."""
        if not self.saw_metrics and isinstance(final, Mapping):
            usage = _usage(final, "total_", self.default_model)
            self.events.append(TokenUsageEvent(turn=max(self.turn, 0), data=usage))


def _span_ms(stamps: list[str]) -> int:
    """Milliseconds from the first to the last of the events' ISO timestamps (0 with fewer
    than two that parse)."""
    parsed = []
    for stamp in stamps:
        try:
            parsed.append(datetime.fromisoformat(stamp.replace("Z", "+00:00")))
        except ValueError:
            continue
    if len(parsed) < 2:
        return 0
    return int((max(parsed) - min(parsed)).total_seconds() * 1000)


def _usage(metrics: Mapping[str, Any], prefix: str, model: str | None) -> TokenUsageData:
    """Token usage from ATIF metrics (``prompt_tokens`` ..., or ``total_prompt_tokens`` ...)."""
    return TokenUsageData(
        input_tokens=_int(metrics.get(f"{prefix}prompt_tokens")),
        output_tokens=_int(metrics.get(f"{prefix}completion_tokens")),
        cache_read_tokens=_int(metrics.get(f"{prefix}cached_tokens")),
        model=model,
    )


def atif_to_trajectory(document: Mapping[str, Any]) -> Trajectory:
    """Map an ATIF document onto a trajectory (best effort).

    User steps become ``user_message`` events and start a new turn; agent steps give a
    ``reasoning`` event (``reasoning_content``), an ``assistant_message`` (``message``),
    one ``tool_call`` per ``tool_calls`` entry, one ``tool_result`` per observation result
    and a ``token_usage`` event from ``metrics``. When no step has metrics, the document's
    ``final_metrics`` give one usage event. The stimulus is a placeholder named
    ``atif-<session_id>`` whose prompt is the first user message; ``vally grade`` matches
    it to a spec stimulus by prompt or ``--stimulus``.

    Raises:
        ValueError: ``steps`` is not a list of objects.
    """
    steps = document.get("steps")
    if not isinstance(steps, list) or not all(isinstance(s, Mapping) for s in steps):
        raise ValueError("ATIF 'steps' must be a list of objects")
    agent = document.get("agent") if isinstance(document.get("agent"), Mapping) else {}
    assert isinstance(agent, Mapping)
    default_model = agent.get("model_name") if isinstance(agent.get("model_name"), str) else None
    reader = _AtifReader(default_model)
    for step in steps:
        reader.step(step)
    reader.final_metrics(document.get("final_metrics"))
    events = reader.events
    session = str(document.get("session_id") or "session")
    stimulus = Stimulus(name=f"{ATIF_STIMULUS_PREFIX}{session}", prompt=reader.first_prompt or "")
    stamps = [e.timestamp for e in events]
    extra: dict[str, Any] = {
        FORMAT_KEY: "atif",
        "atifSchemaVersion": document.get("schema_version"),
    }
    if isinstance(agent.get("version"), str):
        extra["agentVersion"] = agent["version"]
    return Trajectory(
        stimulus=stimulus,
        events=events,
        metrics=compute_metrics(events, wall_time_ms=_span_ms(stamps)),
        output=last_assistant_text(events),
        metadata=TrajectoryMetadata(
            model=default_model,
            executor=agent.get("name") if isinstance(agent.get("name"), str) else None,
            session_id=session,
            started_at=min(stamps) if stamps else None,
            completed_at=max(stamps) if stamps else None,
            extra=extra,
        ),
    )
