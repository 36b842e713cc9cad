"""The REST API and the dashboard of ``vally serve``: a read-only Starlette app over a
history store.

Every endpoint is ``GET`` under ``/api/`` and answers JSON; lists are cursor-paginated
(:mod:`.pagination`) and every error, a wrong path or method included, has the envelope
``{"error": {"code", "message"}}``. ``/api/openapi.json`` describes it all. The dashboard
is ``/`` plus the assets shipped in the package, loaded into memory when the app is built:
no path from a request ever reaches the file system.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import resources
from typing import Any

from sqlalchemy import Connection
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from vally_serve import analysis, crossrun, graded, outcomequeries, runqueries
from vally_serve.metrics import METRICS
from vally_serve.openapi import openapi_document
from vally_serve.pagination import ApiError, PageRequest
from vally_serve.store import Store

SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'",
}
ASSET_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
ERROR_CODES = {400: "bad_request", 404: "not_found", 405: "method_not_allowed"}

Handler = Callable[[Connection, Mapping[str, str], Mapping[str, str]], dict[str, Any]]
"""An endpoint body: (connection, path parameters, query parameters) -> JSON object."""


def _page(params: Mapping[str, str]) -> PageRequest:
    return PageRequest.parse(params)


ENDPOINTS: dict[str, Handler] = {
    "/api/runs": lambda c, p, q: runqueries.list_runs(c, q, _page(q)),
    "/api/runs/{id}": lambda c, p, q: runqueries.run_detail(c, p["id"]),
    "/api/runs/{id}/outcomes": lambda c, p, q: outcomequeries.list_outcomes(
        c, {**q, "run": analysis.require_run(c, p["id"]).run_id}, _page(q)
    ),
    "/api/runs/{id}/matrix": lambda c, p, q: analysis.matrix(c, p["id"], q, _page(q)),
    "/api/runs/{id}/ranking": lambda c, p, q: analysis.ranking(c, p["id"], q),
    "/api/runs/{id}/graders": lambda c, p, q: analysis.grader_failures(c, p["id"]),
    "/api/runs/{id}/tools": lambda c, p, q: analysis.tool_usage(c, p["id"]),
    "/api/runs/{id}/experiment": lambda c, p, q: crossrun.experiment(c, p["id"]),
    "/api/outcomes": lambda c, p, q: outcomequeries.list_outcomes(c, q, _page(q)),
    "/api/outcomes/{id}": lambda c, p, q: outcomequeries.outcome_detail(c, p["id"]),
    "/api/outcomes/{id}/trajectory": lambda c, p, q: outcomequeries.trajectory(
        c, p["id"], PageRequest.parse(q, default=200)
    ),
    "/api/compare": lambda c, p, q: crossrun.compare_runs(c, q, _page(q)),
    "/api/compare/graded": lambda c, p, q: graded.graded_comparison(c, q),
    "/api/history": lambda c, p, q: crossrun.history(c, q, _page(q)),
    "/api/stimuli": lambda c, p, q: crossrun.stimuli(c, q, _page(q)),
    "/api/metrics": lambda c, p, q: {"metrics": [m.to_json() for m in METRICS]},
}
"""Every data endpoint by path (the OpenAPI document describes each)."""


def _json(body: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(body, status_code=status, headers=SECURITY_HEADERS)


def _endpoint(store: Store, handler: Handler) -> Callable[[Request], Response]:
    def endpoint(request: Request) -> Response:
        path = {k: str(v) for k, v in request.path_params.items()}
        query = dict(request.query_params)
        try:
            with store.read() as connection:
                return _json(handler(connection, path, query))
        except ApiError as exc:
            return _json(exc.envelope(), exc.status)

    return endpoint


def load_assets() -> dict[str, tuple[bytes, str]]:
    """The dashboard's files by name, read from the package once."""
    folder = resources.files("vally_serve") / "dashboard"
    assets: dict[str, tuple[bytes, str]] = {}
    for item in folder.iterdir():
        suffix = "." + item.name.rsplit(".", 1)[-1]
        if item.is_file() and suffix in ASSET_TYPES:
            assets[item.name] = (item.read_bytes(), ASSET_TYPES[suffix])
    return assets


def create_app(store: Store, *, cors: bool = False) -> Starlette:
    """The app serving ``store``: the API under ``/api/`` and the dashboard at ``/``.

    Args:
        store: The open store (read only).
        cors: Allow cross-origin ``GET`` requests from any origin.
    """
    assets = load_assets()
    document = openapi_document(sorted(ENDPOINTS))

    def asset(name: str) -> Response:
        if name not in assets:
            return _json(ApiError(404, "not_found", f"no asset {name!r}").envelope(), 404)
        body, media_type = assets[name]
        headers = {**SECURITY_HEADERS, "Cache-Control": "no-cache"}
        return Response(body, media_type=media_type, headers=headers)

    routes = [
        Route(path, _endpoint(store, handler), methods=["GET"])
        for path, handler in ENDPOINTS.items()
    ]
    routes += [
        Route("/api/openapi.json", lambda request: _json(document), methods=["GET"]),
        Route("/", lambda request: asset("index.html"), methods=["GET"]),
        Route(
            "/assets/{name}", lambda request: asset(request.path_params["name"]), methods=["GET"]
        ),
    ]
    middleware = []
    if cors:
        middleware.append(Middleware(CORSMiddleware, allow_origins=["*"], allow_methods=["GET"]))
    return Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={HTTPException: _http_error, Exception: _internal_error},
    )


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = ERROR_CODES.get(exc.status_code, "http_error")
    message = {
        404: f"no endpoint {request.url.path}; GET /api/openapi.json lists them",
        405: f"{request.method} is not allowed: the API is read-only (GET)",
    }.get(exc.status_code, str(exc.detail))
    return _json({"error": {"code": code, "message": message}}, exc.status_code)


async def _internal_error(request: Request, exc: Exception) -> Response:
    message = f"the server failed: {type(exc).__name__}: {exc}"
    return _json({"error": {"code": "internal", "message": message}}, 500)
