"""Token usage of a trial and a run, split into the agent's and the judges' model calls.

The agent's usage comes from its trajectory (``metrics.tokenUsage``). A grader that calls a
model reports its usage in its result's metadata under :data:`JUDGE_USAGE_KEY`, as
``{"calls", "inputTokens", "outputTokens", "cacheReadTokens"}``; the judge's usage of a
trial is the sum over its graders (nested results included).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import Field

from vally.models.base import RecordModel

if TYPE_CHECKING:
    from vally.models.records import GradeResult, GraderResult
    from vally.models.trajectory import Trajectory

JUDGE_USAGE_KEY = "judgeUsage"
"""The grader-result metadata key holding the judge's token usage."""


class TokenTotals(RecordModel):
    """Token totals of one kind of model call.

    Attributes:
        calls: Model calls counted.
        input_tokens: Prompt tokens (cached ones included).
        output_tokens: Completion tokens.
        cache_read_tokens: Prompt tokens served from the provider's cache (part of
            ``inputTokens``).
        total_tokens: ``inputTokens + outputTokens``.
    """

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    total_tokens: int = 0

    def plus(self, other: TokenTotals) -> TokenTotals:
        """The sum of both totals."""
        return TokenTotals(
            calls=self.calls + other.calls,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
        )


class JudgeCacheCounts(RecordModel):
    """How the judge cache answered the judge requests of the trial's graders.

    Attributes:
        hits: Requests answered from the judge cache (no model call was made).
        misses: Requests sent to the model (and stored in the cache).
    """

    hits: int = 0
    misses: int = 0

    def plus(self, other: JudgeCacheCounts) -> JudgeCacheCounts:
        """The sum of both counts."""
        return JudgeCacheCounts(hits=self.hits + other.hits, misses=self.misses + other.misses)


class Usage(RecordModel):
    """Token usage split into the agent's and the judges' calls.

    Attributes:
        agent: The agent's model calls (from its trajectory).
        judge: The LLM judges' calls of the trial's graders (cached answers included, with
            the tokens of the call that produced them).
        judge_cache: How many of the judges' requests the judge cache answered (zeros with
            ``--no-cache`` or without judges).
    """

    agent: TokenTotals = Field(default_factory=TokenTotals)
    judge: TokenTotals = Field(default_factory=TokenTotals)
    judge_cache: JudgeCacheCounts = Field(default_factory=JudgeCacheCounts)

    def plus(self, other: Usage) -> Usage:
        """The sum of both usages."""
        return Usage(
            agent=self.agent.plus(other.agent),
            judge=self.judge.plus(other.judge),
            judge_cache=self.judge_cache.plus(other.judge_cache),
        )


def _count(data: Mapping[str, Any], key: str) -> int:
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def judge_totals(data: Any) -> TokenTotals:
    """The totals a grader reported under :data:`JUDGE_USAGE_KEY` (zero when malformed)."""
    if not isinstance(data, Mapping):
        return TokenTotals()
    inputs, outputs = _count(data, "inputTokens"), _count(data, "outputTokens")
    return TokenTotals(
        calls=_count(data, "calls"),
        input_tokens=inputs,
        output_tokens=outputs,
        cache_read_tokens=_count(data, "cacheReadTokens"),
        total_tokens=inputs + outputs,
    )


def _graders_usage(results: Iterable[GraderResult]) -> TokenTotals:
    total = TokenTotals()
    for result in results:
        total = total.plus(judge_totals(result.metadata.get(JUDGE_USAGE_KEY)))
        total = total.plus(_graders_usage(result.details))
    return total


def trial_usage(trajectory: Trajectory | None, grade: GradeResult | None) -> Usage:
    """The usage of one trial: its agent's (from the trajectory) and its judges'."""
    agent = TokenTotals()
    if trajectory is not None:
        tokens = trajectory.metrics.token_usage
        agent = TokenTotals(
            calls=tokens.call_count,
            input_tokens=tokens.input_tokens,
            output_tokens=tokens.output_tokens,
            cache_read_tokens=tokens.cache_read_tokens,
            total_tokens=tokens.input_tokens + tokens.output_tokens,
        )
    judge = _graders_usage(grade.details) if grade is not None else TokenTotals()
    return Usage(agent=agent, judge=judge)
