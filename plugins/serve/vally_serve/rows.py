"""One ``trial-result`` record as the rows of the store.

Records are read as plain JSON, not validated against the current models: a record written
by an older or newer vally (a new field, a trajectory moved to its trial folder) still
ingests, and the full line is kept verbatim. Only the fields the tables index are checked
(:mod:`.storable`): a record without a run id, trial id, eval or stimulus name, or whose
identifying fields the store cannot hold, is a :class:`RecordError`; a descriptive field
the store cannot hold (a ``NaN`` duration, an object as end reason) is left out of its
column, with a note.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Table

from vally_serve.schema import (
    BUCKETS_PER_DOUBLING,
    CELL_SUMS,
    DURATION_SUMS,
    GRADER_SUMS,
    TOOL_SUMS,
    cells,
    durations,
    grader_stats,
    outcome_id,
    outcomes,
    tool_stats,
)
from vally_serve.storable import (
    INTEGER_MAX,
    RecordError,
    count,
    is_storable_text,
    key_text,
    limit_of,
    optional_text,
    real,
)

__all__ = ["OutcomeRows", "RecordError", "Row", "outcome_rows", "sums_of", "verdict"]

Row = dict[str, Any]


@dataclass
class OutcomeRows:
    """The rows of one trial: its outcome and details, what it adds to the running sums
    (its grader verdicts and its tools), and the notes on values left out of its columns.

    ``detail["record"]`` is the record's line as read (bytes); it is compressed with the
    lines stored beside it when written (:mod:`.recordblocks`).
    """

    outcome: Row
    detail: Row
    graders: list[Row] = field(default_factory=list)
    tools: list[Row] = field(default_factory=list)
    needs_folder_events: bool = False
    notes: list[str] = field(default_factory=list)
    origin: tuple[str, int] = ("", 0)
    """The file and line the record was read from."""


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


_LIMITS = {column.name: limit_of(column) for column in outcomes.c}
"""The most characters of each text column of ``outcomes``."""


def _key(data: Mapping[str, Any], name: str, column: str, *, required: bool = True) -> str:
    """:func:`key_text` of the field ``name``, checked inline when it is plain ASCII text
    (the common case: no surrogate can hide in it, so a NUL and the length decide)."""
    value = data.get(name)
    if (
        type(value) is str
        and (value or not required)
        and value.isascii()
        and "\x00" not in value
        and len(value) <= (_LIMITS[column] or len(value))
    ):
        return value
    return key_text(value, name, _LIMITS[column], required=required)


def _count(value: Any, name: str, notes: list[str]) -> int | None:
    """:func:`count`, with its common case (a whole number in range) taken inline."""
    if type(value) is int and 0 <= value <= INTEGER_MAX:
        return value
    return count(value, name, notes)


def outcome_rows(data: Mapping[str, Any], raw: bytes) -> OutcomeRows:
    """The rows of the trial record ``data`` (whose line is ``raw``).

    Raises:
        RecordError: A field the store indexes is missing, or holds a value the store
            cannot keep (the message says which and why).
    """
    run_id = _key(data, "runId", "run_id")
    trial_id = _key(data, "trialId", "trial_id")
    eval_name = _key(data, "evalName", "eval_name")
    stimulus = _key(data, "stimulusName", "stimulus")
    model = _key(data, "model", "model", required=False)
    variant = _key(data, "variant", "variant", required=False)
    notes: list[str] = []
    oid = outcome_id(run_id, trial_id)
    status = optional_text(data.get("status"), "status", _LIMITS["status"], notes) or "error"
    grade = data.get("gradeResult")
    if not isinstance(grade, dict):
        grade = None
    trajectory = _dict(data.get("trajectory"))
    metrics = _dict(trajectory.get("metrics"))
    error = _dict(data.get("error"))
    events = trajectory.get("events")
    event_list = events if isinstance(events, list) else ()
    error_events, failed_tools = _events_of_note(event_list)
    tags = _dict(data.get("tags"))
    outcome: Row = {
        "id": oid,
        "run_id": run_id,
        "trial_id": trial_id,
        "eval_name": eval_name,
        "stimulus": stimulus,
        "model": model,
        "variant": variant,
        "trial_index": _count(data.get("trialIndex"), "trialIndex", notes) or 0,
        "status": status,
        "verdict": verdict(status, grade),
        "score": real(grade.get("score"), "gradeResult.score", notes) if grade else None,
        "started_at": optional_text(
            data.get("startedAt"), "startedAt", _LIMITS["started_at"], notes
        ),
        "duration_ms": _count(data.get("durationMs"), "durationMs", notes),
        "tokens": _count(
            _dict(metrics.get("tokenUsage")).get("totalTokens"),
            "trajectory.metrics.tokenUsage.totalTokens",
            notes,
        ),
        "tool_calls": _count(
            metrics.get("toolCallCount"), "trajectory.metrics.toolCallCount", notes
        ),
        "turns": _count(metrics.get("turnCount"), "trajectory.metrics.turnCount", notes),
        "error_events": _count(metrics.get("errorCount"), "trajectory.metrics.errorCount", notes),
        "end_reason": optional_text(
            trajectory.get("endReason"), "trajectory.endReason", _LIMITS["end_reason"], notes
        ),
        "error_code": optional_text(error.get("code"), "error.code", _LIMITS["error_code"], notes),
        "tags": _tags_text(tags),
        "error_text": _error_text(error, error_events),
        "grader_verdicts": None,
    }
    graders, outcome["grader_verdicts"] = _graders_of(grade, notes)  # notes in column order
    detail: Row = {
        "outcome_id": oid,
        "record": raw,  # compressed when written
        "events": None,
        "artifacts": "[]",
        "trial_dir": None,
    }
    return OutcomeRows(
        outcome,
        detail,
        graders,
        _tool_rows(metrics, failed_tools, notes),
        needs_folder_events=not events
        or bool(data.get("truncated") or trajectory.get("truncated")),
        notes=notes,
    )


_TAGS_TEXT: dict[tuple[tuple[str, str], ...], str] = {}
"""The ``tags`` column of tags whose values are all text, by their items (the records of
one stimulus repeat its tags); emptied when it holds :data:`_TAGS_KEPT` of them."""
_TAGS_KEPT = 4096


def _tags_text(tags: dict[str, Any]) -> str:
    """``json.dumps(tags)``: looked up when every value is text (the items then decide
    the text; a number could not be told from an equal boolean), else encoded."""
    if not tags:
        return "{}"
    if not all(type(value) is str for value in tags.values()):
        return json.dumps(tags)
    items = tuple(tags.items())
    text = _TAGS_TEXT.get(items)
    if text is None:
        if len(_TAGS_TEXT) >= _TAGS_KEPT:
            _TAGS_TEXT.clear()
        text = _TAGS_TEXT[items] = json.dumps(tags)
    return text


def _events_of_note(events: Iterable[Any]) -> tuple[list[Mapping[str, Any]], list[Any]]:
    """One pass over a trajectory's events: the data of its error events, and the
    ``data`` of its failed tool results (``success`` false)."""
    errors: list[Mapping[str, Any]] = []
    failed: list[Any] = []
    for event in events:
        if not isinstance(event, dict):
            continue
        kind = event.get("type")
        if kind == "tool_result":
            info = event.get("data")
            if isinstance(info, dict) and info.get("success") is False:
                failed.append(info)
        elif kind == "error":
            errors.append(_dict(event.get("data")))
    return errors, failed


ERROR_TEXT_CHARS = 4000
"""The most characters of error text kept for ``?error=`` searches."""


def _clean(text: Any) -> str:
    """``text`` as one line the store can keep (no NUL, no lone surrogate)."""
    value = str(text).replace("\x00", " ").replace("\n", " ")
    return value.encode("utf-8", "replace").decode("utf-8")


def error_text(data: Mapping[str, Any]) -> str | None:
    """What ``?error=`` searches: the trial's error (phase, code, message) and the code and
    message of each error event of its trajectory, one per line; None when there is none."""
    events = _dict(data.get("trajectory")).get("events")
    errors, _failed = _events_of_note(events if isinstance(events, list) else ())
    return _error_text(_dict(data.get("error")), errors)


def _error_text(error: Mapping[str, Any], events: list[Mapping[str, Any]]) -> str | None:
    """:func:`error_text` from the record's ``error`` and the data of its error events."""
    if not error and not events:
        return None
    parts: list[str] = []
    if error:
        parts.append(
            ": ".join(_clean(error[k]) for k in ("phase", "code", "message") if error.get(k))
        )
    for info in events:
        parts.append(": ".join(_clean(info[k]) for k in ("code", "message") if info.get(k)))
    text = "\n".join(p for p in parts if p)
    return text[:ERROR_TEXT_CHARS] or None


def grader_verdicts(grade: Mapping[str, Any] | None) -> str | None:
    """What ``?grader=`` matches: ``"\nname=verdict\n"`` for each grader of the trial
    (verdict ``pass``, ``fail`` or ``error``); None when it was not graded."""
    details = grade.get("details") if grade else None
    if not isinstance(details, list):
        return None
    lines = []
    for position, item in enumerate(details):
        if isinstance(item, dict):
            name = _clean(item.get("name") or item.get("type") or f"grader-{position}")
            result = (
                "error"
                if item.get("status") == "error"
                else "pass"
                if item.get("passed")
                else "fail"
            )
            lines.append(f"{name}={result}")
    return "\n" + "".join(line + "\n" for line in lines) if lines else None


def _graders_of(grade: Mapping[str, Any] | None, notes: list[str]) -> tuple[list[Row], str | None]:
    """One pass over a trial's grader details: its ``grader_stats`` rows and its
    :func:`grader_verdicts` text."""
    details = grade.get("details") if grade else None
    if not isinstance(details, list):
        return [], None
    name_limit, type_limit = _GRADER_NAME_LIMIT, _GRADER_TYPE_LIMIT
    rows: list[Row] = []
    lines: list[str] = []
    for position, item in enumerate(details):
        if not isinstance(item, dict):
            continue
        given = item.get("name") or item.get("type") or f"grader-{position}"
        failed_as = "error" if item.get("status") == "error" else None
        passed = bool(item.get("passed"))
        lines.append(f"{_clean(given)}={failed_as or ('pass' if passed else 'fail')}")
        name = str(given)
        kind = str(item.get("type") or name)
        if not (is_storable_text(name, name_limit) and is_storable_text(kind, type_limit)):
            notes.append(
                f"gradeResult.details[{position}] has a name or type the store cannot keep "
                f"(a NUL, a lone surrogate, or over {name_limit} characters); left out of the "
                "grader statistics"
            )
            continue
        score = item.get("score")
        if not isinstance(score, float) or not math.isfinite(score):  # else it is kept as is
            score = real(score, f"gradeResult.details[{position}].score", notes)
        rows.append(
            {
                "name": name,
                "type": kind,
                "passed": passed,
                "score": score or 0.0,
                "status": failed_as or "success",
                "required": bool(item.get("required")),
            }
        )
    return rows, "\n" + "".join(line + "\n" for line in lines) if lines else None


_GRADER_NAME_LIMIT = limit_of(grader_stats.c.name)
_GRADER_TYPE_LIMIT = limit_of(grader_stats.c.type)
_TOOL_LIMIT = limit_of(tool_stats.c.tool)


def _tool_rows(metrics: Mapping[str, Any], failed: list[Any], notes: list[str]) -> list[Row]:
    """The ``tool_stats`` rows of a trial: calls from the metrics' breakdown, failures
    from the ``data`` of its failed tool results."""
    calls: dict[str, int] = {}
    failures: dict[str, int] = {}
    breakdown = metrics.get("toolCallBreakdown")
    if isinstance(breakdown, dict):
        where = "a count of trajectory.metrics.toolCallBreakdown"
        for tool, calls_of_tool in breakdown.items():
            if type(calls_of_tool) is not int or not 0 <= calls_of_tool <= INTEGER_MAX:
                calls_of_tool = count(calls_of_tool, where, notes) or 0
            calls[str(tool)] = calls.get(str(tool), 0) + calls_of_tool
    for data in failed:
        tool = str(data.get("toolName") or "unknown")
        failures[tool] = failures.get(tool, 0) + 1
    limit = _TOOL_LIMIT
    tools = sorted(calls.keys() | failures.keys())
    kept = [tool for tool in tools if is_storable_text(tool, limit)]
    if len(kept) < len(tools):
        notes.append(
            f"{len(tools) - len(kept)} tool name(s) the store cannot keep (a NUL, a lone "
            f"surrogate, or over {limit} characters); left out of the tool statistics"
        )
    return [
        {"tool": tool, "calls": calls.get(tool, 0), "failures": failures.get(tool, 0)}
        for tool in kept
    ]


CELL_KEY = ("run_id", "eval_name", "stimulus", "model", "variant")


def sums_of(batch: list[OutcomeRows]) -> list[tuple[Table, tuple[str, ...], list[Row]]]:
    """What ``batch`` adds to the running sums: rows of ``cells``, ``grader_stats`` and
    ``tool_stats`` (sorted by key, so concurrent writers lock rows in one order)."""
    cell_rows: dict[tuple[str, ...], Row] = {}
    grader_rows: dict[tuple[str, ...], Row] = {}
    tool_rows: dict[tuple[str, ...], Row] = {}
    duration_rows: dict[tuple[Any, ...], Row] = {}
    for rows in batch:
        o = rows.outcome
        run_id, verdict_of, duration = o["run_id"], o["verdict"], o["duration_ms"]
        key = (run_id, o["eval_name"], o["stimulus"], o["model"], o["variant"])
        cell = cell_rows.get(key)
        if cell is None:
            cell = cell_rows[key] = {
                **dict(zip(CELL_KEY, key, strict=True)),
                **dict.fromkeys(CELL_SUMS, 0),
            }
        graded = verdict_of in ("pass", "fail")
        cell["trials"] += 1
        cell["graded"] += graded
        cell["passed"] += verdict_of == "pass"
        cell["errored"] += verdict_of == "error"
        if graded and o["score"] is not None:
            cell["score_sum"] += o["score"]
        for total, counted, column in _CELL_MEASURES:
            value = o[column]
            if value is not None:
                cell[total] += value
                cell[counted] += 1
        for g in rows.graders:
            gkey = (run_id, g["name"], g["type"], o["stimulus"])
            stat = grader_rows.get(gkey)
            if stat is None:
                stat = grader_rows[gkey] = {
                    **dict(zip(("run_id", "name", "type", "stimulus"), gkey, strict=True)),
                    **dict.fromkeys(GRADER_SUMS, 0),
                }
            stat["results"] += 1
            stat["failed"] += not g["passed"] and g["status"] == "success"
            stat["errored"] += g["status"] == "error"
            stat["score_sum"] += g["score"]
            stat["required"] += g["required"]
        if duration is not None:
            dkey = (run_id, duration_bucket(duration), verdict_of)
            slot = duration_rows.get(dkey)
            if slot is None:
                slot = duration_rows[dkey] = {
                    "run_id": dkey[0],
                    "bucket": dkey[1],
                    "verdict": dkey[2],
                    "trials": 0,
                }
            slot["trials"] += 1
        for t in rows.tools:
            tkey = (run_id, t["tool"])
            usage = tool_rows.get(tkey)
            if usage is None:
                usage = tool_rows[tkey] = {
                    "run_id": tkey[0],
                    "tool": tkey[1],
                    **dict.fromkeys(TOOL_SUMS, 0),
                }
            usage["calls"] += t["calls"]
            usage["failures"] += t["failures"]
            usage["trials"] += 1
    return [
        (cells, CELL_SUMS, [cell_rows[k] for k in sorted(cell_rows)]),
        (grader_stats, GRADER_SUMS, [grader_rows[k] for k in sorted(grader_rows)]),
        (tool_stats, TOOL_SUMS, [tool_rows[k] for k in sorted(tool_rows)]),
        (durations, DURATION_SUMS, [duration_rows[k] for k in sorted(duration_rows)]),
    ]


_CELL_MEASURES = (
    ("duration_sum", "duration_n", "duration_ms"),
    ("tokens_sum", "tokens_n", "tokens"),
    ("tool_calls_sum", "tool_calls_n", "tool_calls"),
    ("turns_sum", "turns_n", "turns"),
)
"""The measures a cell sums and counts (its columns), with the outcome column of each."""


def duration_bucket(ms: int) -> int:
    """The ``durations`` bucket of a duration in milliseconds."""
    return math.floor(BUCKETS_PER_DOUBLING * math.log2(max(ms, 1)))
