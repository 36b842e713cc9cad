"""The judge-free comparison of two graded runs of the store (``GET /api/compare/graded``).

The figures are vally's own (:class:`vally_compare.RunTally`,
:func:`vally_compare.compare_tallies`, :func:`vally_compare.comparison_json`): this module
only streams each run's stored full records (and its summaries) into a tally, one record at
a time, so memory grows with the cases, not the trials.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from typing import Any

from sqlalchemy import Connection, select

from vally_serve.analysis import require_run
from vally_serve.pagination import bad_request
from vally_serve.recordblocks import LineReader
from vally_serve.schema import outcome_details, outcomes, run_summaries

DEFAULT_LEVEL = 0.95
STREAM_ROWS = 200
"""Records fetched from the database at a time."""


def _level(params: Mapping[str, str]) -> float:
    raw = params.get("level")
    if raw is None or raw == "":
        return DEFAULT_LEVEL
    try:
        level = float(raw)
    except ValueError:
        level = math.nan
    if not math.isfinite(level) or not 0 < level < 1:
        raise bad_request(f"level must be a confidence level between 0 and 1, e.g. 0.95: {raw!r}")
    return level


def _side(params: Mapping[str, str], role: str) -> tuple[str, str | None]:
    run_id = params.get(role, "")
    if not run_id:
        raise bad_request(
            f"the graded comparison needs ?{role}=<run id>: "
            "?baseline=<id>&candidate=<id>[&variantBaseline=..&variantCandidate=..]"
        )
    variant = params.get("variant" + role.capitalize())
    return run_id, variant if variant is not None and variant != "" else None


def _label(run_id: str, variant: str | None) -> str:
    return f"{run_id}/{variant}" if variant is not None else run_id


def stored_records(
    connection: Connection, run_id: str, variant: str | None, skipped: list[int]
) -> Iterator[Any]:
    """The run's trial records (of ``variant`` when given), in ingestion order, parsed one
    at a time; records that are not valid trial records are counted in ``skipped[0]``."""
    from vally import TrialResultRecord

    d = outcome_details.c
    query = (
        select(d.record, d.block, d.block_start, d.block_length)
        .join(outcomes, outcomes.c.id == outcome_details.c.outcome_id)
        .where(outcomes.c.run_id == run_id)
        .order_by(outcomes.c.seq)
        .execution_options(yield_per=STREAM_ROWS)
    )
    if variant is not None:
        query = query.where(outcomes.c.variant == variant)
    reader = LineReader(connection)
    for row in connection.execute(query):
        try:
            yield TrialResultRecord.model_validate(json.loads(reader.line(row)))
        except ValueError:
            skipped[0] += 1


def stored_summaries(connection: Connection, run_id: str, variant: str | None) -> list[Any]:
    """The run's summary records (of ``variant`` when given) that parse."""
    from vally import RunSummaryRecord

    query = select(run_summaries.c.record).where(run_summaries.c.run_id == run_id)
    if variant is not None:
        query = query.where(run_summaries.c.variant == variant)
    found = []
    for (text,) in connection.execute(query.order_by(run_summaries.c.eval_name)):
        try:
            found.append(RunSummaryRecord.model_validate(json.loads(text)))
        except ValueError:
            continue
    return found


def tally_of(connection: Connection, run_id: str, variant: str | None, skipped: list[int]) -> Any:
    """One run (or one variant of it) folded into a :class:`vally_compare.RunTally`."""
    from vally_compare import RunTally

    tally = RunTally(_label(run_id, variant))
    tally.add_all(stored_records(connection, run_id, variant, skipped))
    for summary in stored_summaries(connection, run_id, variant):
        tally.add_summary(summary)
    return tally


def graded_comparison(connection: Connection, params: Mapping[str, str]) -> dict[str, Any]:
    """``GET /api/compare/graded?baseline=A&candidate=B``: the ``graded-comparison`` record
    of the candidate against the baseline (per grader means, deltas and intervals at
    ``level``; improved, regressed, failed and missing cases; flips; warnings).

    Raises:
        ApiError: A missing or identical run, a level outside (0, 1) (400); an unknown
            run (404).
    """
    from vally_compare import compare_tallies, comparison_json

    baseline, candidate = _side(params, "baseline"), _side(params, "candidate")
    if baseline == candidate:
        raise bad_request(
            f"baseline and candidate are the same run ({_label(*baseline)}): compare two "
            "different runs, or two variants of an experiment"
        )
    level = _level(params)
    for run_id, _variant in (baseline, candidate):
        require_run(connection, run_id)
    skipped = [0]
    base = tally_of(connection, *baseline, skipped)
    cand = tally_of(connection, *candidate, skipped)
    for (run_id, variant), tally in ((baseline, base), (candidate, cand)):
        if not tally.records:
            of = f"variant {variant!r} of run {run_id!r}" if variant is not None else run_id
            raise bad_request(f"{of} has no trial records to compare")
    body: dict[str, Any] = comparison_json(
        compare_tallies(base, cand, confidence_level=level, method="cases")
    )
    if skipped[0]:
        body["warnings"] = [
            *body["warnings"],
            f"{skipped[0]} stored records are not valid trial records and were left out",
        ]
    return body
