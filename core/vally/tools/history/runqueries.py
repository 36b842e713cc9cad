"""Reads about runs: the runs list, one run's detail and its duration histogram."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, and_, func, or_, select, true

from vally.tools.history.metrics import Counts, aggregate_columns, combine
from vally.tools.history.pagination import PageRequest, not_found, page_of
from vally.tools.history.schema import outcomes, run_summaries, runs

HISTOGRAM_BINS = 20


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


def cell_counts(connection: Connection, run_ids: list[str]) -> dict[str, list[Counts]]:
    """Per run, the counts of each stimulus group (eval, stimulus, model, variant)."""
    o = outcomes.c
    rows = connection.execute(
        select(o.run_id, *aggregate_columns())
        .where(o.run_id.in_(run_ids))
        .group_by(o.run_id, o.eval_name, o.stimulus, o.model, o.variant)
    )
    cells: dict[str, list[Counts]] = {run_id: [] for run_id in run_ids}
    for row in rows:
        cells[row.run_id].append(Counts.of(row))
    return cells


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
    cells = cell_counts(connection, [row.run_id for row in shown])
    return {
        "runs": [run_json(row, combine(cells[row.run_id])) for row in shown],
        "page": info,
    }


def run_detail(connection: Connection, run_id: str) -> dict[str, Any]:
    """``GET /api/runs/{id}``: the run, its metrics, evals, stimuli, models, variants, its
    summaries (config: thresholds, plugins, versions) and a duration histogram."""
    row = connection.execute(select(runs).where(runs.c.run_id == run_id)).one_or_none()
    if row is None:
        raise not_found("run", run_id)
    o = outcomes.c
    cells = cell_counts(connection, [run_id])[run_id]
    distinct = {
        name: [
            v
            for (v,) in connection.execute(
                select(column).where(o.run_id == run_id).distinct().order_by(column)
            )
        ]
        for name, column in (("evals", o.eval_name), ("models", o.model), ("variants", o.variant))
    }
    stimuli = connection.execute(
        select(func.count()).select_from(
            select(o.eval_name, o.stimulus).where(o.run_id == run_id).distinct().subquery()
        )
    ).scalar_one()
    summaries = [
        json.loads(text)
        for (text,) in connection.execute(
            select(run_summaries.c.record)
            .where(run_summaries.c.run_id == run_id)
            .order_by(run_summaries.c.eval_name, run_summaries.c.variant, run_summaries.c.shard)
        )
    ]
    return {
        "run": run_json(row, combine(cells)),
        **distinct,
        "stimulusCount": stimuli,
        "summaries": summaries,
        "durationHistogram": duration_histogram(connection, run_id),
    }


def duration_histogram(connection: Connection, run_id: str) -> list[dict[str, Any]]:
    """The trials' durations in :data:`HISTOGRAM_BINS` equal bins, counted by verdict."""
    o = outcomes.c
    in_run = and_(o.run_id == run_id, o.duration_ms.is_not(None))
    low, high = connection.execute(
        select(func.min(o.duration_ms), func.max(o.duration_ms)).where(in_run)
    ).one()
    if low is None:
        return []
    width = max(1, -(-(int(high) - int(low) + 1) // HISTOGRAM_BINS))
    index = (o.duration_ms - int(low)) // width
    counts: dict[int, dict[str, int]] = {}
    for bin_index, verdict, count in connection.execute(
        select(index, o.verdict, func.count()).where(in_run).group_by(index, o.verdict)
    ):
        counts.setdefault(int(bin_index), {})[verdict] = int(count)
    return [
        {
            "lowMs": int(low) + i * width,
            "highMs": int(low) + (i + 1) * width,
            "counts": counts.get(i, {}),
        }
        for i in range(HISTOGRAM_BINS)
        if int(low) + i * width <= int(high)
    ]


def totals(connection: Connection) -> tuple[int, int]:
    """How many runs and outcomes the store holds."""
    run_count = connection.execute(select(func.count()).select_from(runs)).scalar_one()
    outcome_count = connection.execute(select(func.count()).select_from(outcomes)).scalar_one()
    return int(run_count), int(outcome_count)
