"""Reads about outcomes: filtered lists (of one run or across runs), one outcome with its
grader details and artifacts, and its trajectory."""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from typing import Any

from sqlalchemy import ColumnElement, Connection, and_, func, or_, select, true

from vally_serve.pagination import PageRequest, bad_request, not_found, page_of
from vally_serve.recordblocks import record_line
from vally_serve.schema import cells, outcome_details, outcomes, runs

FILTERS = {
    "run": outcomes.c.run_id,
    "eval": outcomes.c.eval_name,
    "stimulus": outcomes.c.stimulus,
    "model": outcomes.c.model,
    "variant": outcomes.c.variant,
    "verdict": outcomes.c.verdict,
    "status": outcomes.c.status,
}
"""Query parameters that filter outcomes by equality (``model=`` matches "no model")."""

VERDICTS = ("pass", "fail", "error", "ungraded")
GRADER_VERDICTS = ("pass", "fail", "error")
"""What ``graderVerdict`` may be: how the grader named by ``grader`` judged the trial."""
SEARCHED = ("status", "grader", "error")
"""Filters that are no column of ``cells`` (their totals are counted)."""

CELL_COLUMNS = {
    "run": "run_id",
    "eval": "eval_name",
    "stimulus": "stimulus",
    "model": "model",
    "variant": "variant",
}
"""Filters that are columns of ``cells`` too (so totals are sums, not counts)."""


def outcome_json(row: Any) -> dict[str, Any]:
    """One outcome row as the API shows it."""
    m = row._mapping
    return {
        "id": m["id"],
        "runId": m["run_id"],
        "trialId": m["trial_id"],
        "evalName": m["eval_name"],
        "stimulus": m["stimulus"],
        "model": m["model"] or None,
        "variant": m["variant"] or None,
        "trialIndex": m["trial_index"],
        "status": m["status"],
        "verdict": m["verdict"],
        "score": m["score"],
        "startedAt": m["started_at"],
        "durationMs": m["duration_ms"],
        "tokens": m["tokens"],
        "toolCalls": m["tool_calls"],
        "turns": m["turns"],
        "errorEvents": m["error_events"],
        "endReason": m["end_reason"],
        "errorCode": m["error_code"],
        "tags": json.loads(m["tags"]) if m["tags"] else {},
    }


def outcome_filter(
    params: Mapping[str, str], matching: list[str] | None = None
) -> ColumnElement[bool]:
    """The WHERE clause of the outcome filters in ``params``.

    Args:
        params: The query parameters.
        matching: The stimulus names that contain ``q``, when they are few: outcomes are
            then found through the stimulus index instead of matching every name.

    Raises:
        ApiError: An unknown verdict.
    """
    conditions: list[ColumnElement[bool]] = []
    for name, column in FILTERS.items():
        if name in params:
            conditions.append(column == params[name])
    if params.get("verdict") and params["verdict"] not in VERDICTS:
        raise bad_request(f"verdict must be one of {', '.join(VERDICTS)}")
    conditions += _grader_and_error(params)
    if matching is not None:
        conditions.append(outcomes.c.stimulus.in_(matching))
    elif params.get("q"):
        conditions.append(outcomes.c.stimulus.contains(params["q"], autoescape=True))
    return and_(true(), *conditions)


def _grader_and_error(params: Mapping[str, str]) -> list[ColumnElement[bool]]:
    """``grader`` (with ``graderVerdict``, default ``fail``; ``any``: any result) and
    ``error`` (a part of the error text, ignoring case).

    Raises:
        ApiError: An unknown grader verdict, or one without a grader.
    """
    conditions: list[ColumnElement[bool]] = []
    wanted = params.get("graderVerdict", "fail")
    if wanted not in (*GRADER_VERDICTS, "any"):
        raise bad_request(f"graderVerdict must be one of {', '.join(GRADER_VERDICTS)} or any")
    if "graderVerdict" in params and not params.get("grader"):
        raise bad_request("graderVerdict needs grader=<name>: the grader whose verdict to match")
    if params.get("grader"):
        name = params["grader"].replace("\n", " ")
        column = outcomes.c.grader_verdicts
        verdicts = GRADER_VERDICTS if wanted == "any" else (wanted,)
        conditions.append(
            or_(*(column.contains(f"\n{name}={v}\n", autoescape=True) for v in verdicts))
        )
    if params.get("error"):
        conditions.append(outcomes.c.error_text.icontains(params["error"], autoescape=True))
    return conditions


FEW_STIMULI = 64
"""Up to this many stimuli matching ``q`` are looked up by name; more are matched while
scanning in order (then a page fills quickly)."""


def _matching(connection: Connection, params: Mapping[str, str]) -> list[str] | None:
    if not params.get("q"):
        return None
    c = cells.c
    query = select(c.stimulus).where(c.stimulus.contains(params["q"], autoescape=True))
    if "run" in params:
        query = query.where(c.run_id == params["run"])
    names = list(connection.execute(query.distinct().limit(FEW_STIMULI + 1)).scalars())
    return names if len(names) <= FEW_STIMULI else None


def _total(connection: Connection, params: Mapping[str, str], where: ColumnElement[bool]) -> int:
    """How many outcomes match: summed from ``cells`` when every filter is one of its
    columns (or the verdict), else counted."""
    if "status" in params or any(params.get(name) for name in SEARCHED):
        count = select(func.count()).select_from(outcomes).where(where)
        return int(connection.execute(count).scalar_one())
    c = cells.c
    amount = {
        "pass": c.passed,
        "fail": c.graded - c.passed,
        "error": c.errored,
        "ungraded": c.trials - c.graded - c.errored,
    }.get(params.get("verdict", ""), c.trials)
    conditions = [
        c[column] == params[name] for name, column in CELL_COLUMNS.items() if name in params
    ]
    if params.get("q"):
        conditions.append(c.stimulus.contains(params["q"], autoescape=True))
    total = connection.execute(select(func.sum(amount)).where(*conditions)).scalar_one()
    return int(total or 0)


def list_outcomes(
    connection: Connection, params: Mapping[str, str], page: PageRequest
) -> dict[str, Any]:
    """``GET /api/outcomes`` (and ``/api/runs/{id}/outcomes``): filtered, in ingestion order
    (``order=desc``: newest first).

    Raises:
        ApiError: A bad filter or ``order``.
    """
    order = params.get("order", "asc")
    if order not in ("asc", "desc"):
        raise bad_request("order must be asc or desc")
    where = outcome_filter(params, _matching(connection, params))
    total = _total(connection, params, where)
    query = select(outcomes).where(where)
    seq = outcomes.c.seq
    if page.after is not None:
        query = query.where(seq > page.after[0] if order == "asc" else seq < page.after[0])
    query = query.order_by(seq.asc() if order == "asc" else seq.desc()).limit(page.limit + 1)
    rows = connection.execute(query).all()
    shown, info = page_of(rows, page, total, lambda row: (row.seq,))
    return {"outcomes": [outcome_json(row) for row in shown], "page": info}


def _load(connection: Connection, outcome_id: str) -> tuple[Any, Any]:
    row = connection.execute(
        select(
            outcomes,
            outcome_details.c.record,
            outcome_details.c.block,
            outcome_details.c.block_start,
            outcome_details.c.block_length,
            outcome_details.c.events,
            outcome_details.c.artifacts,
            outcome_details.c.trial_dir,
            runs.c.name,
        )
        .join(outcome_details, outcome_details.c.outcome_id == outcomes.c.id)
        .join(runs, runs.c.run_id == outcomes.c.run_id)
        .where(outcomes.c.id == outcome_id)
    ).one_or_none()
    if row is None:
        raise not_found("outcome", outcome_id)
    return row, json.loads(record_line(connection, row))


def outcome_detail(connection: Connection, outcome_id: str) -> dict[str, Any]:
    """``GET /api/outcomes/{id}``: the outcome, its full record (grader details, error,
    stimulus, trajectory metrics and metadata; the events are left to the trajectory
    endpoint), its artifacts and its trial folder."""
    row, record = _load(connection, outcome_id)
    trajectory = record.get("trajectory")
    events = trajectory.get("events") if isinstance(trajectory, dict) else None
    count = len(events) if isinstance(events, list) else 0
    if isinstance(trajectory, dict):
        record["trajectory"] = {k: v for k, v in trajectory.items() if k != "events"}
    if not count and row.events:
        count = len(json.loads(zlib.decompress(row.events)))
    previous, following = neighbours(connection, row.run_id, row.seq)
    return {
        "outcome": outcome_json(row),
        "runName": row.name,
        "record": record,
        "eventCount": count,
        "artifacts": json.loads(row.artifacts),
        "trialDir": row.trial_dir,
        "previousId": previous,
        "nextId": following,
    }


def neighbours(connection: Connection, run_id: str, seq: int) -> tuple[str | None, str | None]:
    """The ids of the outcomes of the same run just before and just after ``seq`` (in
    ingestion order, the order of the run's outcome list), None at either end."""
    o = outcomes.c
    before = connection.execute(
        select(o.id).where(o.run_id == run_id, o.seq < seq).order_by(o.seq.desc()).limit(1)
    ).scalar_one_or_none()
    after = connection.execute(
        select(o.id).where(o.run_id == run_id, o.seq > seq).order_by(o.seq.asc()).limit(1)
    ).scalar_one_or_none()
    return before, after


def trajectory(
    connection: Connection, outcome_id: str, page: PageRequest, query: str = ""
) -> dict[str, Any]:
    """``GET /api/outcomes/{id}/trajectory``: the events, in order, from the record (or the
    trial folder's ``events.jsonl`` when the record carries none); ``source`` says which.

    With ``query`` (``q=``), only the events whose text (type, fields and values) contains
    it, ignoring case; each keeps its ``index`` in the whole trajectory and ``page.total``
    counts the matches."""
    row, record = _load(connection, outcome_id)
    trajectory = record.get("trajectory")
    events = trajectory.get("events") if isinstance(trajectory, dict) else None
    source = "record"
    if not isinstance(events, list) or not events:
        if row.events:
            events, source = json.loads(zlib.decompress(row.events)), "trial-folder"
        else:
            events, source = [], "none"
    start = int(page.after[0]) if page.after is not None else 0
    indexed = [
        {"index": i, **event} if isinstance(event, dict) else {"index": i}
        for i, event in enumerate(events)
    ]
    needle = query.casefold()
    if needle:
        indexed = [item for item in indexed if needle in _event_text(item)]
    window = [item for item in indexed if item["index"] >= start][: page.limit + 1]
    shown, info = page_of(window, page, len(indexed), lambda item: (item["index"] + 1,))
    return {"outcomeId": outcome_id, "source": source, "events": shown, "page": info}


def _event_text(event: dict[str, Any]) -> str:
    """What a transcript search looks in: every key and value of the event but its
    ``index``, as text, lower-cased (records nest no deeper than the ingest allowed)."""
    parts: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                parts.append(str(key))
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif value is not None:
            parts.append(str(value))

    walk({k: v for k, v in event.items() if k != "index"})
    return "\n".join(parts).casefold()
