"""Reads about runs: the runs list, one run's detail and its duration histogram."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, and_, func, or_, select, true

from vally_serve.metrics import Counts, aggregate_columns
from vally_serve.pagination import PageRequest, not_found, page_of
from vally_serve.schema import (
    BUCKETS_PER_DOUBLING,
    cells,
    durations,
    outcomes,
    run_summaries,
    runs,
)


def run_json(row: Any, counts: Counts) -> dict[str, Any]:
    """One run as the API shows it: its fields, counts and metrics."""
    m = row._mapping
    return {
        "id": m["run_id"],
        "kind": m["kind"],
        "name": m["name"],
        "experiment": m["experiment"],
        "baseline": m["baseline"],
        "startedAt": m["started_at"],
        "completedAt": m["completed_at"],
        "vallyVersion": m["vally_version"],
        "source": m["source"],
        "ingestedAt": m["ingested_at"],
        **counts.to_json(),
    }


def run_totals(connection: Connection, run_ids: list[str]) -> dict[str, Counts]:
    """The counts and metrics of each run (one aggregate over its cells)."""
    c = cells.c
    rows = connection.execute(
        select(c.run_id, *aggregate_columns()).where(c.run_id.in_(run_ids)).group_by(c.run_id)
    )
    totals = {row.run_id: Counts.of(row) for row in rows}
    return {run_id: totals.get(run_id, Counts()) for run_id in run_ids}


def list_runs(
    connection: Connection, params: Mapping[str, str], page: PageRequest
) -> dict[str, Any]:
    """``GET /api/runs``: newest first; ``kind`` (eval, experiment) and ``q`` (a part of the
    name) filter."""
    r = runs.c
    started = func.coalesce(r.started_at, "")
    conditions = []
    if params.get("kind"):
        conditions.append(r.kind == params["kind"])
    if params.get("q"):
        conditions.append(r.name.contains(params["q"], autoescape=True))
    where = and_(true(), *conditions)
    total = connection.execute(select(func.count()).select_from(runs).where(where)).scalar_one()
    query = select(runs, started.label("sort")).where(where)
    if page.after is not None:
        last_started, last_id = page.after[0], page.after[-1]
        query = query.where(
            or_(started < last_started, and_(started == last_started, r.run_id < last_id))
        )
    rows = connection.execute(
        query.order_by(started.desc(), r.run_id.desc()).limit(page.limit + 1)
    ).all()
    shown, info = page_of(rows, page, total, lambda row: (row.sort, row.run_id))
    totals = run_totals(connection, [row.run_id for row in shown])
    return {
        "runs": [run_json(row, totals[row.run_id]) for row in shown],
        "page": info,
    }


def run_detail(connection: Connection, run_id: str) -> dict[str, Any]:
    """``GET /api/runs/{id}``: the run, its metrics, evals, stimuli, models, variants, its
    summaries (config: thresholds, plugins, versions) and a duration histogram."""
    row = connection.execute(select(runs).where(runs.c.run_id == run_id)).one_or_none()
    if row is None:
        raise not_found("run", run_id)
    c = cells.c
    total = run_totals(connection, [run_id])[run_id]
    distinct = {
        name: [
            v
            for (v,) in connection.execute(
                select(column).where(c.run_id == run_id).distinct().order_by(column)
            )
        ]
        for name, column in (("evals", c.eval_name), ("models", c.model), ("variants", c.variant))
    }
    stimuli = connection.execute(
        select(func.count()).select_from(
            select(c.eval_name, c.stimulus).where(c.run_id == run_id).distinct().subquery()
        )
    ).scalar_one()
    summaries = [_trimmed(summary) for summary in _summaries(connection, run_id)]
    return {
        "run": run_json(row, total),
        **distinct,
        "stimulusCount": stimuli,
        "summaries": summaries,
        "durationHistogram": duration_histogram(connection, run_id),
    }


def _summaries(connection: Connection, run_id: str) -> list[Any]:
    """The run's ``run-summary`` records, by eval, variant and shard."""
    s = run_summaries.c
    return [
        json.loads(text)
        for (text,) in connection.execute(
            select(s.record).where(s.run_id == run_id).order_by(s.eval_name, s.variant, s.shard)
        )
    ]


def _trimmed(summary: Any) -> Any:
    """A summary without its per-stimulus list (most of its size), which
    ``/api/runs/{id}/stimulus-summaries`` pages; ``stimulusSummaries`` says how many."""
    if not isinstance(summary, dict):
        return summary
    stimuli = summary.get("stimuli")
    trimmed = {k: v for k, v in summary.items() if k != "stimuli"}
    trimmed["stimulusSummaries"] = len(stimuli) if isinstance(stimuli, list) else 0
    return trimmed


def stimulus_summaries(connection: Connection, run_id: str, page: PageRequest) -> dict[str, Any]:
    """``GET /api/runs/{id}/stimulus-summaries``: the per-stimulus entries of the run's
    summaries, in the order of ``/api/runs/{id}``'s summaries, each with the ``evalName``,
    ``variant`` and ``shard`` of its summary.

    Raises:
        ApiError: No such run.
    """
    if connection.execute(select(runs.c.run_id).where(runs.c.run_id == run_id)).first() is None:
        raise not_found("run", run_id)
    entries: list[dict[str, Any]] = []
    for summary in _summaries(connection, run_id):
        if not isinstance(summary, dict) or not isinstance(summary.get("stimuli"), list):
            continue
        experiment = summary.get("experiment")
        origin = {
            "evalName": summary.get("evalName"),
            "variant": summary.get("variant"),
            "shard": experiment.get("shard") if isinstance(experiment, dict) else None,
        }
        entries += [{**origin, **item} for item in summary["stimuli"] if isinstance(item, dict)]
    start = int(page.after[0]) if page.after is not None else 0
    window = [
        {"index": start + i, **e} for i, e in enumerate(entries[start : start + page.limit + 1])
    ]
    shown, info = page_of(window, page, len(entries), lambda item: (item["index"] + 1,))
    return {"stimulusSummaries": shown, "page": info}


def duration_histogram(connection: Connection, run_id: str) -> list[dict[str, Any]]:
    """The trials' durations counted by verdict in logarithmic bins (four per doubling),
    from the shortest to the longest bin that holds a trial."""
    d = durations.c
    counts: dict[int, dict[str, int]] = {}
    for bucket, verdict, trials in connection.execute(
        select(d.bucket, d.verdict, d.trials).where(d.run_id == run_id)
    ):
        counts.setdefault(int(bucket), {})[verdict] = int(trials)
    if not counts:
        return []

    def edge(bucket: int) -> int:
        return round(2 ** (bucket / BUCKETS_PER_DOUBLING))

    return [
        {"lowMs": edge(b), "highMs": edge(b + 1), "counts": counts.get(b, {})}
        for b in range(min(counts), max(counts) + 1)
    ]


def totals(connection: Connection) -> tuple[int, int]:
    """How many runs and outcomes the store holds."""
    run_count = connection.execute(select(func.count()).select_from(runs)).scalar_one()
    outcome_count = connection.execute(select(func.count()).select_from(outcomes)).scalar_one()
    return int(run_count), int(outcome_count)
