"""The REST API and the dashboard of ``vally serve``: a read-only Starlette app over a
history store.

Every endpoint is ``GET`` under ``/api/`` and answers JSON; lists are cursor-paginated
(:mod:`.pagination`) and every error, a wrong path or method included, has the envelope
``{"error": {"code", "message"}}``. ``/api/openapi.json`` describes it all. The dashboard
is ``/`` plus the assets shipped in the package, loaded into memory when the app is built:
no path from a request ever reaches the file system.

Every request passes the checks of :mod:`.access` first (its ``Host``, then its access
token). A parameter holding a NUL character is a 400 before any query. An error the
server did not expect is a 500 that says only that (the exception is logged, never sent:
it may hold a SQL statement and its parameters). A stored record keeps what its line
held, which JSON may not carry (``NaN``, a lone surrogate): such a number is sent as
``null`` and such a string as a ``\\u`` escape.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping
from importlib import resources
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.exc import DataError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from vally_serve import analysis, crossrun, graded, outcomequeries, runqueries
from vally_serve.access import AccessPolicy, HostCheck, TokenCheck
from vally_serve.metrics import METRICS
from vally_serve.openapi import openapi_document
from vally_serve.pagination import (
    SEQUENCE_KEY,
    TEXT_KEY,
    THREE_TEXT_KEY,
    ApiError,
    CursorShape,
    PageRequest,
    bad_request,
)
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
LOGGER = logging.getLogger("vally_serve")

Handler = Callable[[Connection, Mapping[str, str], Mapping[str, str]], dict[str, Any]]
"""An endpoint body: (connection, path parameters, query parameters) -> JSON object."""


def _page(params: Mapping[str, str], shape: CursorShape = TEXT_KEY) -> PageRequest:
    return PageRequest.parse(params, shape)


ENDPOINTS: dict[str, Handler] = {
    "/api/runs": lambda c, p, q: runqueries.list_runs(c, q, _page(q)),
    "/api/runs/{id}": lambda c, p, q: runqueries.run_detail(c, p["id"]),
    "/api/runs/{id}/outcomes": lambda c, p, q: outcomequeries.list_outcomes(
        c, {**q, "run": analysis.require_run(c, p["id"]).run_id}, _page(q, SEQUENCE_KEY)
    ),
    "/api/runs/{id}/stimulus-summaries": lambda c, p, q: runqueries.stimulus_summaries(
        c, p["id"], _page(q, SEQUENCE_KEY)
    ),
    "/api/runs/{id}/matrix": lambda c, p, q: analysis.matrix(c, p["id"], q, _page(q)),
    "/api/runs/{id}/ranking": lambda c, p, q: analysis.ranking(c, p["id"], q),
    "/api/runs/{id}/graders": lambda c, p, q: analysis.grader_failures(c, p["id"]),
    "/api/runs/{id}/tools": lambda c, p, q: analysis.tool_usage(c, p["id"]),
    "/api/runs/{id}/experiment": lambda c, p, q: crossrun.experiment(c, p["id"]),
    "/api/outcomes": lambda c, p, q: outcomequeries.list_outcomes(c, q, _page(q, SEQUENCE_KEY)),
    "/api/outcomes/{id}": lambda c, p, q: outcomequeries.outcome_detail(c, p["id"]),
    "/api/outcomes/{id}/trajectory": lambda c, p, q: outcomequeries.trajectory(
        c, p["id"], PageRequest.parse(q, SEQUENCE_KEY, default=200), q.get("q", "")
    ),
    "/api/compare": lambda c, p, q: crossrun.compare_runs(c, q, _page(q, THREE_TEXT_KEY)),
    "/api/compare/graded": lambda c, p, q: graded.graded_comparison(c, q),
    "/api/history": lambda c, p, q: crossrun.history(c, q, _page(q)),
    "/api/stimuli": lambda c, p, q: crossrun.stimuli(c, q, _page(q)),
    "/api/metrics": lambda c, p, q: {"metrics": [m.to_json() for m in METRICS]},
}
"""Every data endpoint by path (the OpenAPI document describes each)."""


class StoredJSONResponse(JSONResponse):
    """A JSON response that carries what a stored record may hold and JSON cannot:
    ``NaN`` and infinite numbers become ``null``, lone surrogates ``\\u`` escapes."""

    def render(self, content: Any) -> bytes:
        """The UTF-8 JSON text of ``content``."""
        try:
            return json.dumps(
                content, ensure_ascii=False, allow_nan=False, separators=(",", ":")
            ).encode("utf-8")
        except ValueError:  # a non-finite number, or a lone surrogate (not UTF-8)
            return json.dumps(_finite(content), allow_nan=False, separators=(",", ":")).encode()


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None (records nest no deeper than
    the ingest allowed, so the recursion is bounded)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def _json(body: Any, status: int = 200) -> JSONResponse:
    return StoredJSONResponse(body, status_code=status, headers=SECURITY_HEADERS)


def _check_parameters(path: Mapping[str, str], query: Mapping[str, str]) -> None:
    """Refuse parameters no column can equal (a NUL character: PostgreSQL refuses it).

    Raises:
        ApiError: A 400 naming the parameter.
    """
    for name, value in (*path.items(), *query.items()):
        if "\x00" in value:
            raise bad_request(f"the parameter {name!r} holds a NUL character (%00); remove it")


def _endpoint(store: Store, handler: Handler) -> Callable[[Request], Response]:
    def endpoint(request: Request) -> Response:
        path = {k: str(v) for k, v in request.path_params.items()}
        query = dict(request.query_params)
        try:
            _check_parameters(path, query)
            with store.read() as connection:
                return _json(handler(connection, path, query))
        except ApiError as exc:
            return _json(exc.envelope(), exc.status)
        except DataError:  # a parameter the database cannot compare with a column
            LOGGER.warning("a query refused the parameters of %s", request.url.path)
            error = bad_request("a parameter holds a value the store cannot compare; check it")
            return _json(error.envelope(), error.status)

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


def create_app(
    store: Store, *, cors: bool = False, access: AccessPolicy | None = None
) -> Starlette:
    """The app serving ``store``: the API under ``/api/`` and the dashboard at ``/``.

    Args:
        store: The open store (read only).
        cors: Allow cross-origin ``GET`` requests from any origin.
        access: The hosts the app answers to and its access token; None: loopback
            names and addresses only, no token.
    """
    policy = access if access is not None else AccessPolicy()
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
    middleware = [Middleware(HostCheck, policy=policy)]
    if cors:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=["*"],
                allow_methods=["GET"],
                allow_headers=["Authorization"],
            )
        )
    middleware.append(Middleware(TokenCheck, policy=policy))
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
    LOGGER.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    message = "the server failed to answer this request; its log says why"
    return _json({"error": {"code": "internal", "message": message}}, 500)
