"""Reads across runs: comparing runs, an experiment's variants against its baseline, and
one stimulus's history."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, and_, func, or_, select, tuple_

from vally_serve import precomputed
from vally_serve.analysis import require_run
from vally_serve.metrics import Counts, aggregate_columns
from vally_serve.pagination import PageRequest, bad_request, page_of
from vally_serve.runqueries import run_json, run_totals
from vally_serve.schema import cells, runs

DELTA_METRICS = ("passRate", "meanScore", "durationMs", "tokens")
"""Metrics an experiment compares variant by variant."""


def compare_runs(
    connection: Connection, params: Mapping[str, str], page: PageRequest
) -> dict[str, Any]:
    """``GET /api/compare?runs=a,b``: each run's totals, and per (eval, stimulus, model) the
    pass rate in each run and the change from the first run to the last."""
    ids = [r for r in params.get("runs", "").split(",") if r]
    if len(ids) < 2 or len(set(ids)) != len(ids):
        raise bad_request("runs must name two or more different runs: ?runs=<id>,<id>")
    rows = {row.run_id: row for row in (require_run(connection, r) for r in ids)}
    totals = run_totals(connection, ids)
    o = cells.c
    keys = select(o.eval_name, o.stimulus, o.model).where(o.run_id.in_(ids)).distinct()
    total = connection.execute(select(func.count()).select_from(keys.subquery())).scalar_one()
    if page.after is not None:
        e, s, m = page.after[0], page.after[1], page.after[2]
        keys = keys.where(
            or_(
                o.eval_name > e,
                and_(o.eval_name == e, o.stimulus > s),
                and_(o.eval_name == e, o.stimulus == s, o.model > m),
            )
        )
    key_rows = connection.execute(
        keys.order_by(o.eval_name, o.stimulus, o.model).limit(page.limit + 1)
    ).all()
    shown, info = page_of(key_rows, page, total, lambda k: (k[0], k[1], k[2]))
    values: dict[tuple[str, str, str], dict[str, Any]] = {tuple(k): {} for k in shown}
    if shown:
        for row in connection.execute(
            select(o.eval_name, o.stimulus, o.model, o.run_id, *aggregate_columns())
            .where(o.run_id.in_(ids), tuple_(o.eval_name, o.stimulus, o.model).in_(shown))
            .group_by(o.eval_name, o.stimulus, o.model, o.run_id)
        ):
            counts = Counts.of(row)
            values[(row.eval_name, row.stimulus, row.model)][row.run_id] = counts.to_json()
    out_rows = []
    for (e, s, m), by_run in values.items():
        first, last = by_run.get(ids[0], {}), by_run.get(ids[-1], {})
        delta = None
        if first.get("passRate") is not None and last.get("passRate") is not None:
            delta = round(last["passRate"] - first["passRate"], 6)
        out_rows.append(
            {
                "evalName": e,
                "stimulus": s,
                "model": m or None,
                "runs": by_run,
                "passRateDelta": delta,
            }
        )
    return {
        "runs": [run_json(rows[r], totals[r]) for r in ids],
        "rows": out_rows,
        "page": info,
    }


def experiment(connection: Connection, run_id: str) -> dict[str, Any]:
    """``GET /api/runs/{id}/experiment``: every variant's metrics, and against the baseline
    the delta of each metric over stimuli (the stimulus is the unit), decided as the console
    decides it (the sign-flip test, shown with the interval that inverts it), and McNemar's
    exact test on pass/fail flips. The comparison is the one the ingest computed
    (:mod:`.precomputed`) while the run's sums are as they were then.

    Raises:
        ApiError: The run is not an experiment.
    """
    row = require_run(connection, run_id)
    if row.kind != "experiment":
        raise bad_request(f"run {run_id!r} is not an experiment")
    body = precomputed.cached(
        connection,
        run_id,
        precomputed.EXPERIMENT,
        lambda: experiment_comparison(connection, run_id, row.baseline),
    )
    return {
        "run": run_json(row, run_totals(connection, [run_id])[run_id]),
        "experiment": row.experiment,
        **body,
    }


def experiment_comparison(
    connection: Connection, run_id: str, wanted_baseline: str | None
) -> dict[str, Any]:
    """The experiment's baseline and its variants compared with it (the part of
    ``GET /api/runs/{id}/experiment`` computed from the run's cells)."""
    from vally_compare import mcnemar_from_pairs, metric_delta

    o = cells.c
    by_variant: dict[str, dict[tuple[str, str, str], Counts]] = {}
    for cell in connection.execute(
        select(o.variant, o.eval_name, o.stimulus, o.model, *aggregate_columns())
        .where(o.run_id == run_id)
        .group_by(o.variant, o.eval_name, o.stimulus, o.model)
    ):
        key = (cell.eval_name, cell.stimulus, cell.model)
        by_variant.setdefault(cell.variant, {})[key] = Counts.of(cell)
    per_variant = {
        v.variant: Counts.of(v)
        for v in connection.execute(
            select(o.variant, *aggregate_columns()).where(o.run_id == run_id).group_by(o.variant)
        )
    }
    baseline = (
        wanted_baseline if wanted_baseline in by_variant else next(iter(sorted(by_variant)), None)
    )
    variants = []
    for name in sorted(by_variant, key=lambda v: (v != baseline, v)):
        entry: dict[str, Any] = {
            "name": name,
            "isBaseline": name == baseline,
            **per_variant[name].to_json(),
            "deltas": {},
        }
        if baseline is not None and name != baseline:
            base, treat = by_variant[baseline], by_variant[name]
            shared = sorted(set(base) & set(treat))
            for metric in DELTA_METRICS:
                pairs = [
                    (k, b, t)
                    for k in shared
                    if (b := base[k].value(metric)) is not None
                    and (t := treat[k].value(metric)) is not None
                ]
                entry["deltas"][metric] = _delta_json(metric_delta(metric, pairs))
            flips = [
                (k, base[k].passed * 2 > base[k].graded, treat[k].passed * 2 > treat[k].graded)
                for k in shared
                if base[k].graded and treat[k].graded
            ]
            test = mcnemar_from_pairs(flips)
            entry["mcnemar"] = {
                "regressions": test.b,
                "improvements": test.c,
                "stimuli": test.n_units,
                "pValue": test.p_value,
            }
        variants.append(entry)
    return {"baseline": baseline, "variants": variants}


def _delta_json(delta: Any) -> dict[str, Any]:
    """One metric's delta as the console decides it: significant by the sign-flip test,
    shown with the interval that inverts it (the t interval when the test has none)."""
    estimate = delta.delta
    shown = estimate.decision_ci or estimate.ci
    return {
        "baseline": delta.baseline_mean,
        "variant": delta.treatment_mean,
        "delta": estimate.mean,
        "ciLow": shown.low if shown else None,
        "ciHigh": shown.high if shown else None,
        "level": shown.level if shown else None,
        "stimuli": estimate.n_stimuli,
        "significant": estimate.significant(),
        "pValue": estimate.p_value,
        "highVariance": delta.high_variance,
    }


def history(connection: Connection, params: Mapping[str, str], page: PageRequest) -> dict[str, Any]:
    """``GET /api/history?stimulus=NAME``: the stimulus's pass rate in every run that ran
    it, newest first (``eval``, ``model`` and ``variant`` narrow it)."""
    stimulus = params.get("stimulus")
    if not stimulus:
        raise bad_request("history needs ?stimulus=<name>")
    o, r = cells.c, runs.c
    where = [o.stimulus == stimulus]
    for name, column in (("eval", o.eval_name), ("model", o.model), ("variant", o.variant)):
        if name in params:
            where.append(column == params[name])
    started = func.coalesce(r.started_at, "")
    grouped = (
        select(o.run_id, started.label("sort"), r.name, r.started_at, *aggregate_columns())
        .join(runs, r.run_id == o.run_id)
        .where(*where)
        .group_by(o.run_id, r.started_at, r.name)
    ).subquery()
    total = connection.execute(select(func.count()).select_from(grouped)).scalar_one()
    query = select(grouped)
    if page.after is not None:
        s, rid = page.after[0], page.after[-1]
        query = query.where(
            or_(grouped.c.sort < s, and_(grouped.c.sort == s, grouped.c.run_id < rid))
        )
    rows = connection.execute(
        query.order_by(grouped.c.sort.desc(), grouped.c.run_id.desc()).limit(page.limit + 1)
    ).all()
    shown, info = page_of(rows, page, total, lambda row: (row.sort, row.run_id))
    points = [
        {
            "runId": row.run_id,
            "runName": row.name,
            "startedAt": row.started_at,
            **Counts.of(row).to_json(),
        }
        for row in shown
    ]
    return {"stimulus": stimulus, "points": points, "page": info}


def stimuli(connection: Connection, params: Mapping[str, str], page: PageRequest) -> dict[str, Any]:
    """``GET /api/stimuli``: every (eval, stimulus) in the store with the runs that ran it
    (``q`` filters by a part of the name)."""
    o = cells.c
    query = select(o.eval_name, o.stimulus, func.count(func.distinct(o.run_id)).label("runs"))
    if params.get("q"):
        query = query.where(o.stimulus.contains(params["q"], autoescape=True))
    grouped = query.group_by(o.eval_name, o.stimulus).subquery()
    total = connection.execute(select(func.count()).select_from(grouped)).scalar_one()
    listing = select(grouped)
    if page.after is not None:
        e, s = page.after[0], page.after[-1]
        listing = listing.where(
            or_(grouped.c.eval_name > e, and_(grouped.c.eval_name == e, grouped.c.stimulus > s))
        )
    rows = connection.execute(
        listing.order_by(grouped.c.eval_name, grouped.c.stimulus).limit(page.limit + 1)
    ).all()
    shown, info = page_of(rows, page, total, lambda row: (row.eval_name, row.stimulus))
    return {
        "stimuli": [
            {"evalName": r.eval_name, "stimulus": r.stimulus, "runs": int(r.runs)} for r in shown
        ],
        "page": info,
    }
