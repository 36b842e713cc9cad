"""Promotion rules: what a candidate must show before it replaces the baseline.

A rule set is written down before the numbers are read, in its own YAML file (``vally
compare --rules FILE``) or as the ``promotion:`` section of an experiment file::

    confidence_level: 0.95
    rules:
      - type: no-regressed-cases
        eval: golden
        graders: [correct]
      - type: no-more-failed
      - type: improves
        figure: brief
        by: 0.05
      - type: non-inferior
        figure: wall_time_ms
        margin: 10%

Every rule may be scoped to one eval (``eval:``) or one tag value (``tag: {group: hard}``),
so a golden benchmark and an evidence suite are gated apart, never averaged together.
Margins are in the figure's own units, or a percentage of the baseline's mean (``10%``).
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from vally.models.base import SpecModel

_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")

Basis = Literal["interval", "estimate"]
"""What a rule with a margin reads: the interval's end (the default, a decision at the
confidence level) or the point estimate alone (June's ``delta >= 0.05``)."""


class Margin(SpecModel):
    """A margin: an amount in the figure's units, or a share of the baseline's mean."""

    value: float = Field(description="The margin: an amount, or a share when relative.")
    relative: bool = Field(default=False, description="True when a share of the baseline mean.")

    def amount(self, baseline_mean: float | None) -> float | None:
        """The margin in the figure's units; None when it is relative to an unknown mean."""
        if not self.relative:
            return self.value
        return None if baseline_mean is None else self.value * abs(baseline_mean)

    def text(self) -> str:
        """As written: ``0.05`` or ``10%``."""
        return f"{self.value * 100:g}%" if self.relative else f"{self.value:g}"


def parse_margin(value: object) -> Margin:
    """A margin from YAML: a number (``0.05``) or a percentage string (``10%``).

    Raises:
        ValueError: Neither, negative, or not finite.
    """
    if isinstance(value, Margin):
        return value
    if isinstance(value, bool):
        raise ValueError("a margin is a number or a percentage like '10%', not a boolean")
    if isinstance(value, (int, float)):
        margin = Margin(value=float(value))
    elif isinstance(value, str) and (match := _PERCENT.match(value)):
        margin = Margin(value=float(match.group(1)) / 100, relative=True)
    elif isinstance(value, dict):
        margin = Margin.model_validate(value)
    else:
        raise ValueError(f"a margin is a number or a percentage like '10%', got {value!r}")
    if not math.isfinite(margin.value) or margin.value < 0:
        raise ValueError(f"a margin must be a finite number of at least 0, got {value!r}")
    return margin


class _Rule(SpecModel):
    """What every rule has: a name for reports and an optional scope."""

    name: str | None = Field(default=None, description="The rule's name in reports.")
    eval: str | None = Field(default=None, description="Only the cases of this eval.")
    tag: dict[str, str] | None = Field(
        default=None, description="Only the cases with this tag value, e.g. {group: hard}."
    )

    @field_validator("tag")
    @classmethod
    def _one_tag(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is not None and len(value) != 1:
            raise ValueError("tag names exactly one tag and its value, e.g. {group: hard}")
        return value

    @model_validator(mode="after")
    def _one_scope(self) -> _Rule:
        if self.eval is not None and self.tag is not None:
            raise ValueError("scope a rule by eval or by tag, not both")
        return self

    @property
    def scope(self) -> tuple[str, str]:
        """``("eval", name)``, ``(tag, value)`` or ``("", "")`` for every case."""
        if self.eval is not None:
            return ("eval", self.eval)
        if self.tag:
            ((key, value),) = self.tag.items()
            return (key, value)
        return ("", "")


class NoRegressedCases(_Rule):
    """No case regresses: on the named graders (each case's change no lower than
    ``-tolerance``), or by the case's mean grader change when no grader is named. A case
    that started erroring is regressed whatever its scores did."""

    type: Literal["no-regressed-cases"] = Field(description="The rule's kind.")
    graders: list[str] = Field(
        default_factory=list, description="Graders no case may get worse on (default: all)."
    )
    tolerance: float = Field(
        default=0.0, ge=0.0, description="A change down to -tolerance is not a regression."
    )
    max: int = Field(default=0, ge=0, description="Regressed cases allowed.")


class NoMoreFailed(_Rule):
    """The candidate has no more cases with errored trials than the baseline."""

    type: Literal["no-more-failed"] = Field(description="The rule's kind.")


class _MarginRule(_Rule):
    figure: str = Field(description="A grader's or metric's name.")
    basis: Basis = Field(
        default="interval", description="Read the interval's end, or the estimate alone."
    )


class Improves(_MarginRule):
    """A grader or metric improves by more than ``by`` (superiority with a margin)."""

    type: Literal["improves"] = Field(description="The rule's kind.")
    by: Margin = Field(
        default_factory=lambda: Margin(value=0.0),
        description="The improvement required: an amount in the figure's units, or 5%.",
    )

    @field_validator("by", mode="before")
    @classmethod
    def _margin(cls, value: object) -> Margin:
        return parse_margin(value)


class NonInferior(_MarginRule):
    """A grader or metric gets worse by less than ``margin`` (non-inferiority)."""

    type: Literal["non-inferior"] = Field(description="The rule's kind.")
    margin: Margin = Field(
        description="The largest acceptable loss: an amount in the figure's units, or 10%."
    )

    @field_validator("margin", mode="before")
    @classmethod
    def _margin(cls, value: object) -> Margin:
        return parse_margin(value)


class WinRate(_Rule):
    """The judged win rate (wins over judged pairs, as ``vally compare`` prints it) is at
    least ``at_least``; needs the judged pairwise comparison (a judge model)."""

    type: Literal["win-rate"] = Field(description="The rule's kind.")
    at_least: float = Field(ge=0.0, le=1.0, description="The lowest acceptable win rate.")
    basis: Basis = Field(
        default="interval", description="Read the interval's end, or the estimate alone."
    )


class NoMissing(_Rule):
    """Both runs have every case."""

    type: Literal["no-missing"] = Field(description="The rule's kind.")


class SameSuite(_Rule):
    """Both runs are of the same suite: the same cases with the same content."""

    type: Literal["same-suite"] = Field(description="The rule's kind.")


Rule = Annotated[
    NoRegressedCases | NoMoreFailed | Improves | NonInferior | WinRate | NoMissing | SameSuite,
    Field(discriminator="type"),
]
"""One promotion rule, told apart by its ``type``."""
RULE_TYPES = (
    "no-regressed-cases",
    "no-more-failed",
    "improves",
    "non-inferior",
    "win-rate",
    "no-missing",
    "same-suite",
)


class PromotionRules(SpecModel):
    """A promotion rule set: every rule must pass for the candidate to be promoted."""

    confidence_level: float | None = Field(
        default=None, gt=0.0, lt=1.0, description="Level of every interval (default 0.95)."
    )
    interval: Literal["cases", "repeats"] | None = Field(
        default=None, description="Intervals over cases (default) or repeats (Welch)."
    )
    rules: list[Rule] = Field(min_length=1, description="Every rule must pass to promote.")
