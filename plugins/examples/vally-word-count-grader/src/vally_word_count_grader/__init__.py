"""An example third-party vally grader: the agent's final answer must have a number of
words within bounds."""

from __future__ import annotations

from pydantic import Field, model_validator

from vally import BaseGrader, GradeContext, GraderMetadata, GraderResult, StrictConfig

__all__ = ["WordCountConfig", "WordCountGrader", "count_words"]


def count_words(text: str) -> int:
    """The number of whitespace-separated words in ``text``."""
    return len(text.split())


class WordCountConfig(StrictConfig):
    """Bounds on the word count, both inclusive; leave one out to leave that side open."""

    min_words: int | None = Field(default=None, ge=0)
    max_words: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _bounds(self) -> WordCountConfig:
        if self.min_words is None and self.max_words is None:
            raise ValueError("set min_words, max_words or both")
        if (
            self.min_words is not None
            and self.max_words is not None
            and self.min_words > self.max_words
        ):
            raise ValueError(
                f"min_words ({self.min_words}) is greater than max_words ({self.max_words})"
            )
        return self


class WordCountGrader(BaseGrader[WordCountConfig]):
    """Passes when the trajectory's output has between ``min_words`` and ``max_words``
    words. The score is 1 inside the bounds and falls off linearly outside them."""

    metadata = GraderMetadata(
        name="word-count",
        description="Checks that the agent's final answer has a number of words within bounds.",
        determinism="static",
        cost_profile="free",
        portability="t1-universal",
    )
    Config = WordCountConfig

    async def grade(self, context: GradeContext) -> GraderResult:
        """Count the words of the output and compare them with the bounds."""
        words = count_words(context.trajectory.output)
        low, high = self.config.min_words, self.config.max_words
        passed = (low is None or words >= low) and (high is None or words <= high)
        if passed:
            score = 1.0
        elif low is not None and words < low:
            score = words / low if low else 0.0
        else:
            assert high is not None
            score = max(0.0, 1.0 - (words - high) / max(high, 1))
        bounds = f"[{low if low is not None else 0}, {high if high is not None else 'inf'}]"
        return self.result(
            context,
            passed=passed,
            score=score,
            evidence=f"{words} words; expected {bounds}",
            metadata={"words": words},
        )
