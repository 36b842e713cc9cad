"""Who may use the API and what a request may carry: the ``Host`` check (DNS rebinding),
the access token, and pagination cursors crafted to break a query, on SQLite and on
PostgreSQL. Every request goes to the in-process app; ``evil.example`` only ever appears
in a ``Host`` header."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.history.conftest import postgres_database
from tests.history.serving import LOCAL

pytest.importorskip("starlette")
from starlette.testclient import TestClient

from vally_serve.access import TOKEN_COOKIE, AccessPolicy
from vally_serve.api import create_app
from vally_serve.ingest import ingest
from vally_serve.store import Store, open_store

TOKEN = "s3cret-token-of-the-test-0123"
LEAKS = ("select", "from ", "where", "sqlite", "psycopg", "parameters", "traceback", "outcomes.")
"""What an error body must never hold: pieces of SQL, of the driver or of a traceback."""


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, synthetic_runs: Path
) -> Iterator[Store]:
    targets: Iterator[str]
    if request.param == "sqlite":
        targets = iter([str(tmp_path_factory.mktemp("access") / "h.db")])
    else:
        targets = postgres_database()
    opened = open_store(next(targets))
    assert not ingest(opened, [synthetic_runs]).problems
    yield opened
    opened.close()
    next(targets, None)


@pytest.fixture(scope="module")
def client(store: Store) -> TestClient:
    return TestClient(create_app(store), base_url=LOCAL)


def cursor_of(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "host",
    ["evil.example", "evil.example:3200", "127.0.0.1.evil.example", "localhost.evil.example", ""],
)
def test_a_foreign_host_is_refused(client: TestClient, host: str) -> None:
    for path in ("/api/runs", "/", "/assets/app.js", "/api/nothing"):
        response = client.get(path, headers={"Host": host})
        assert response.status_code == 421, (path, host)
        assert response.json()["error"]["code"] == "misdirected_request"
        assert "run-a" not in response.text


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "127.0.0.1:3200", "localhost:3200", "LOCALHOST.", "[::1]:3200"]
)
def test_loopback_hosts_are_answered(client: TestClient, host: str) -> None:
    assert client.get("/api/runs", headers={"Host": host}).status_code == 200


def test_hosts_follow_the_bound_address_and_allowed_names(store: Store) -> None:
    proxied = AccessPolicy.for_bind("127.0.0.1", allowed_hosts=["vally.internal"])
    client = TestClient(create_app(store, access=proxied), base_url="http://vally.internal")
    assert client.get("/api/runs").status_code == 200
    assert client.get("/api/runs", headers={"Host": "evil.example"}).status_code == 421
    bound = AccessPolicy.for_bind("192.0.2.7")
    assert bound.accepts_host("192.0.2.7:3200") and not bound.accepts_host("192.0.2.8")
    everywhere = AccessPolicy.for_bind("0.0.0.0")  # an address cannot be rebound, a name can
    assert everywhere.accepts_host("192.0.2.8:3200") and everywhere.accepts_host("[2001:db8::1]")
    assert not everywhere.accepts_host("evil.example")


def test_the_token_is_required_on_every_request(store: Store) -> None:
    policy = AccessPolicy.for_bind("127.0.0.1", token=TOKEN)
    client = TestClient(create_app(store, access=policy), base_url=LOCAL)
    for path in ("/api/runs", "/", "/assets/app.js", "/api/openapi.json"):
        refused = client.get(path)
        assert refused.status_code == 401, path
        assert refused.json()["error"]["code"] == "unauthorized"
        assert "run-a" not in refused.text
        wrong = client.get(path, headers={"Authorization": "Bearer " + TOKEN[:-1] + "x"})
        assert wrong.status_code == 401
    bearer = client.get("/api/runs", headers={"Authorization": f"Bearer {TOKEN}"})
    assert bearer.status_code == 200 and bearer.json()["runs"]
    assert client.get("/api/runs", params={"token": TOKEN}).status_code == 200
    # the dashboard: the token moves from the address to a cookie
    entered = client.get("/", params={"token": TOKEN}, follow_redirects=False)
    assert entered.status_code == 303 and entered.headers["location"] == "/"
    cookie = entered.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert client.cookies.get(TOKEN_COOKIE) == TOKEN
    assert client.get("/").status_code == 200
    assert client.get("/api/runs").status_code == 200  # the dashboard's own requests
    client.cookies.clear()
    assert client.get("/api/runs").status_code == 401
    # a foreign Host is refused before the token is looked at
    foreign = client.get("/api/runs", headers={"Host": "evil.example", "Authorization": "x"})
    assert foreign.status_code == 421


CRAFTED = {
    "not base64": "%%%",
    "not JSON": cursor_of("[1, 2"),
    "an object": cursor_of({"a": 1}),
    "empty": cursor_of([]),
    "too many items": cursor_of(["a", "b", "c", "d"]),
    "a nested item": cursor_of(["a", ["b"]]),
    "an object item": cursor_of(["a", {"$gt": ""}]),
    "a number for a name": cursor_of([1, 2]),
    "a NUL": cursor_of(["a\u0000", "b"]),
    "a lone surrogate": cursor_of('["\\ud800", "b"]'),
    "an over-long name": cursor_of(["x" * 301, "b"]),
    "deeply nested": cursor_of("[" * 50_000 + "]" * 50_000)[:8000],
    "very deep": cursor_of("[" * 5_000),
    "oversized": cursor_of(["x" * 20_000, "y"]),
}
NUMBER_CURSORS = {
    "a string": cursor_of(["12"]),
    "beyond 64 bits": cursor_of([10**30]),
    "negative": cursor_of([-1]),
    "a fraction": cursor_of([1.5]),
    "a boolean": cursor_of([True]),
    "NaN": cursor_of("[NaN]"),
}


def _assert_bad_cursor(client: TestClient, path: str, cursor: str) -> None:
    response = client.get(path, params={"cursor": cursor})
    assert response.status_code == 400, (path, response.text[:300])
    body = response.json()
    assert body["error"]["code"] == "bad_request"
    assert "cursor" in body["error"]["message"]
    lowered = response.text.lower()
    assert not any(leak in lowered for leak in LEAKS), response.text[:300]


@pytest.mark.parametrize("name", sorted(CRAFTED))
def test_a_crafted_cursor_is_a_400_that_names_no_sql(client: TestClient, name: str) -> None:
    for path in (
        "/api/runs",
        "/api/stimuli",
        "/api/runs/run-a/matrix",
        "/api/history?stimulus=task-001",
        "/api/compare?runs=run-a,run-b",
        "/api/outcomes",
        "/api/outcomes/nope/trajectory",
    ):
        _assert_bad_cursor(client, path, CRAFTED[name])


@pytest.mark.parametrize("name", sorted(NUMBER_CURSORS))
def test_a_sequence_cursor_must_be_a_whole_number_in_range(client: TestClient, name: str) -> None:
    for path in ("/api/outcomes", "/api/runs/run-a/outcomes"):
        _assert_bad_cursor(client, path, NUMBER_CURSORS[name])


def test_the_cursors_the_server_makes_still_walk_every_page(client: TestClient) -> None:
    seen: list[str] = []
    params: dict[str, str | int] = {"limit": 7}
    while True:
        body = client.get("/api/outcomes", params=params).json()
        seen += [o["id"] for o in body["outcomes"]]
        if not body["page"]["hasMore"]:
            break
        params["cursor"] = body["page"]["nextCursor"]
    assert len(seen) == len(set(seen)) == body["page"]["total"]


@pytest.mark.parametrize(
    "path",
    [
        "/api/history?stimulus=task%00",
        "/api/outcomes?model=%00",
        "/api/runs/run%00a",
        "/api/stimuli?q=%00",
    ],
)
def test_a_nul_in_a_parameter_is_a_400(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 400, response.text[:300]
    assert "NUL" in response.json()["error"]["message"]
    assert not any(leak in response.text.lower() for leak in LEAKS)
