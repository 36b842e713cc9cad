"""An example third-party vally executor: wraps an agent CLI with its own output format.

The agent prints one line per action (see :mod:`vally_script_executor.fake_agent`)::

    STEP tool=NAME args=JSON     a tool call
    RESULT ok|fail [TEXT]        the result of the last tool call
    TOKENS in=N out=M            usage of one model call
    ERROR TEXT                   an error the agent reports
    ANSWER TEXT                  the final answer (the trajectory's output)

Any other line is ignored. :func:`parse_output` turns the lines into vally trajectory
events; :class:`ScriptExecutor` runs the command in the trial's sandbox.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, ClassVar, Literal

from pydantic import Field

from vally import (
    BaseExecutor,
    ExecutionError,
    ExecutorMetadata,
    ExecutorOptions,
    Sandbox,
    Stimulus,
    StrictConfig,
    Trajectory,
    compute_metrics,
    utc_now,
)
from vally.models.trajectory import (
    AssistantMessageEvent,
    ErrorData,
    ErrorEvent,
    MessageData,
    TokenUsageData,
    TokenUsageEvent,
    ToolCallData,
    ToolCallEvent,
    ToolResultData,
    ToolResultEvent,
    TrajectoryMetadata,
    UserMessageEvent,
)

__all__ = ["ScriptExecutor", "ScriptExecutorConfig", "parse_output"]

STEP = re.compile(r"^STEP\s+tool=(?P<tool>\S+)(?:\s+args=(?P<args>.*))?$")
RESULT = re.compile(r"^RESULT\s+(?P<status>ok|fail)\b\s*(?P<text>.*)$")
TOKENS = re.compile(r"^TOKENS\s+in=(?P<input>\d+)\s+out=(?P<output>\d+)\s*$")


class ScriptExecutorConfig(StrictConfig):
    """Options of the ``script`` executor.

    Attributes:
        command: The agent command (argv, no shell). ``{prompt}`` in an argument is replaced
            by the prompt; without it the prompt goes to standard input.
        env: Extra environment variables for the agent.
        output_limit: Bytes of output kept.
    """

    command: list[str] = Field(
        default_factory=lambda: ["python3", "-m", "vally_script_executor.fake_agent"],
        min_length=1,
    )
    env: dict[str, str] = Field(default_factory=dict)
    output_limit: int = Field(default=1_000_000, gt=0)


def _arguments(raw: str | None) -> dict[str, Any] | str:
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return raw
    return value if isinstance(value, dict) else raw


def parse_output(text: str, *, turn: int = 0, model: str | None = None) -> list[Any]:
    """Trajectory events for the agent's output lines, in order.

    Args:
        text: The agent's standard output.
        turn: The 0-based turn the events belong to.
        model: The model recorded in token-usage events.
    """
    events: list[Any] = []
    pending: tuple[str, str] | None = None  # (tool, call id) awaiting its RESULT
    calls = 0
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if match := STEP.match(line):
            calls += 1
            call_id = f"step-{calls}"
            tool = match["tool"]
            events.append(
                ToolCallEvent(
                    turn=turn,
                    data=ToolCallData(
                        tool_name=tool, tool_call_id=call_id, arguments=_arguments(match["args"])
                    ),
                )
            )
            pending = (tool, call_id)
        elif (match := RESULT.match(line)) and pending is not None:
            events.append(
                ToolResultEvent(
                    turn=turn,
                    data=ToolResultData(
                        tool_name=pending[0],
                        tool_call_id=pending[1],
                        success=match["status"] == "ok",
                        result=match["text"] or match["status"],
                    ),
                )
            )
            pending = None
        elif match := TOKENS.match(line):
            events.append(
                TokenUsageEvent(
                    turn=turn,
                    data=TokenUsageData(
                        input_tokens=int(match["input"]),
                        output_tokens=int(match["output"]),
                        model=model,
                    ),
                )
            )
        elif line.startswith("ERROR "):
            events.append(ErrorEvent(turn=turn, data=ErrorData(message=line[6:].strip())))
        elif line.startswith("ANSWER "):
            events.append(
                AssistantMessageEvent(turn=turn, data=MessageData(content=line[7:].strip()))
            )
    return events


class ScriptExecutor(BaseExecutor[ScriptExecutorConfig]):
    """Runs an agent CLI once per trial in the sandbox and parses its STEP/ANSWER lines."""

    metadata: ClassVar[ExecutorMetadata] = ExecutorMetadata(
        name="script",
        description="Runs an agent CLI that prints STEP/RESULT/TOKENS/ERROR/ANSWER lines.",
        multi_turn=False,
        needs_workspace=True,
    )
    Config = ScriptExecutorConfig

    async def execute(
        self, stimulus: Stimulus, sandbox: Sandbox, options: ExecutorOptions
    ) -> Trajectory:
        """Run the command with the prompt and build the trajectory from its output.

        Raises:
            ExecutionError: The agent exited non-zero without an ``ANSWER`` line.
        """
        prompt = stimulus.prompts[0]
        uses_arg = any("{prompt}" in part for part in self.config.command)
        argv = [part.replace("{prompt}", prompt) for part in self.config.command]
        started_at = utc_now()
        t0 = time.monotonic()
        result = await sandbox.exec(
            argv,
            env={**options.env, **self.config.env},
            timeout=options.timeout,
            stdin=None if uses_arg else prompt.encode("utf-8"),
            output_limit=self.config.output_limit,
        )
        events: list[Any] = [UserMessageEvent(turn=0, data=MessageData(content=prompt))]
        events.extend(parse_output(result.stdout, model=options.model))
        answers = [e for e in events if isinstance(e, AssistantMessageEvent)]
        end_reason: Literal["completed", "timeout", "error"] = "completed"
        if result.timed_out:
            end_reason = "timeout"
        elif result.exit_code != 0:
            if not answers:
                raise ExecutionError(
                    f"agent {argv[0]!r} exited with {result.exit_code} and gave no ANSWER: "
                    f"{(result.stderr or result.stdout).strip()[-500:]}",
                    hint="run the agent command by hand in an empty folder to see why",
                )
            end_reason = "error"
        return Trajectory(
            stimulus=stimulus,
            events=events,
            metrics=compute_metrics(events, wall_time_ms=int((time.monotonic() - t0) * 1000)),
            output=answers[-1].data.content if answers else "",
            work_dir=sandbox.workdir,
            metadata=TrajectoryMetadata(
                model=options.model,
                executor=self.metadata.name,
                started_at=started_at,
                completed_at=utc_now(),
                extra={"exit_code": result.exit_code},
            ),
            end_reason=end_reason,
        )
