"""One ``trial-result`` record as the rows of the store.

Records are read as plain JSON, not validated against the current models: a record written
by an older or newer vally (a new field, a trajectory moved to its trial folder) still
ingests, and the full line is kept verbatim. Only the fields the tables index are checked;
a record without a run id, trial id, eval or stimulus name is a :class:`RecordError`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from vally.tools.history.schema import outcome_id

Row = dict[str, Any]


class RecordError(ValueError):
    """A record lacks a field the store needs (the message names it)."""


@dataclass
class OutcomeRows:
    """The rows of one trial: its outcome, its details, its graders and its tools."""

    outcome: Row
    detail: Row
    graders: list[Row] = field(default_factory=list)
    tools: list[Row] = field(default_factory=list)
    needs_folder_events: bool = False


def _text(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise RecordError(f"the record has no {key!r} string")
    return value


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def verdict(status: str, grade: Mapping[str, Any] | None) -> str:
    """``pass``, ``fail``, ``error`` (operational or grader error) or ``ungraded``."""
    if status != "success":
        return "error"
    if grade is None:
        return "ungraded"
    if grade.get("errored"):
        return "error"
    if grade.get("hasGraders") is False:
        return "ungraded"
    return "pass" if grade.get("passed") else "fail"


def outcome_rows(data: Mapping[str, Any], raw: str) -> OutcomeRows:
    """The rows of the trial record ``data`` (whose line is ``raw``).

    Raises:
        RecordError: A field the store indexes is missing.
    """
    run_id, trial_id = _text(data, "runId"), _text(data, "trialId")
    oid = outcome_id(run_id, trial_id)
    status = data.get("status") if isinstance(data.get("status"), str) else "error"
    grade = data.get("gradeResult") if isinstance(data.get("gradeResult"), dict) else None
    trajectory = _dict(data.get("trajectory"))
    metrics = _dict(trajectory.get("metrics"))
    error = _dict(data.get("error"))
    outcome: Row = {
        "id": oid,
        "run_id": run_id,
        "trial_id": trial_id,
        "eval_name": _text(data, "evalName"),
        "stimulus": _text(data, "stimulusName"),
        "model": data.get("model") if isinstance(data.get("model"), str) else "",
        "variant": data.get("variant") if isinstance(data.get("variant"), str) else "",
        "trial_index": _int(data.get("trialIndex")) or 0,
        "status": str(status),
        "verdict": verdict(str(status), grade),
        "score": _float(grade.get("score")) if grade else None,
        "started_at": data.get("startedAt") if isinstance(data.get("startedAt"), str) else None,
        "duration_ms": _int(data.get("durationMs")),
        "tokens": _int(_dict(metrics.get("tokenUsage")).get("totalTokens")) if metrics else None,
        "tool_calls": _int(metrics.get("toolCallCount")) if metrics else None,
        "turns": _int(metrics.get("turnCount")) if metrics else None,
        "error_events": _int(metrics.get("errorCount")) if metrics else None,
        "end_reason": trajectory.get("endReason") if trajectory else None,
        "error_code": error.get("code") if isinstance(error.get("code"), str) else None,
        "tags": _dict(data.get("tags")),
    }
    detail: Row = {
        "outcome_id": oid,
        "record": raw,
        "events": None,
        "artifacts": "[]",
        "trial_dir": None,
    }
    events = trajectory.get("events")
    rows = OutcomeRows(
        outcome,
        detail,
        _grader_rows(oid, run_id, grade),
        _tool_rows(oid, run_id, metrics, events),
        needs_folder_events=not events
        or bool(data.get("truncated") or trajectory.get("truncated")),
    )
    return rows


def _grader_rows(oid: str, run_id: str, grade: Mapping[str, Any] | None) -> list[Row]:
    details = grade.get("details") if grade else None
    if not isinstance(details, list):
        return []
    rows: list[Row] = []
    for position, item in enumerate(details):
        if not isinstance(item, dict):
            continue
        name = item.get("name") or item.get("type") or f"grader-{position}"
        rows.append(
            {
                "outcome_id": oid,
                "position": position,
                "run_id": run_id,
                "name": str(name),
                "type": str(item.get("type") or name),
                "passed": bool(item.get("passed")),
                "score": _float(item.get("score")) or 0.0,
                "status": "error" if item.get("status") == "error" else "success",
                "required": bool(item.get("required")),
            }
        )
    return rows


def _tool_rows(oid: str, run_id: str, metrics: Mapping[str, Any], events: Any) -> list[Row]:
    calls: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    breakdown = metrics.get("toolCallBreakdown")
    if isinstance(breakdown, dict):
        for tool, count in breakdown.items():
            calls[str(tool)] += _int(count) or 0
    if isinstance(events, list):
        for event in events:
            if isinstance(event, dict) and event.get("type") == "tool_result":
                data = _dict(event.get("data"))
                if data.get("success") is False:
                    failures[str(data.get("toolName") or "unknown")] += 1
    return [
        {
            "outcome_id": oid,
            "run_id": run_id,
            "tool": tool,
            "calls": calls[tool],
            "failures": failures[tool],
        }
        for tool in sorted(set(calls) | set(failures))
    ]
