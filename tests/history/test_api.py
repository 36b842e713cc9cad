"""The REST API over a store on SQLite and on PostgreSQL: every endpoint, the error
envelope, cursor pagination across pages, the OpenAPI document, read-only and CORS."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.history.conftest import postgres_database
from tests.history.serving import LOCAL

pytest.importorskip("starlette")
from starlette.testclient import TestClient

from vally_serve.api import ENDPOINTS, create_app
from vally_serve.ingest import ingest
from vally_serve.store import Store, open_store


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def store(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    synthetic_runs: Path,
    real_runs: Path,
) -> Iterator[Store]:
    if request.param == "sqlite":
        targets: Iterator[str] = iter([str(tmp_path_factory.mktemp("api") / "h.db")])
    else:
        targets = postgres_database()
    target = next(targets)
    opened = open_store(target)
    report = ingest(opened, [synthetic_runs, real_runs])
    assert not report.problems
    yield opened
    opened.close()
    next(targets, None)


@pytest.fixture(scope="module")
def client(store: Store) -> TestClient:
    return TestClient(create_app(store), base_url=LOCAL)


def get(client: TestClient, path: str, expect: int = 200, **params: Any) -> Any:
    response = client.get(path, params=params)
    assert response.status_code == expect, response.text
    return response.json()


def walk(client: TestClient, path: str, key: str, **params: Any) -> list[Any]:
    """Every item of a paginated list, page by page; checks the page envelope."""
    items: list[Any] = []
    cursor = None
    while True:
        body = get(client, path, **params, **({"cursor": cursor} if cursor else {}))
        page = body["page"]
        assert set(page) == {"nextCursor", "limit", "hasMore", "total"}
        assert len(body[key]) <= page["limit"]
        items += body[key]
        if not page["hasMore"]:
            assert page["nextCursor"] is None and len(items) == page["total"]
            return items
        cursor = page["nextCursor"]


def test_runs_newest_first_with_counts(client: TestClient) -> None:
    runs = walk(client, "/api/runs", "runs", limit=2)
    ids = [r["id"] for r in runs]
    assert len(ids) == len(set(ids)) == 5
    synthetic = [i for i in ids if i in ("run-a", "run-b", "exp-1")]
    assert synthetic == ["exp-1", "run-b", "run-a"]
    run_a = next(r for r in runs if r["id"] == "run-a")
    assert run_a["trials"] == 4 * 2 * 3
    assert run_a["passed"] + run_a["failed"] + run_a["errored"] + run_a["ungraded"] == 24
    assert run_a["passRate"] == pytest.approx(run_a["passed"] / run_a["graded"])
    experiments = get(client, "/api/runs", kind="experiment")["runs"]
    assert {r["id"] for r in experiments} >= {"exp-1"} and all(
        r["kind"] == "experiment" for r in experiments
    )
    assert [r["id"] for r in get(client, "/api/runs", q="styles")["runs"]] == ["exp-1"]


def test_run_detail(client: TestClient) -> None:
    body = get(client, "/api/runs/run-a")
    assert body["run"]["id"] == "run-a"
    assert body["models"] == ["gpt-a", "gpt-b"] and body["evals"] == ["suite"]
    assert body["stimulusCount"] == 4
    assert body["summaries"][0]["type"] == "run-summary"
    assert "stimuli" not in body["summaries"][0]  # paged by /stimulus-summaries
    assert body["summaries"][0]["stimulusSummaries"] == 8  # 4 stimuli x 2 models
    histogram = body["durationHistogram"]
    assert sum(sum(b["counts"].values()) for b in histogram) == 24
    assert all(b["lowMs"] < b["highMs"] for b in histogram)
    run = body["run"]
    assert 0 <= run["passToTheK"] <= run["passRate"] <= run["passAtK"] <= 1


def test_stimulus_summaries_are_paged(client: TestClient) -> None:
    entries = walk(client, "/api/runs/run-a/stimulus-summaries", "stimulusSummaries", limit=3)
    assert [(e["stimulusName"], e["model"]) for e in entries] == [
        (f"task-{s:03d}", m) for s in range(4) for m in ("gpt-a", "gpt-b")
    ]
    assert [e["index"] for e in entries] == list(range(8))
    assert {(e["evalName"], e["variant"], e["shard"]) for e in entries} == {("suite", None, None)}
    outcomes = walk(
        client, "/api/runs/run-a/outcomes", "outcomes", stimulus="task-001", model="gpt-b"
    )
    assert entries[3]["trials"] == len(outcomes)
    variants = walk(client, "/api/runs/exp-1/stimulus-summaries", "stimulusSummaries")
    assert [e["variant"] for e in variants] == ["baseline"] * 8 + ["better"] * 8 + ["worse"] * 8
    get(client, "/api/runs/nope/stimulus-summaries", 404)


def test_run_outcomes_filter_and_paginate(client: TestClient) -> None:
    everything = walk(client, "/api/runs/run-a/outcomes", "outcomes", limit=5)
    assert len(everything) == 24 and len({o["id"] for o in everything}) == 24
    failed = walk(client, "/api/runs/run-a/outcomes", "outcomes", verdict="fail", limit=3)
    assert failed and all(o["verdict"] == "fail" for o in failed)
    assert len(failed) == sum(o["verdict"] == "fail" for o in everything)
    model_b = walk(client, "/api/runs/run-a/outcomes", "outcomes", model="gpt-b")
    assert len(model_b) == 12 and {o["model"] for o in model_b} == {"gpt-b"}
    errors = walk(client, "/api/runs/run-a/outcomes", "outcomes", status="error")
    assert len(errors) == sum(o["status"] == "error" for o in everything)
    for verdict in ("pass", "error", "ungraded"):  # totals summed from the running sums
        body = get(client, "/api/runs/run-a/outcomes", verdict=verdict, model="gpt-a")
        expected = [o for o in everything if o["verdict"] == verdict and o["model"] == "gpt-a"]
        assert body["page"]["total"] == len(expected)
    matched = walk(client, "/api/runs/run-a/outcomes", "outcomes", q="01", limit=4)
    assert len(matched) == 6 and {o["stimulus"] for o in matched} == {"task-001"}
    assert get(client, "/api/runs/run-a/outcomes", q="nothing-like-it")["outcomes"] == []
    one = get(client, "/api/runs/run-a/outcomes", stimulus="task-001", model="gpt-a")
    assert [o["trialIndex"] for o in one["outcomes"]] == [0, 1, 2]


def test_matrix_for_each_metric(client: TestClient) -> None:
    metrics = get(client, "/api/metrics")["metrics"]
    names = {m["name"] for m in metrics}
    assert {"passRate", "meanScore", "durationMs", "tokens", "passAtK"} <= names
    for metric in names:
        body = get(client, "/api/runs/run-a/matrix", metric=metric)
        assert body["metric"]["name"] == metric and body["axis"] == "model"
        assert body["columns"] == ["gpt-a", "gpt-b"]
    rows = walk(client, "/api/runs/run-a/matrix", "rows", limit=3)
    assert [r["stimulus"] for r in rows] == ["task-000", "task-001", "task-002", "task-003"]
    outcomes = walk(
        client, "/api/runs/run-a/outcomes", "outcomes", stimulus="task-002", model="gpt-a"
    )
    graded = [o for o in outcomes if o["verdict"] in ("pass", "fail")]
    cell = rows[2]["cells"]["gpt-a"]
    expected = sum(o["verdict"] == "pass" for o in graded) / len(graded) if graded else None
    assert cell["value"] == expected and cell["trials"] == 3
    assert get(client, "/api/runs/exp-1/matrix")["axis"] == "variant"


def test_ranking_graders_tools(client: TestClient) -> None:
    ranking = get(client, "/api/runs/run-b/ranking")
    assert [e["rank"] for e in ranking["entries"]] == [1, 2]
    assert ranking["entries"][0]["name"] == "gpt-a"  # biased to pass in run-b
    graders = get(client, "/api/runs/run-a/graders")["graders"]
    assert graders[0]["name"] == "output-contains"
    fails = sum(
        o["verdict"] == "fail" for o in walk(client, "/api/runs/run-a/outcomes", "outcomes")
    )
    assert graders[0]["failed"] == fails
    assert sum(s["failed"] for s in graders[0]["topFailingStimuli"]) <= fails
    tools = get(client, "/api/runs/run-a/tools")
    assert tools["trials"] == 24
    calls = sum(t["calls"] for t in tools["tools"])
    assert calls == sum(
        o["toolCalls"] or 0 for o in walk(client, "/api/runs/run-a/outcomes", "outcomes")
    )
    assert any(t["failures"] for t in tools["tools"])


def test_outcomes_across_runs(client: TestClient) -> None:
    task = walk(client, "/api/outcomes", "outcomes", stimulus="task-000", model="gpt-a", limit=4)
    assert {o["runId"] for o in task} == {"run-a", "run-b", "exp-1"}
    newest = get(client, "/api/outcomes", order="desc", limit=1)["outcomes"][0]
    oldest = get(client, "/api/outcomes", limit=1)["outcomes"][0]
    assert newest["id"] != oldest["id"]
    assert all(
        o["variant"] == "better"
        for o in walk(client, "/api/outcomes", "outcomes", variant="better")
    )


def test_one_outcome_and_its_trajectory(client: TestClient) -> None:
    listed = get(client, "/api/runs/run-a/outcomes", verdict="fail", limit=1)["outcomes"][0]
    body = get(client, f"/api/outcomes/{listed['id']}")
    assert body["outcome"] == listed
    details = body["record"]["gradeResult"]["details"]
    assert details[0]["evidence"] == "'done' not in the output"
    assert "events" not in body["record"]["trajectory"]
    assert body["artifacts"][0]["path"] == "notes.txt"
    events = walk(client, f"/api/outcomes/{listed['id']}/trajectory", "events", limit=2)
    assert len(events) == body["eventCount"] > 2
    assert [e["index"] for e in events] == list(range(len(events)))
    assert events[0]["type"] == "user_message"
    assert any(e["type"] == "tool_call" and e["data"]["arguments"] for e in events)


def test_an_outcome_names_its_neighbours_in_the_run(client: TestClient) -> None:
    listed = get(client, "/api/runs/run-a/outcomes", limit=3)["outcomes"]
    first, second, third = (get(client, f"/api/outcomes/{o['id']}") for o in listed)
    assert first["previousId"] is None and first["nextId"] == listed[1]["id"]
    assert second["previousId"] == listed[0]["id"] and second["nextId"] == listed[2]["id"]
    assert third["previousId"] == listed[1]["id"]
    last = walk(client, "/api/runs/run-a/outcomes", "outcomes", limit=500)[-1]
    assert get(client, f"/api/outcomes/{last['id']}")["nextId"] is None


def test_a_trajectory_is_searched_ignoring_case(client: TestClient) -> None:
    for listed in walk(client, "/api/runs/run-a/outcomes", "outcomes", limit=500):
        path = f"/api/outcomes/{listed['id']}/trajectory"
        events = walk(client, path, "events")
        denied = [e["index"] for e in events if e["data"].get("result") == "permission denied"]
        if denied:
            break
    else:
        pytest.fail("no trial of run-a has a failed tool result")
    found = walk(client, path, "events", q="PERMISSION Denied", limit=1)
    assert [e["index"] for e in found] == denied
    assert get(client, path, q="Permission")["page"]["total"] == len(denied)
    calls = walk(client, path, "events", q="src/file0.py")
    assert [e["type"] for e in calls] == ["tool_call"]
    assert get(client, path, q="no such text anywhere")["events"] == []


def test_outcomes_filtered_by_error_text(client: TestClient) -> None:
    errored = walk(client, "/api/outcomes", "outcomes", run="run-a", status="error")
    assert errored  # synthetic trials that errored say "agent timed out"
    found = walk(client, "/api/outcomes", "outcomes", run="run-a", error="Agent TIMED")
    assert [o["id"] for o in found] == [o["id"] for o in errored]
    assert get(client, "/api/runs/run-a/outcomes", error="VALLY_TIMEOUT")["page"]["total"] == (
        len(errored)
    )
    assert get(client, "/api/runs/run-a/outcomes", error="no such error")["outcomes"] == []
    assert get(client, "/api/runs/run-a/outcomes", error="100%_")["outcomes"] == []


def test_outcomes_filtered_by_grader(client: TestClient) -> None:
    def ids(**params: str) -> list[str]:
        return [o["id"] for o in walk(client, "/api/runs/run-a/outcomes", "outcomes", **params)]

    failed, passed = ids(verdict="fail"), ids(verdict="pass")
    assert failed and passed
    assert ids(grader="output-contains") == failed  # the one grader: its verdict is the trial's
    assert ids(grader="output-contains", graderVerdict="fail") == failed
    assert ids(grader="output-contains", graderVerdict="pass") == passed
    assert set(ids(grader="output-contains", graderVerdict="any")) == set(failed + passed)
    assert ids(grader="output-contains", graderVerdict="pass", verdict="fail") == []
    assert ids(grader="output") == []  # a whole name, not a part of one
    body = get(client, "/api/runs/run-a/outcomes", 400, grader="x", graderVerdict="maybe")
    assert "graderVerdict must be one of pass, fail, error or any" in body["error"]["message"]
    body = get(client, "/api/runs/run-a/outcomes", 400, graderVerdict="pass")
    assert "graderVerdict needs grader=<name>" in body["error"]["message"]


def test_compare_runs(client: TestClient) -> None:
    body = get(client, "/api/compare", runs="run-a,run-b")
    assert [r["id"] for r in body["runs"]] == ["run-a", "run-b"]
    rows = walk(client, "/api/compare", "rows", runs="run-a,run-b", limit=3)
    assert len(rows) == 8  # 4 stimuli x 2 models
    for row in rows:
        a, b = row["runs"]["run-a"]["passRate"], row["runs"]["run-b"]["passRate"]
        if a is not None and b is not None:
            assert row["passRateDelta"] == pytest.approx(b - a)


def test_experiment_deltas_and_intervals(client: TestClient) -> None:
    body = get(client, "/api/runs/exp-1/experiment")
    assert body["experiment"] == "styles" and body["baseline"] == "baseline"
    variants = {v["name"]: v for v in body["variants"]}
    assert variants["baseline"]["isBaseline"] and not variants["baseline"]["deltas"]
    better, worse = (
        variants["better"]["deltas"]["passRate"],
        variants["worse"]["deltas"]["passRate"],
    )
    assert better["delta"] > 0 > worse["delta"]
    assert better["ciLow"] <= better["delta"] <= better["ciHigh"]
    assert better["stimuli"] == 8
    assert worse["significant"]  # 0.5 -> 0.1 over 8 stimuli
    assert variants["worse"]["mcnemar"]["regressions"] >= 1
    for variant in variants.values():
        for delta in variant["deltas"].values():
            # the interval shown is the one the decision reads: never a contradiction
            if delta["significant"]:
                assert delta["ciLow"] > 0 or delta["ciHigh"] < 0
            elif delta["ciLow"] is not None and delta["pValue"] is not None:
                assert delta["ciLow"] <= 0 <= delta["ciHigh"] or delta["pValue"] > 0.05


def test_history_and_stimuli(client: TestClient) -> None:
    points = walk(client, "/api/history", "points", stimulus="task-000", limit=1)
    assert [p["runId"] for p in points] == ["exp-1", "run-b", "run-a"]
    assert points[2]["trials"] == 6  # 2 models x 3 trials in run-a
    narrowed = get(client, "/api/history", stimulus="task-000", model="gpt-b")["points"]
    assert [p["runId"] for p in narrowed] == ["run-b", "run-a"]
    stimuli = walk(client, "/api/stimuli", "stimuli", limit=4)
    keys = [(s["evalName"], s["stimulus"]) for s in stimuli]
    assert keys == sorted(keys) and len(keys) == len(set(keys))
    assert next(s for s in stimuli if s["stimulus"] == "task-000")["runs"] == 3


@pytest.mark.parametrize(
    ("path", "status", "code"),
    [
        ("/api/runs/nope", 404, "not_found"),
        ("/api/runs/nope/outcomes", 404, "not_found"),
        ("/api/runs/nope/matrix", 404, "not_found"),
        ("/api/runs/nope/ranking", 404, "not_found"),
        ("/api/runs/nope/graders", 404, "not_found"),
        ("/api/runs/nope/tools", 404, "not_found"),
        ("/api/runs/nope/experiment", 404, "not_found"),
        ("/api/runs/run-a/experiment", 400, "bad_request"),
        ("/api/outcomes/nope", 404, "not_found"),
        ("/api/outcomes/nope/trajectory", 404, "not_found"),
        ("/api/runs/run-a/matrix?metric=vibes", 400, "bad_request"),
        ("/api/runs/run-a/matrix?axis=colour", 400, "bad_request"),
        ("/api/runs?limit=0", 400, "bad_request"),
        ("/api/runs?limit=many", 400, "bad_request"),
        ("/api/runs?cursor=%%%", 400, "bad_request"),
        ("/api/outcomes?verdict=maybe", 400, "bad_request"),
        ("/api/outcomes?order=up", 400, "bad_request"),
        ("/api/compare?runs=run-a", 400, "bad_request"),
        ("/api/compare?runs=run-a,nope", 404, "not_found"),
        ("/api/history", 400, "bad_request"),
        ("/api/nothing", 404, "not_found"),
        ("/assets/../../etc/passwd", 404, "not_found"),
        ("/assets/..%2F..%2Fschema.py", 404, "not_found"),
        ("/assets/%2Fetc%2Fpasswd", 404, "not_found"),
    ],
)
def test_errors_use_one_envelope(client: TestClient, path: str, status: int, code: str) -> None:
    response = client.get(path)
    assert response.status_code == status
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}
    assert body["error"]["code"] == code and body["error"]["message"]


def test_the_api_is_read_only(client: TestClient) -> None:
    for method in ("post", "put", "delete", "patch"):
        response = getattr(client, method)("/api/runs")
        assert response.status_code == 405
        assert response.json()["error"]["code"] == "method_not_allowed"


def test_openapi_document_describes_every_endpoint(client: TestClient) -> None:
    document = get(client, "/api/openapi.json")
    assert document["openapi"].startswith("3.")
    assert set(document["paths"]) == set(ENDPOINTS)
    for path, item in document["paths"].items():
        operation = item["get"]
        assert operation["summary"] and "200" in operation["responses"]
        if "{id}" in path:
            assert operation["parameters"][0] == {
                "name": "id",
                "in": "path",
                "required": True,
                "schema": {"type": "string"},
            }
    json.dumps(document)


def test_dashboard_is_served_from_the_package(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "/assets/app.js" in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    script = client.get("/assets/app.js")
    assert script.status_code == 200 and "text/javascript" in script.headers["content-type"]
    for url in ("http://", "https://"):
        assert url not in page.text.replace("http://www.w3.org", "")
    assert "https://" not in script.text and "cdn" not in script.text.lower()


def test_cors_is_off_unless_asked(store: Store) -> None:
    origin = {"Origin": "http://example.test"}
    plain = TestClient(create_app(store), base_url=LOCAL).get("/api/metrics", headers=origin)
    assert "access-control-allow-origin" not in plain.headers
    cors = TestClient(create_app(store, cors=True), base_url=LOCAL).get(
        "/api/metrics", headers=origin
    )
    assert cors.headers["access-control-allow-origin"] == "*"
