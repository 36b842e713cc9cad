"""Graders over the agent's final output text: ``output-contains``, ``output-not-contains``,
``output-matches`` and ``output-not-matches``."""

from __future__ import annotations

from typing import ClassVar

from pydantic import AliasChoices, ConfigDict, Field, model_validator

from vally import BaseGrader, GradeContext, GraderMetadata, GraderResult, StrictConfig
from vally_builtin.graders import compile_pattern, shorten


class SubstringConfig(StrictConfig):
    """Config of ``output-contains`` / ``output-not-contains``.

    Attributes:
        substring: The text to look for (``value`` is accepted as another spelling).
        case_sensitive: Compare case-sensitively (default true).
    """

    model_config = ConfigDict(populate_by_name=True)

    substring: str = Field(min_length=1, validation_alias=AliasChoices("substring", "value"))
    case_sensitive: bool = True


class PatternConfig(StrictConfig):
    """Config of ``output-matches`` / ``output-not-matches``.

    Attributes:
        pattern: A regular expression, searched anywhere in the output. Inline flags like
            ``(?i)`` work anywhere in the pattern.
        flags: Optional flag letters: ``i`` (ignore case), ``m`` (multi-line), ``s`` (dot
            matches newline), ``x`` (verbose).
    """

    pattern: str = Field(min_length=1)
    flags: str | None = None

    @model_validator(mode="after")
    def _compiles(self) -> PatternConfig:
        compile_pattern(self.pattern, self.flags)
        return self


def _contains(haystack: str, needle: str, case_sensitive: bool) -> bool:
    if case_sensitive:
        return needle in haystack
    return needle.casefold() in haystack.casefold()


class OutputContainsGrader(BaseGrader[SubstringConfig]):
    """Passes when the final output contains ``substring``."""

    metadata: ClassVar[GraderMetadata] = GraderMetadata(
        name="output-contains",
        description="The agent's final output contains a substring.",
        determinism="static",
        cost_profile="low",
        portability="t1-universal",
    )
    Config = SubstringConfig

    async def grade(self, context: GradeContext) -> GraderResult:
        """Search the output for the substring."""
        text = self.config.substring
        if _contains(context.trajectory.output, text, self.config.case_sensitive):
            return self.result(context, passed=True, evidence=f"'{text}' found in output")
        return self.result(
            context,
            passed=False,
            evidence=f"'{text}' not found in output: "
            f"{shorten(context.trajectory.output) or '(empty)'}",
        )


class OutputNotContainsGrader(BaseGrader[SubstringConfig]):
    """Passes when the final output does not contain ``substring``."""

    metadata: ClassVar[GraderMetadata] = GraderMetadata(
        name="output-not-contains",
        description="The agent's final output does not contain a substring.",
        determinism="static",
        cost_profile="low",
        portability="t1-universal",
    )
    Config = SubstringConfig

    async def grade(self, context: GradeContext) -> GraderResult:
        """Search the output for the substring; finding it fails."""
        text = self.config.substring
        if _contains(context.trajectory.output, text, self.config.case_sensitive):
            return self.result(
                context, passed=False, evidence=f"'{text}' found in output (it must be absent)"
            )
        return self.result(context, passed=True, evidence=f"'{text}' not found in output")


class OutputMatchesGrader(BaseGrader[PatternConfig]):
    """Passes when ``pattern`` matches somewhere in the final output."""

    metadata: ClassVar[GraderMetadata] = GraderMetadata(
        name="output-matches",
        description="The agent's final output matches a regular expression.",
        determinism="static",
        cost_profile="free",
        portability="t1-universal",
    )
    Config = PatternConfig

    async def grade(self, context: GradeContext) -> GraderResult:
        """Search the output for the pattern."""
        regex = compile_pattern(self.config.pattern, self.config.flags)
        match = regex.search(context.trajectory.output)
        if match:
            return self.result(
                context,
                passed=True,
                evidence=f"/{self.config.pattern}/ matched output: "
                f"'{shorten(match.group(0), 120)}'",
            )
        return self.result(
            context,
            passed=False,
            evidence=f"/{self.config.pattern}/ did not match output: "
            f"{shorten(context.trajectory.output) or '(empty)'}",
        )


class OutputNotMatchesGrader(BaseGrader[PatternConfig]):
    """Passes when ``pattern`` matches nowhere in the final output."""

    metadata: ClassVar[GraderMetadata] = GraderMetadata(
        name="output-not-matches",
        description="The agent's final output does not match a regular expression.",
        determinism="static",
        cost_profile="free",
        portability="t1-universal",
    )
    Config = PatternConfig

    async def grade(self, context: GradeContext) -> GraderResult:
        """Search the output for the pattern; a match fails."""
        regex = compile_pattern(self.config.pattern, self.config.flags)
        match = regex.search(context.trajectory.output)
        if match:
            return self.result(
                context,
                passed=False,
                evidence=f"/{self.config.pattern}/ matched output (it must not): "
                f"'{shorten(match.group(0), 120)}'",
            )
        return self.result(
            context, passed=True, evidence=f"/{self.config.pattern}/ did not match output"
        )
