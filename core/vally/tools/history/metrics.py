"""The metrics the API and the dashboard show, self-described (``GET /api/metrics``), and
how each is computed from the aggregates of a group of outcomes.

A group is any set of outcomes: one cell of the score matrix (a stimulus and a model or
variant), a model of the ranking, a run. ``graded`` outcomes are those with a pass or fail
verdict: errored and ungraded trials never count towards pass rates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, case, func

from vally.tools.history.schema import outcomes


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
    """The SELECT columns every group query computes (labelled as :class:`Counts` fields)."""
    verdict = outcomes.c.verdict
    graded = verdict.in_(("pass", "fail"))
    return [
        func.count().label("trials"),
        func.sum(case((graded, 1), else_=0)).label("graded"),
        func.sum(case((verdict == "pass", 1), else_=0)).label("passed"),
        func.sum(case((verdict == "error", 1), else_=0)).label("errored"),
        func.sum(case((graded, outcomes.c.score), else_=None)).label("score_sum"),
        func.avg(outcomes.c.duration_ms).label("duration_ms"),
        func.avg(outcomes.c.tokens).label("tokens"),
        func.avg(outcomes.c.tool_calls).label("tool_calls"),
        func.avg(outcomes.c.turns).label("turns"),
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
        if counts.graded:  # a single cell is one stimulus group
            counts.groups = 1
            counts.any_passed = int(counts.passed > 0)
            counts.all_passed = int(counts.passed == counts.graded)
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


def combine(cells: list[Counts]) -> Counts:
    """The counts of the union of stimulus groups ``cells`` (means weighted by trials)."""
    total = Counts()
    for cell in cells:
        total.trials += cell.trials
        total.graded += cell.graded
        total.passed += cell.passed
        total.errored += cell.errored
        total.score_sum += cell.score_sum
        total.groups += cell.groups
        total.any_passed += cell.any_passed
        total.all_passed += cell.all_passed
    for name in ("duration_ms", "tokens", "tool_calls", "turns"):
        weighted = [(getattr(c, name), c.trials) for c in cells if getattr(c, name) is not None]
        weight = sum(w for _, w in weighted)
        setattr(total, name, sum(v * w for v, w in weighted) / weight if weight else None)
    return total


def _num(value: Any) -> float | None:
    return None if value is None else float(value)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)
