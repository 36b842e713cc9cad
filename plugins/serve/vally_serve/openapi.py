"""The OpenAPI 3.1 document of the REST API (``GET /api/openapi.json``)."""

from __future__ import annotations

from typing import Any

from vally import __version__

_PAGE = ("limit", "cursor")
_OUTCOME_FILTERS = (
    "eval",
    "stimulus",
    "model",
    "variant",
    "verdict",
    "status",
    "q",
    "grader",
    "graderVerdict",
    "error",
    "order",
)

DESCRIPTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "/api/runs": ("List runs, newest first.", ("kind", "q", *_PAGE)),
    "/api/runs/{id}": (
        "One run: metrics, evals, models, variants, summaries (config; their per-stimulus "
        "lists left to /stimulus-summaries) and a duration histogram.",
        (),
    ),
    "/api/runs/{id}/stimulus-summaries": (
        "The per-stimulus entries of the run's summaries, paged.",
        _PAGE,
    ),
    "/api/runs/{id}/outcomes": ("The outcomes of a run, filtered.", (*_OUTCOME_FILTERS, *_PAGE)),
    "/api/runs/{id}/matrix": (
        "Score matrix: stimulus x model (or variant) for a metric.",
        ("metric", "axis", *_PAGE),
    ),
    "/api/runs/{id}/ranking": ("Models (or variants) ranked by pass rate.", ("axis",)),
    "/api/runs/{id}/graders": ("Grader failure analysis: failures per grader and where.", ()),
    "/api/runs/{id}/tools": ("Tool usage per tool: calls, failures, trials.", ()),
    "/api/runs/{id}/experiment": (
        "An experiment's variants against its baseline: deltas "
        "with 95% intervals over stimuli and McNemar's test.",
        (),
    ),
    "/api/outcomes": ("Outcomes across runs, filtered.", ("run", *_OUTCOME_FILTERS, *_PAGE)),
    "/api/outcomes/{id}": (
        "One outcome: its full record with grader details, its artifacts, and the ids of "
        "the run's outcomes before and after it.",
        (),
    ),
    "/api/outcomes/{id}/trajectory": (
        "The outcome's trajectory events, in order (q: only those whose text holds it).",
        ("q", *_PAGE),
    ),
    "/api/compare": ("Compare runs: totals and per-stimulus pass rates.", ("runs", *_PAGE)),
    "/api/compare/graded": (
        "Compare a candidate run with a baseline, judge-free: per-grader means, deltas and "
        "intervals, improved, regressed, failed and missing cases, flips and warnings "
        "(a graded-comparison record).",
        ("baseline", "candidate", "variantBaseline", "variantCandidate", "level"),
    ),
    "/api/history": (
        "One stimulus's results across runs, newest first.",
        ("stimulus", "eval", "model", "variant", *_PAGE),
    ),
    "/api/stimuli": ("Every stimulus in the store with the runs that ran it.", ("q", *_PAGE)),
    "/api/metrics": ("Self-describing metric definitions.", ()),
}

REQUIRED: dict[str, tuple[str, ...]] = {
    "/api/compare": ("runs",),
    "/api/history": ("stimulus",),
    "/api/compare/graded": ("baseline", "candidate"),
}
"""The query parameters each path cannot do without."""

PARAMETERS: dict[str, str] = {
    "limit": "Items per page, 1..500 (default 50; 200 for trajectories).",
    "cursor": "The nextCursor of the previous page.",
    "kind": "eval or experiment.",
    "q": "A part of the name to match.",
    "run": "A run id.",
    "eval": "An eval name.",
    "stimulus": "A stimulus name.",
    "model": "A model name (empty: no model).",
    "variant": "An experiment variant (empty: none).",
    "verdict": "pass, fail, error or ungraded.",
    "status": "success, error or cancelled.",
    "grader": "A grader name: only trials it judged graderVerdict (default fail).",
    "graderVerdict": "pass, fail, error or any: how the grader named by grader judged.",
    "error": "A part of the trial's error text (its error and error events), any case.",
    "order": "asc (ingestion order, the default) or desc.",
    "metric": "A metric name from /api/metrics (default passRate).",
    "axis": "model or variant (default: variant for experiments).",
    "runs": "Comma-separated run ids, two or more.",
    "baseline": "The baseline run's id.",
    "candidate": "The candidate run's id.",
    "variantBaseline": "Only this variant of the baseline run (an experiment).",
    "variantCandidate": "Only this variant of the candidate run (an experiment).",
    "level": "The confidence level of the intervals, between 0 and 1 (default 0.95).",
}


def _components() -> dict[str, Any]:
    return {
        "schemas": {
            "Error": {
                "type": "object",
                "required": ["error"],
                "properties": {
                    "error": {
                        "type": "object",
                        "required": ["code", "message"],
                        "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
                    }
                },
            },
            "Page": {
                "type": "object",
                "required": ["nextCursor", "limit", "hasMore", "total"],
                "properties": {
                    "nextCursor": {"type": ["string", "null"]},
                    "limit": {"type": "integer"},
                    "hasMore": {"type": "boolean"},
                    "total": {"type": "integer"},
                },
            },
        },
        "responses": {
            name: {
                "description": text,
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
            }
            for name, text in (
                ("BadRequest", "A bad parameter."),
                ("NotFound", "No such run, outcome or endpoint."),
            )
        },
    }


def _operation(path: str) -> dict[str, Any]:
    summary, names = DESCRIPTIONS[path]
    parameters = (
        [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}]
        if "{id}" in path
        else []
    )
    parameters += [
        {
            "name": n,
            "in": "query",
            "required": n in REQUIRED.get(path, ()),
            "description": PARAMETERS[n],
            "schema": {"type": "string"},
        }
        for n in names
    ]
    body: dict[str, Any] = {"type": "object"}
    if "cursor" in names:
        body = {
            "type": "object",
            "required": ["page"],
            "properties": {"page": {"$ref": "#/components/schemas/Page"}},
        }
    return {
        "get": {
            "summary": summary,
            "operationId": path.removeprefix("/api/").replace("/{id}", "_by_id").replace("/", "_")
            or "root",
            "parameters": parameters,
            "responses": {
                "200": {"description": "OK", "content": {"application/json": {"schema": body}}},
                "400": {"$ref": "#/components/responses/BadRequest"},
                "404": {"$ref": "#/components/responses/NotFound"},
            },
        }
    }


def openapi_document(paths: list[str]) -> dict[str, Any]:
    """The OpenAPI document describing ``paths`` (the keys of the API's endpoint table)."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "vally results API",
            "version": __version__,
            "description": "Read-only access to a vally history store. Lists are cursor "
            'paginated; errors use {"error": {"code", "message"}}.',
        },
        "paths": {path: _operation(path) for path in paths},
        "components": _components(),
    }
