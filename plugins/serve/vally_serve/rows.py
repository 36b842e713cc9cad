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
from dataclasses import dataclass
from math import floor, log2
from typing import Any, NamedTuple

from sqlalchemy import Column, Table

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

__all__ = [
    "GraderRow",
    "OutcomeRow",
    "OutcomeRows",
    "RecordError",
    "Row",
    "Sums",
    "ToolRow",
    "outcome_rows",
    "sums_of",
    "verdict",
]

Row = dict[str, Any]


class OutcomeRow(NamedTuple):
    """The ``outcomes`` row of one trial, its values in the order of the table's columns
    (``seq`` aside, which the database gives), so the driver takes it as it is."""

    id: str
    run_id: str
    trial_id: str
    eval_name: str
    stimulus: str
    model: str
    variant: str
    trial_index: int
    status: str
    verdict: str
    score: float | None
    started_at: str | None
    duration_ms: int | None
    tokens: int | None
    tool_calls: int | None
    turns: int | None
    error_events: int | None
    end_reason: str | None
    error_code: str | None
    tags: str
    error_text: str | None
    grader_verdicts: str | None


GraderRow = tuple[str, str, bool, float, str, bool]
"""What one grader verdict of a trial adds to ``grader_stats``: its name, type, whether it
passed, its score, its status (``success`` or ``error``) and whether it was required."""
ToolRow = tuple[str, int, int]
"""What one tool of a trial adds to ``tool_stats``: its name, calls and failed results."""


@dataclass(slots=True)
class OutcomeRows:
    """The rows of one trial: its outcome, its record line, what it adds to the running sums
    (its grader verdicts and its tools), the notes on values left out of its columns, and
    what its trial folder adds to its details (set just before it is written).

    ``record`` is the record's line as read; it is compressed with the lines stored beside
    it when written (:mod:`.recordblocks`).
    """

    outcome: OutcomeRow
    record: bytes
    graders: list[GraderRow]
    tools: list[ToolRow]
    needs_folder_events: bool
    notes: list[str]
    origin: tuple[str, int] = ("", 0)
    """The file and line the record was read from."""
    events: str | None = None
    """The trial folder's events (a JSON array), when the record has none (compressed when
    written)."""
    artifacts: str = "[]"
    """The trial folder's artifacts (a JSON array)."""
    trial_dir: str | None = None
    """The trial folder."""


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


def _limit(column: Column[Any]) -> int:
    """The most characters of a column of bounded length."""
    limit = limit_of(column)
    assert limit is not None, column
    return limit


_RUN_LIMIT, _EVAL_LIMIT, _STIMULUS_LIMIT, _MODEL_LIMIT, _VARIANT_LIMIT = (
    _limit(outcomes.c[name]) for name in ("run_id", "eval_name", "stimulus", "model", "variant")
)
_STATUS_LIMIT, _TIME_LIMIT, _END_LIMIT = (
    _limit(outcomes.c[name]) for name in ("status", "started_at", "end_reason")
)


def _text(value: Any, name: str, limit: int, notes: list[str]) -> str | None:
    """``value`` as it is when it is text the store keeps unchanged (ASCII, no NUL, within
    ``limit``: the common case, checked without a further call), else
    :func:`optional_text` of it."""
    if type(value) is str and value.isascii() and "\x00" not in value and len(value) <= limit:
        return value
    return optional_text(value, name, limit, notes)


def _key(data: Mapping[str, Any], name: str, column: str, *, required: bool = True) -> str:
    """:func:`key_text` of the field ``name``."""
    return key_text(data.get(name), name, _LIMITS[column], required=required)


def _keys(data: Mapping[str, Any]) -> tuple[str, str, str, str, str, str]:
    """The run id, trial id, eval, stimulus, model and variant of a record, each as
    :func:`key_text` gives it (model and variant "" when absent).

    The common case is taken in one test: six strings, the required ones not empty, each
    within its column, together plain ASCII without a NUL (no surrogate can hide in
    them). Any other record is checked field by field, in that order, so its error names
    the first field at fault.

    Raises:
        RecordError: A field is missing or cannot be held.
    """
    get = data.get
    run_id, trial_id, eval_name = get("runId"), get("trialId"), get("evalName")
    stimulus, model, variant = get("stimulusName"), get("model"), get("variant")
    if model is None:
        model = ""
    if variant is None:
        variant = ""
    if (
        type(run_id) is str
        and type(trial_id) is str
        and type(eval_name) is str
        and type(stimulus) is str
        and type(model) is str
        and type(variant) is str
        and run_id
        and trial_id
        and eval_name
        and stimulus
        and len(run_id) <= _RUN_LIMIT
        and len(eval_name) <= _EVAL_LIMIT
        and len(stimulus) <= _STIMULUS_LIMIT
        and len(model) <= _MODEL_LIMIT
        and len(variant) <= _VARIANT_LIMIT
    ):
        joined = run_id + trial_id + eval_name + stimulus + model + variant
        if joined.isascii() and "\x00" not in joined:
            return run_id, trial_id, eval_name, stimulus, model, variant
    return (
        _key(data, "runId", "run_id"),
        _key(data, "trialId", "trial_id"),
        _key(data, "evalName", "eval_name"),
        _key(data, "stimulusName", "stimulus"),
        _key(data, "model", "model", required=False),
        _key(data, "variant", "variant", required=False),
    )


def outcome_rows(data: Mapping[str, Any], raw: bytes) -> OutcomeRows:
    """The rows of the trial record ``data`` (whose line is ``raw``).

    The values most records hold (whole numbers in range, plain ASCII text that fits) are
    taken inline; any other goes through :mod:`.storable`, which keeps it or leaves it out
    with a note. The notes come in the order of the columns.

    Raises:
        RecordError: A field the store indexes is missing, or holds a value the store
            cannot keep (the message says which and why).
    """
    run_id, trial_id, eval_name, stimulus, model, variant = _keys(data)
    get = data.get
    notes: list[str] = []
    status = _text(get("status"), "status", _STATUS_LIMIT, notes) or "error"
    grade = get("gradeResult")
    if not isinstance(grade, dict):
        grade = None
    trajectory = get("trajectory")
    if not isinstance(trajectory, dict):
        trajectory = {}
    metrics = trajectory.get("metrics")
    if not isinstance(metrics, dict):
        metrics = {}
    error = get("error")
    if not isinstance(error, dict):
        error = {}
    events = trajectory.get("events")
    error_events, failed_tools = _events_of_note(events if isinstance(events, list) else ())
    index = get("trialIndex")
    if type(index) is not int or not 0 <= index <= INTEGER_MAX:
        index = count(index, "trialIndex", notes)
    score = real(grade.get("score"), "gradeResult.score", notes) if grade else None
    started = _text(get("startedAt"), "startedAt", _TIME_LIMIT, notes)
    duration = get("durationMs")
    if type(duration) is not int or not 0 <= duration <= INTEGER_MAX:
        duration = count(duration, "durationMs", notes)
    tokens = _dict(metrics.get("tokenUsage")).get("totalTokens")
    if type(tokens) is not int or not 0 <= tokens <= INTEGER_MAX:
        tokens = count(tokens, "trajectory.metrics.tokenUsage.totalTokens", notes)
    tool_calls = metrics.get("toolCallCount")
    if type(tool_calls) is not int or not 0 <= tool_calls <= INTEGER_MAX:
        tool_calls = count(tool_calls, "trajectory.metrics.toolCallCount", notes)
    turns = metrics.get("turnCount")
    if type(turns) is not int or not 0 <= turns <= INTEGER_MAX:
        turns = count(turns, "trajectory.metrics.turnCount", notes)
    errors = metrics.get("errorCount")
    if type(errors) is not int or not 0 <= errors <= INTEGER_MAX:
        errors = count(errors, "trajectory.metrics.errorCount", notes)
    end_reason = _text(trajectory.get("endReason"), "trajectory.endReason", _END_LIMIT, notes)
    error_code = optional_text(error.get("code"), "error.code", _LIMITS["error_code"], notes)
    graders, verdicts = _graders_of(grade, notes)
    outcome = OutcomeRow(
        outcome_id(run_id, trial_id),
        run_id,
        trial_id,
        eval_name,
        stimulus,
        model,
        variant,
        index or 0,
        status,
        verdict(status, grade),
        score,
        started,
        duration,
        tokens,
        tool_calls,
        turns,
        errors,
        end_reason,
        error_code,
        _tags_text(_dict(get("tags"))),
        _error_text(error, error_events) if error or error_events else None,
        verdicts,
    )
    return OutcomeRows(
        outcome,
        raw,
        graders,
        _tool_rows(metrics, failed_tools, notes),
        not events or bool(get("truncated") or trajectory.get("truncated")),
        notes,
    )


_TAGS_TEXT: dict[tuple[tuple[str, Any], ...], str] = {}
"""The ``tags`` column of tags whose values are all text, by their items (the records of
one stimulus repeat its tags); emptied when it holds :data:`_TAGS_KEPT` of them."""
_TAGS_KEPT = 4096


def _tags_text(tags: dict[str, Any]) -> str:
    """``json.dumps(tags)``, looked up by the tags' items when they were seen before.

    Only tags whose values are all text are kept, so a hit is always right: no other JSON
    value (a number, a boolean, null) equals a string, so items equal to those of kept
    tags hold the same text (a number could not be told from an equal boolean). Tags with
    an array or object value cannot be looked up (a list is not hashable): encoded."""
    if not tags:
        return "{}"
    items = tuple(tags.items())
    try:
        text = _TAGS_TEXT.get(items)
    except TypeError:  # an array or object among the values
        return json.dumps(tags)
    if text is not None:
        return text
    text = json.dumps(tags)
    if all(type(value) is str for value in tags.values()):
        if len(_TAGS_TEXT) >= _TAGS_KEPT:
            _TAGS_TEXT.clear()
        _TAGS_TEXT[items] = text
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
    if type(text) is str and text.isascii() and "\x00" not in text and "\n" not in text:
        return text  # the common case: nothing to replace
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
    return _graders_of(grade, [])[1]


def _graders_of(
    grade: Mapping[str, Any] | None, notes: list[str]
) -> tuple[list[GraderRow], str | None]:
    """One pass over a trial's grader details: its ``grader_stats`` rows and its
    :func:`grader_verdicts` text.

    A detail whose name and type are plain ASCII text that fits, with no NUL or line break,
    and whose score is a finite number (the common case) is taken inline; any other goes
    through :func:`_clean`, :func:`is_storable_text` and :func:`real`.
    """
    details = grade.get("details") if grade else None
    if not isinstance(details, list):
        return [], None
    name_limit, type_limit = _GRADER_NAME_LIMIT, _GRADER_TYPE_LIMIT
    rows: list[GraderRow] = []
    lines: list[str] = []
    for position, item in enumerate(details):
        if not isinstance(item, dict):
            continue
        get = item.get
        given = get("name") or get("type") or f"grader-{position}"
        failed_as = "error" if get("status") == "error" else None
        passed = bool(get("passed"))
        outcome = failed_as or ("pass" if passed else "fail")
        kind = get("type") or given
        score = get("score")
        if (
            type(given) is str
            and type(kind) is str
            and len(given) <= name_limit
            and len(kind) <= type_limit
            and type(score) is float
            and math.isfinite(score)
        ):
            both = given + kind
            if both.isascii() and "\x00" not in both and "\n" not in given:
                lines.append(f"{given}={outcome}")
                rows.append(
                    (
                        given,
                        kind,
                        passed,
                        score or 0.0,
                        failed_as or "success",
                        bool(get("required")),
                    )
                )
                continue
        lines.append(f"{_clean(given)}={outcome}")
        name = str(given)
        kind = str(kind)
        if not (is_storable_text(name, name_limit) and is_storable_text(kind, type_limit)):
            notes.append(
                f"gradeResult.details[{position}] has a name or type the store cannot keep "
                f"(a NUL, a lone surrogate, or over {name_limit} characters); left out of the "
                "grader statistics"
            )
            continue
        if type(score) is not float or not math.isfinite(score):  # else it is kept as is
            score = real(score, f"gradeResult.details[{position}].score", notes)
        rows.append(
            (name, kind, passed, score or 0.0, failed_as or "success", bool(get("required")))
        )
    return rows, "\n" + "\n".join(lines) + "\n" if lines else None


_GRADER_NAME_LIMIT = _limit(grader_stats.c.name)
_GRADER_TYPE_LIMIT = _limit(grader_stats.c.type)
_TOOL_LIMIT = _limit(tool_stats.c.tool)


def _tool_rows(metrics: Mapping[str, Any], failed: list[Any], notes: list[str]) -> list[ToolRow]:
    """The ``tool_stats`` rows of a trial, by tool name: calls from the metrics' breakdown,
    failures from the ``data`` of its failed tool results."""
    calls: dict[str, int] = {}
    breakdown = metrics.get("toolCallBreakdown")
    if isinstance(breakdown, dict):
        where = "a count of trajectory.metrics.toolCallBreakdown"
        for tool, calls_of_tool in breakdown.items():
            if type(calls_of_tool) is not int or not 0 <= calls_of_tool <= INTEGER_MAX:
                calls_of_tool = count(calls_of_tool, where, notes) or 0
            name = tool if type(tool) is str else str(tool)
            calls[name] = calls.get(name, 0) + calls_of_tool
    failures: dict[str, int] = {}
    for data in failed:
        tool = str(data.get("toolName") or "unknown")
        failures[tool] = failures.get(tool, 0) + 1
    tools = sorted(calls.keys() | failures.keys()) if failures else sorted(calls)
    limit = _TOOL_LIMIT
    rows = [
        (tool, calls.get(tool, 0), failures.get(tool, 0))
        for tool in tools
        if (tool.isascii() and "\x00" not in tool and len(tool) <= limit)  # the common case
        or is_storable_text(tool, limit)
    ]
    if len(rows) < len(tools):
        notes.append(
            f"{len(tools) - len(rows)} tool name(s) the store cannot keep (a NUL, a lone "
            f"surrogate, or over {limit} characters); left out of the tool statistics"
        )
    return rows


CELL_KEY = ("run_id", "eval_name", "stimulus", "model", "variant")
"""The key columns of ``cells``."""
GRADER_KEY = ("run_id", "name", "type", "stimulus")
"""The key columns of ``grader_stats``."""
TOOL_KEY = ("run_id", "tool")
"""The key columns of ``tool_stats``."""
DURATION_KEY = ("run_id", "bucket", "verdict")
"""The key columns of ``durations``."""


@dataclass(frozen=True)
class Sums:
    """What a batch adds to the running sums of one table: ``rows`` are tuples of the
    ``key`` columns' values then the ``sums`` columns' values, sorted by key (so concurrent
    writers lock rows in one order)."""

    table: Table
    key: tuple[str, ...]
    sums: tuple[str, ...]
    rows: list[tuple[Any, ...]]


def sums_of(batch: list[OutcomeRows]) -> list[Sums]:
    """What ``batch`` adds to the running sums: rows of ``cells``, ``grader_stats``,
    ``tool_stats`` and ``durations``, each value added outcome by outcome in the order of
    the batch."""
    cell_rows: dict[tuple[str, ...], list[Any]] = {}
    grader_rows: dict[tuple[str, ...], list[Any]] = {}
    tool_rows: dict[tuple[str, ...], list[int]] = {}
    duration_rows: dict[tuple[Any, ...], list[int]] = {}
    last_key: tuple[str, ...] = ()
    cell: list[Any] = []
    for rows in batch:
        (_, run_id, _, eval_name, stimulus, model, variant, _, _, verdict_of, score, _,
         duration, tokens, tool_calls, turns) = rows.outcome[:16]  # fmt: skip
        key = (run_id, eval_name, stimulus, model, variant)
        if key != last_key:  # the trials of a cell mostly come together
            last_key = key
            cell = cell_rows.setdefault(key, [0] * len(CELL_SUMS))
        cell[0] += 1
        if verdict_of == "pass":
            cell[1] += 1
            cell[2] += 1
            if score is not None:
                cell[4] += score
        elif verdict_of == "fail":
            cell[1] += 1
            if score is not None:
                cell[4] += score
        elif verdict_of == "error":
            cell[3] += 1
        if duration is not None:
            cell[5] += duration
            cell[6] += 1
            dkey = (run_id, floor(BUCKETS_PER_DOUBLING * log2(duration or 1)), verdict_of)
            slot = duration_rows.get(dkey)
            if slot is None:  # the columns of DURATION_SUMS
                duration_rows[dkey] = [1]
            else:
                slot[0] += 1
        if tokens is not None:
            cell[7] += tokens
            cell[8] += 1
        if tool_calls is not None:
            cell[9] += tool_calls
            cell[10] += 1
        if turns is not None:
            cell[11] += turns
            cell[12] += 1
        for name, kind, passed, grade, status, required in rows.graders:
            gkey = (run_id, name, kind, stimulus)
            stat = grader_rows.get(gkey)
            if stat is None:  # the columns of GRADER_SUMS
                stat = grader_rows[gkey] = [0] * len(GRADER_SUMS)
            stat[0] += 1
            stat[1] += not passed and status == "success"
            stat[2] += status == "error"
            stat[3] += grade
            stat[4] += required
        for tool, calls, failures in rows.tools:
            tkey = (run_id, tool)
            usage = tool_rows.get(tkey)
            if usage is None:  # the columns of TOOL_SUMS
                usage = tool_rows[tkey] = [0] * len(TOOL_SUMS)
            usage[0] += calls
            usage[1] += failures
            usage[2] += 1
    return [
        Sums(cells, CELL_KEY, CELL_SUMS, _sorted_rows(cell_rows)),
        Sums(grader_stats, GRADER_KEY, GRADER_SUMS, _sorted_rows(grader_rows)),
        Sums(tool_stats, TOOL_KEY, TOOL_SUMS, _sorted_rows(tool_rows)),
        Sums(durations, DURATION_KEY, DURATION_SUMS, _sorted_rows(duration_rows)),
    ]


def _sorted_rows(sums: Mapping[tuple[Any, ...], list[Any]]) -> list[tuple[Any, ...]]:
    return [(*key, *sums[key]) for key in sorted(sums)]


def duration_bucket(ms: int) -> int:
    """The ``durations`` bucket of a duration in milliseconds (:func:`sums_of` takes it
    inline: ``ms`` is never below 0, so ``ms or 1`` is ``max(ms, 1)``)."""
    return floor(BUCKETS_PER_DOUBLING * log2(max(ms, 1)))
