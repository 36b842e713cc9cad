"""The metrics the API and the dashboard show, self-described (``GET /api/metrics``), and
how each is computed from the aggregates of a group of outcomes.

A group is any set of outcomes: one cell of the score matrix (a stimulus and a model or
variant), a model of the ranking, a run. ``graded`` outcomes are those with a pass or fail
verdict: errored and ungraded trials never count towards pass rates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, and_, case, func

from vally_serve.schema import cells


@dataclass(frozen=True)
class Metric:
    """One metric definition."""

    name: str
    label: str
    description: str
    unit: str  # ratio | ms | count
    higher_is_better: bool

    def to_json(self) -> dict[str, Any]:
        """The definition as the API shows it."""
        return {
            "name": self.name,
            "label": self.label,
            "description": self.description,
            "unit": self.unit,
            "higherIsBetter": self.higher_is_better,
        }


METRICS: tuple[Metric, ...] = (
    Metric(
        "passRate",
        "Pass rate",
        "Passed / graded trials (errored and ungraded trials excluded).",
        "ratio",
        True,
    ),
    Metric(
        "passAtK",
        "pass@k",
        "Share of stimuli where at least one of the k graded trials passed (k = the trials run).",
        "ratio",
        True,
    ),
    Metric(
        "passToTheK", "pass^k", "Share of stimuli where every graded trial passed.", "ratio", True
    ),
    Metric(
        "meanScore", "Mean score", "Mean grader score (0..1) of the graded trials.", "ratio", True
    ),
    Metric(
        "errorRate",
        "Error rate",
        "Errored / all trials (operational failures and grader errors).",
        "ratio",
        False,
    ),
    Metric("durationMs", "Duration", "Mean wall-clock time of a trial.", "ms", False),
    Metric("tokens", "Tokens", "Mean total tokens of a trial.", "count", False),
    Metric("toolCalls", "Tool calls", "Mean tool calls of a trial.", "count", False),
    Metric("turns", "Turns", "Mean turns of a trial.", "count", False),
)
BY_NAME = {m.name: m for m in METRICS}


def aggregate_columns() -> list[ColumnElement[Any]]:
    """The SELECT columns every group query computes over ``cells`` (labelled as the fields
    of :class:`Counts`). A row of ``cells`` is one stimulus group (eval, stimulus, model,
    variant), the unit of pass@k and pass^k."""
    c = cells.c

    def mean(total: str, count: str) -> ColumnElement[Any]:
        return func.sum(c[total]) / func.nullif(func.sum(c[count]), 0)

    graded = c.graded > 0
    return [
        func.sum(case((graded, 1), else_=0)).label("groups"),
        func.sum(case((c.passed > 0, 1), else_=0)).label("any_passed"),
        func.sum(case((and_(graded, c.passed == c.graded), 1), else_=0)).label("all_passed"),
        func.sum(c.trials).label("trials"),
        func.sum(c.graded).label("graded"),
        func.sum(c.passed).label("passed"),
        func.sum(c.errored).label("errored"),
        func.sum(c.score_sum).label("score_sum"),
        mean("duration_sum", "duration_n").label("duration_ms"),
        mean("tokens_sum", "tokens_n").label("tokens"),
        mean("tool_calls_sum", "tool_calls_n").label("tool_calls"),
        mean("turns_sum", "turns_n").label("turns"),
    ]


@dataclass
class Counts:
    """The aggregates of one group of outcomes."""

    trials: int = 0
    graded: int = 0
    passed: int = 0
    errored: int = 0
    score_sum: float = 0.0
    duration_ms: float | None = None
    tokens: float | None = None
    tool_calls: float | None = None
    turns: float | None = None
    groups: int = 0  # stimulus groups with a graded trial (pass@k, pass^k)
    any_passed: int = 0
    all_passed: int = 0

    @classmethod
    def of(cls, row: Any) -> Counts:
        """The counts of one result row of :func:`aggregate_columns`."""
        m = row._mapping
        counts = cls(
            int(m["trials"] or 0),
            int(m["graded"] or 0),
            int(m["passed"] or 0),
            int(m["errored"] or 0),
            float(m["score_sum"] or 0.0),
            _num(m["duration_ms"]),
            _num(m["tokens"]),
            _num(m["tool_calls"]),
            _num(m["turns"]),
        )
        counts.groups = int(m["groups"] or 0)
        counts.any_passed = int(m["any_passed"] or 0)
        counts.all_passed = int(m["all_passed"] or 0)
        return counts

    def value(self, metric: str) -> float | None:
        """The value of ``metric`` for this group (None when it has no data)."""
        ratio = {
            "passRate": (self.passed, self.graded),
            "passAtK": (self.any_passed, self.groups),
            "passToTheK": (self.all_passed, self.groups),
            "meanScore": (self.score_sum, self.graded),
            "errorRate": (self.errored, self.trials),
        }.get(metric)
        if ratio is not None:
            return ratio[0] / ratio[1] if ratio[1] else None
        return {
            "durationMs": self.duration_ms,
            "tokens": self.tokens,
            "toolCalls": self.tool_calls,
            "turns": self.turns,
        }[metric]

    def to_json(self) -> dict[str, Any]:
        """Counts and every metric, as the API shows a group."""
        return {
            "trials": self.trials,
            "graded": self.graded,
            "passed": self.passed,
            "failed": self.graded - self.passed,
            "errored": self.errored,
            "ungraded": self.trials - self.graded - self.errored,
            **{m.name: _round(self.value(m.name)) for m in METRICS},
        }


def _num(value: Any) -> float | None:
    return None if value is None else float(value)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)
