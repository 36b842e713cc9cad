"""A single-file vally plugin: the ``no-errors`` grader.

Use it without packaging anything::

    vally eval -e plugins/examples/single_file/eval.yaml \
      --grader-plugin ./plugins/examples/single_file/no_errors.py

vally imports the file under a private module name and calls its ``register(registrar)``.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from vally import BaseGrader, GradeContext, GraderMetadata, GraderResult, StrictConfig


class NoErrorsConfig(StrictConfig):
    """Options of ``no-errors``.

    Attributes:
        allow: How many error events are tolerated.
        failed_tools: Whether failed tool results count as errors too.
    """

    allow: int = Field(default=0, ge=0)
    failed_tools: bool = True


class NoErrorsGrader(BaseGrader[NoErrorsConfig]):
    """Passes when the trajectory has at most ``allow`` errors (error events, and failed
    tool results unless ``failed_tools`` is false)."""

    metadata = GraderMetadata(
        name="no-errors",
        description="The agent reported no errors and no tool call failed.",
        determinism="static",
        cost_profile="free",
        temporal_scope="trajectory-level",
    )
    Config = NoErrorsConfig

    async def grade(self, context: GradeContext) -> GraderResult:
        """Count error events (and failed tool results) and compare with ``allow``."""
        problems: list[str] = []
        for event in context.trajectory.events:
            if event.type == "error":
                problems.append(f"error: {event.data.message}")
            elif (
                event.type == "tool_result"
                and self.config.failed_tools
                and not event.data.success
            ):
                problems.append(f"tool {event.data.tool_name} failed")
        passed = len(problems) <= self.config.allow
        evidence = "no errors" if not problems else "; ".join(problems[:5])
        return self.result(
            context, passed=passed, evidence=evidence, metadata={"errors": len(problems)}
        )


def register(registrar: Any) -> None:
    """Called by vally when the file is loaded: register the grader."""
    registrar.grader(NoErrorsGrader)
