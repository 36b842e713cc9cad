"""The ``mock`` executor: a scripted agent for testing graders and pipelines without a model.

Example::

    defaults:
      executor:
        name: mock
        config:
          output: "Done: {prompt}"
          tool_calls: [{name: write_file, arguments: {path: hello.txt}}]
          files: {hello.txt: "hello\\n"}
          tokens: {input: 120, output: 30}

It loads no skills and calls no model. Tool calls and files happen in the first turn; each
turn answers with ``responses[turn]`` when given, else ``output`` (``{prompt}`` is replaced).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, ClassVar

from pydantic import Field

from vally import (
    AssistantMessageEvent,
    BaseExecutor,
    Duration,
    ExecutionError,
    ExecutorMetadata,
    ExecutorOptions,
    MessageData,
    Sandbox,
    Stimulus,
    StrictConfig,
    TokenUsageData,
    TokenUsageEvent,
    ToolCallData,
    ToolCallEvent,
    ToolResultData,
    ToolResultEvent,
    Trajectory,
    TrajectoryMetadata,
    TurnData,
    TurnEndEvent,
    TurnStartEvent,
    UserMessageEvent,
    compute_metrics,
    utc_now,
)


class MockToolCall(StrictConfig):
    """A tool call the mock agent pretends to make (its result is ``"ok"``).

    Attributes:
        name: The tool name recorded in the ``tool_call`` event.
        arguments: The call's arguments (an object, or a raw string).
    """

    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)


class MockTokens(StrictConfig):
    """Token usage reported once per turn.

    Attributes:
        input: Input tokens of the turn's ``token_usage`` event.
        output: Output tokens of the turn's ``token_usage`` event.
    """

    input: int = Field(default=0, ge=0)
    output: int = Field(default=0, ge=0)


class MockExecutor(BaseExecutor["MockExecutor.Config"]):
    """Returns a scripted trajectory quickly; optionally writes files into the sandbox."""

    metadata: ClassVar[ExecutorMetadata] = ExecutorMetadata(
        name="mock",
        description="A scripted agent: fixed answers, tool calls, files and token counts.",
        multi_turn=True,
        needs_workspace=True,
    )

    class Config(StrictConfig):
        """Options of the ``mock`` executor.

        Attributes:
            output: The answer of every turn without a ``responses`` entry; ``{prompt}`` is
                replaced by the turn's prompt.
            responses: Answers per turn (turn 1 first).
            tool_calls: Tool calls recorded in the first turn, each with a successful result.
            files: Workspace files (path to text) written in the first turn.
            tokens: Token usage recorded once per turn.
            error: When set, the executor raises :class:`ExecutionError` with this message.
            delay: How long the mock agent "thinks" before answering (e.g. ``50ms``).
        """

        output: str = ""
        responses: list[str] = Field(default_factory=list)
        tool_calls: list[MockToolCall] = Field(default_factory=list)
        files: dict[str, str] = Field(default_factory=dict)
        tokens: MockTokens | None = None
        error: str | None = None
        delay: Duration | None = None

    async def execute(
        self, stimulus: Stimulus, sandbox: Sandbox, options: ExecutorOptions
    ) -> Trajectory:
        """Produce the scripted trajectory.

        Raises:
            ExecutionError: ``config.error`` is set.
        """
        cfg = self.config
        started_at = utc_now()
        t0 = time.monotonic()
        if cfg.delay:
            await asyncio.sleep(cfg.delay)
        if cfg.error is not None:
            raise ExecutionError(f"mock executor error: {cfg.error}")
        for path, content in cfg.files.items():
            await sandbox.write_file(path, content.encode("utf-8"))
        events: list[Any] = []
        answer = ""
        for turn, prompt in enumerate(stimulus.prompts):
            turn_id = f"turn-{turn + 1}"
            events.append(UserMessageEvent(turn=turn, data=MessageData(content=prompt)))
            events.append(TurnStartEvent(turn=turn, data=TurnData(turn_id=turn_id)))
            if turn == 0:
                for index, call in enumerate(cfg.tool_calls):
                    call_id = f"mock-call-{index + 1}"
                    events.append(
                        ToolCallEvent(
                            turn=0,
                            data=ToolCallData(
                                tool_name=call.name, tool_call_id=call_id, arguments=call.arguments
                            ),
                        )
                    )
                    events.append(
                        ToolResultEvent(
                            turn=0,
                            data=ToolResultData(
                                tool_name=call.name, tool_call_id=call_id, result="ok"
                            ),
                        )
                    )
            if cfg.tokens is not None:
                events.append(
                    TokenUsageEvent(
                        turn=turn,
                        data=TokenUsageData(
                            input_tokens=cfg.tokens.input,
                            output_tokens=cfg.tokens.output,
                            model=options.model,
                        ),
                    )
                )
            template = cfg.responses[turn] if turn < len(cfg.responses) else cfg.output
            answer = template.replace("{prompt}", prompt)
            if answer:
                events.append(
                    AssistantMessageEvent(turn=turn, data=MessageData(content=answer))
                )
            events.append(TurnEndEvent(turn=turn, data=TurnData(turn_id=turn_id)))
        return Trajectory(
            stimulus=stimulus,
            events=events,
            metrics=compute_metrics(events, wall_time_ms=int((time.monotonic() - t0) * 1000)),
            output=answer,
            work_dir=sandbox.workdir,
            metadata=TrajectoryMetadata(
                model=options.model,
                executor="mock",
                skills_loaded=[],
                started_at=started_at,
                completed_at=utc_now(),
            ),
        )
