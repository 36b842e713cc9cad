"""Aggregations over one run: the score matrix, the ranking, the grader failure analysis
and the tool usage. Each reads the running sums the ingest keeps (``cells``,
``grader_stats``, ``tool_stats``): a few thousand rows for a run of 100,000 outcomes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, and_, func, or_, select, tuple_

from vally_serve.metrics import BY_NAME, Counts, aggregate_columns
from vally_serve.pagination import PageRequest, bad_request, not_found, page_of
from vally_serve.schema import cells, grader_stats, runs, tool_stats

TOP_STIMULI = 5
"""Stimuli listed per failing grader."""


def require_run(connection: Connection, run_id: str) -> Any:
    """The run's row.

    Raises:
        ApiError: No such run.
    """
    row = connection.execute(select(runs).where(runs.c.run_id == run_id)).one_or_none()
    if row is None:
        raise not_found("run", run_id)
    return row


def axis_of(connection: Connection, run_id: str, requested: str | None) -> str:
    """The column axis of a run's matrix and ranking: ``variant`` for an experiment with
    several variants, else ``model`` (``axis=`` overrides).

    Raises:
        ApiError: An axis other than model or variant.
    """
    if requested is not None:
        if requested not in ("model", "variant"):
            raise bad_request("axis must be model or variant")
        return requested
    variants = connection.execute(
        select(func.count(func.distinct(cells.c.variant))).where(cells.c.run_id == run_id)
    ).scalar_one()
    return "variant" if variants > 1 else "model"


def metric_of(params: Mapping[str, str]) -> str:
    """The ``metric`` parameter (default ``passRate``).

    Raises:
        ApiError: An unknown metric.
    """
    metric = params.get("metric", "passRate")
    if metric not in BY_NAME:
        raise bad_request(f"unknown metric {metric!r}; GET /api/metrics lists them")
    return metric


def matrix(
    connection: Connection, run_id: str, params: Mapping[str, str], page: PageRequest
) -> dict[str, Any]:
    """``GET /api/runs/{id}/matrix``: stimulus x model (or variant) values of ``metric``,
    one row per (eval, stimulus), rows paginated."""
    require_run(connection, run_id)
    metric = metric_of(params)
    axis = axis_of(connection, run_id, params.get("axis"))
    o = cells.c
    column = o.variant if axis == "variant" else o.model
    columns = [
        v
        for (v,) in connection.execute(
            select(column).where(o.run_id == run_id).distinct().order_by(column)
        )
    ]
    keys = select(o.eval_name, o.stimulus).where(o.run_id == run_id).distinct()
    total = connection.execute(select(func.count()).select_from(keys.subquery())).scalar_one()
    if page.after is not None:
        last_eval, last_stimulus = page.after[0], page.after[-1]
        keys = keys.where(
            or_(o.eval_name > last_eval, and_(o.eval_name == last_eval, o.stimulus > last_stimulus))
        )
    row_keys = connection.execute(
        keys.order_by(o.eval_name, o.stimulus).limit(page.limit + 1)
    ).all()
    shown, info = page_of(row_keys, page, total, lambda key: (key[0], key[1]))
    values: dict[tuple[str, str], dict[str, dict[str, Any]]] = {(e, s): {} for e, s in shown}
    if shown:
        for row in connection.execute(
            select(o.eval_name, o.stimulus, column.label("col"), *aggregate_columns())
            .where(o.run_id == run_id, tuple_(o.eval_name, o.stimulus).in_(shown))
            .group_by(o.eval_name, o.stimulus, column)
        ):
            counts = Counts.of(row)
            values[(row.eval_name, row.stimulus)][row.col] = {
                "value": counts.value(metric),
                "trials": counts.trials,
                "graded": counts.graded,
            }
    return {
        "metric": BY_NAME[metric].to_json(),
        "axis": axis,
        "columns": columns,
        "rows": [{"evalName": e, "stimulus": s, "cells": values[(e, s)]} for e, s in shown],
        "page": info,
    }


def ranking(connection: Connection, run_id: str, params: Mapping[str, str]) -> dict[str, Any]:
    """``GET /api/runs/{id}/ranking``: models (or variants) by pass rate, then mean score."""
    require_run(connection, run_id)
    axis = axis_of(connection, run_id, params.get("axis"))
    o = cells.c
    column = o.variant if axis == "variant" else o.model
    entries = [
        {"name": row.col, **Counts.of(row).to_json()}
        for row in connection.execute(
            select(column.label("col"), *aggregate_columns())
            .where(o.run_id == run_id)
            .group_by(column)
        )
    ]
    entries.sort(key=lambda e: (-(e["passRate"] or -1), -(e["meanScore"] or -1), e["name"]))
    for rank, entry in enumerate(entries, 1):
        entry["rank"] = rank
    return {"axis": axis, "entries": entries}


def grader_failures(connection: Connection, run_id: str) -> dict[str, Any]:
    """``GET /api/runs/{id}/graders``: per grader, how often it failed or errored, most
    failing first, with the stimuli where it failed most."""
    require_run(connection, run_id)
    g = grader_stats.c
    entries: list[dict[str, Any]] = []
    for row in connection.execute(
        select(
            g.name,
            g.type,
            func.sum(g.results).label("n"),
            func.sum(g.failed).label("failed"),
            func.sum(g.errored).label("errored"),
            func.sum(g.score_sum).label("score"),
            func.sum(g.required).label("required"),
        )
        .where(g.run_id == run_id)
        .group_by(g.name, g.type)
    ):
        n, fails, errors = int(row.n), int(row.failed), int(row.errored)
        entries.append(
            {
                "name": row.name,
                "type": row.type,
                "results": n,
                "failed": fails,
                "errored": errors,
                "passed": n - fails - errors,
                "failRate": fails / n if n else None,
                "meanScore": round(float(row.score) / n, 6) if n else None,
                "required": int(row.required) > 0,
                "topFailingStimuli": [],
            }
        )
    entries.sort(key=lambda e: (-(e["failed"] + e["errored"]), e["name"]))
    by_name = {(e["name"], e["type"]): e for e in entries}
    for top in connection.execute(
        select(g.name, g.type, g.stimulus, g.failed)
        .where(g.run_id == run_id, g.failed > 0)
        .order_by(g.failed.desc(), g.stimulus)
        .limit(50 * TOP_STIMULI)
    ):
        listed = by_name[(top.name, top.type)]["topFailingStimuli"]
        if len(listed) < TOP_STIMULI:
            listed.append({"stimulus": top.stimulus, "failed": int(top.failed)})
    return {"graders": entries}


def tool_usage(connection: Connection, run_id: str) -> dict[str, Any]:
    """``GET /api/runs/{id}/tools``: per tool, its calls, failed results and the trials
    that used it, most called first."""
    require_run(connection, run_id)
    t = tool_stats.c
    trials = connection.execute(
        select(func.sum(cells.c.trials)).where(cells.c.run_id == run_id)
    ).scalar_one()
    trials = int(trials or 0)
    entries = []
    for row in connection.execute(
        select(t.tool, t.calls, t.failures, t.trials)
        .where(t.run_id == run_id)
        .order_by(t.calls.desc(), t.tool)
    ):
        calls, used = int(row.calls), int(row.trials)
        entries.append(
            {
                "tool": row.tool,
                "calls": calls,
                "failures": int(row.failures),
                "trials": used,
                "failureRate": int(row.failures) / calls if calls else None,
                "callsPerTrial": calls / used if used else None,
                "share": used / trials if trials else None,
            }
        )
    return {"trials": trials, "tools": entries}
