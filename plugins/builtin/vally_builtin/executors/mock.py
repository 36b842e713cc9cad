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
from typing import Any, ClassVar

from pydantic import Field

from vally import (
    BaseExecutor,
    Duration,
    ExecutionError,
    ExecutorMetadata,
    ExecutorOptions,
    Sandbox,
    Stimulus,
    StrictConfig,
    Trajectory,
    TrajectoryMetadata,
    TrajectoryRecorder,
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
    """Returns a scripted trajectory quickly; optionally writes files into the sandbox (an
    instance configured without ``files`` declares ``needs_workspace=False``)."""

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

    def __init__(self, config: MockExecutor.Config | None = None) -> None:
        super().__init__(config)
        if not self.config.files:
            # Writing no files, it needs no workspace: its trials skip the backend when
            # nothing else needs one.
            self.metadata = self.metadata.model_copy(update={"needs_workspace": False})  # type: ignore[misc]

    async def execute(
        self, stimulus: Stimulus, sandbox: Sandbox, options: ExecutorOptions
    ) -> Trajectory:
        """Produce the scripted trajectory.

        Raises:
            ExecutionError: ``config.error`` is set.
        """
        cfg = self.config
        recorder = TrajectoryRecorder()
        if cfg.delay:
            await asyncio.sleep(cfg.delay)
        if cfg.error is not None:
            raise ExecutionError(f"mock executor error: {cfg.error}")
        for path, content in cfg.files.items():
            await sandbox.write_file(path, content.encode("utf-8"))
        answer = ""
        for turn, prompt in enumerate(stimulus.prompts):
            recorder.turn = turn
            turn_id = f"turn-{turn + 1}"
            recorder.user_message(prompt)
            recorder.turn_start(turn_id)
            if turn == 0:
                for index, call in enumerate(cfg.tool_calls):
                    call_id = f"mock-call-{index + 1}"
                    recorder.tool_call(call.name, call_id, call.arguments)
                    recorder.tool_result(call.name, call_id, "ok")
            if cfg.tokens is not None:
                recorder.token_usage(cfg.tokens.input, cfg.tokens.output, model=options.model)
            template = cfg.responses[turn] if turn < len(cfg.responses) else cfg.output
            answer = template.replace("{prompt}", prompt)
            if answer:
                recorder.assistant_message(answer)
            recorder.turn_end(turn_id)
        return recorder.trajectory(
            stimulus,
            output=answer,
            work_dir=sandbox.workdir,
            metadata=TrajectoryMetadata(model=options.model, executor="mock"),
        )
