"""Graders over the agent's final output text: ``output-contains``, ``output-not-contains``,
``output-matches`` and ``output-not-matches``."""

from __future__ import annotations

from typing import ClassVar

from pydantic import AliasChoices, ConfigDict, Field

from vally import GradeContext, GraderMetadata, GraderResult, StrictConfig
from vally_builtin.graders import (
    ConditionGrader,
    RegexConfig,
    TextTest,
    find_text,
    shorten,
)


class SubstringConfig(StrictConfig):
    """Config of ``output-contains`` / ``output-not-contains``.

    Attributes:
        substring: The text to look for (``value`` is accepted as another spelling).
        case_sensitive: Compare case-sensitively (default true).
    """

    model_config = ConfigDict(populate_by_name=True)

    substring: str = Field(min_length=1, validation_alias=AliasChoices("substring", "value"))
    case_sensitive: bool = True

    def text_test(self) -> TextTest:
        """The substring and its case sensitivity."""
        return self.substring, self.case_sensitive

    def shown(self) -> str:
        """The substring, quoted, as evidence shows it."""
        return f"'{self.substring}'"


class PatternConfig(RegexConfig):
    """Config of ``output-matches`` / ``output-not-matches``.

    Attributes:
        pattern: A regular expression, searched anywhere in the output. Inline flags like
            ``(?i)`` work anywhere in the pattern.
        flags: Optional flag letters: ``i`` (ignore case), ``m`` (multi-line), ``s`` (dot
            matches newline), ``x`` (verbose).
    """


class _OutputGrader(ConditionGrader):
    """Shared logic of the output graders: search the final output with the config's
    ``text_test()``. The evidence templates get ``what`` (the config's ``shown()``),
    ``found`` (what was found) and ``output`` (the output, shortened)."""

    async def grade(self, context: GradeContext) -> GraderResult:
        """Search the final output."""
        output = context.trajectory.output
        found = find_text(output, self.config.text_test())
        values = {
            "what": self.config.shown(),
            "found": shorten(found or "", 120),
            "output": shorten(output) or "(empty)",
        }
        return self.verdict(context, hit=found is not None, values=values)


class OutputContainsGrader(_OutputGrader):
    """Passes when the final output contains ``substring``."""

    metadata: ClassVar[GraderMetadata] = GraderMetadata(
        name="output-contains",
        description="The agent's final output contains a substring.",
        cost_profile="low",
        nonblocking=True,
    )
    Config = SubstringConfig
    hit_text = "{what} found in output"
    miss_text = "{what} not found in output: {output}"


class OutputNotContainsGrader(OutputContainsGrader):
    """Passes when the final output does not contain ``substring``."""

    metadata: ClassVar[GraderMetadata] = GraderMetadata(
        name="output-not-contains",
        description="The agent's final output does not contain a substring.",
        cost_profile="low",
        nonblocking=True,
    )
    negate = True
    hit_text = "{what} found in output (it must be absent)"
    miss_text = "{what} not found in output"


class OutputMatchesGrader(_OutputGrader):
    """Passes when ``pattern`` matches somewhere in the final output."""

    metadata: ClassVar[GraderMetadata] = GraderMetadata(
        name="output-matches",
        description="The agent's final output matches a regular expression.",
    )
    Config = PatternConfig
    hit_text = "{what} matched output: '{found}'"
    miss_text = "{what} did not match output: {output}"


class OutputNotMatchesGrader(OutputMatchesGrader):
    """Passes when ``pattern`` matches nowhere in the final output."""

    metadata: ClassVar[GraderMetadata] = GraderMetadata(
        name="output-not-matches",
        description="The agent's final output does not match a regular expression.",
    )
    negate = True
    hit_text = "{what} matched output (it must not): '{found}'"
    miss_text = "{what} did not match output"
