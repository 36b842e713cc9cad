"""``GET /api/compare/graded`` over a store on SQLite and on PostgreSQL: the endpoint gives
exactly vally's graded comparison of the two runs' records (computed here directly from the
same records), at the asked confidence level, and refuses bad requests."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.history.graded_runs import BASELINE, CANDIDATE, EVAL, records, write_graded_runs
from tests.history.serving import LOCAL
from tests.history.synth import RunSpec, _summary

pytest.importorskip("starlette")
from starlette.testclient import TestClient

from vally import RunSummaryRecord, TrialResultRecord
from vally_compare import RunTally, compare_tallies, comparison_json
from vally_serve.api import create_app
from vally_serve.ingest import ingest
from vally_serve.store import open_store

PATH = "/api/compare/graded"


@pytest.fixture
def client(store_target: str, tmp_path: Path) -> Iterator[TestClient]:
    store = open_store(store_target)
    report = ingest(store, [write_graded_runs(tmp_path / "runs")])
    assert not report.problems
    assert report.read == len(records(BASELINE)) + len(records(CANDIDATE))
    yield TestClient(create_app(store), base_url=LOCAL)
    store.close()


def expected(level: float = 0.95) -> dict[str, Any]:
    """The comparison computed directly from the records the runs were written with."""
    tallies = []
    for run_id in (BASELINE, CANDIDATE):
        tally = RunTally(run_id)
        tally.add_all(TrialResultRecord.model_validate(r) for r in records(run_id))
        spec = RunSpec(run_id=run_id, evals=(EVAL,), models=("gpt-a",))
        tally.add_summary(RunSummaryRecord.model_validate(_summary(spec, EVAL, None)))
        tallies.append(tally)
    comparison = compare_tallies(*tallies, confidence_level=level, method="cases")
    return json.loads(json.dumps(comparison_json(comparison)))


def test_the_endpoint_is_vallys_graded_comparison(client: TestClient) -> None:
    response = client.get(PATH, params={"baseline": BASELINE, "candidate": CANDIDATE})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body == expected()
    assert body["type"] == "graded-comparison" and body["confidenceLevel"] == 0.95
    assert [g["name"] for g in body["graders"]] == ["correct", "style"]
    style = next(g for g in body["graders"] if g["name"] == "style")
    assert style["paired"] == 5 and style["delta"] == pytest.approx((0.5 - 0.75) / 5)
    assert style["interval"]["level"] == 0.95
    by_id = {c["id"]: c for c in body["cases"]}
    outcomes = {case: (c["outcome"], c["flip"]) for case, c in by_id.items()}
    assert outcomes == {
        "checkout/tidy": ("regressed", None),
        "checkout/polish": ("improved", None),
        "checkout/login": ("regressed", "pass→fail"),
        "checkout/search": ("improved", "fail→pass"),
        "checkout/steady": ("unchanged", None),
    }
    assert "checkout/tidy" in body["regressed"] and "checkout/polish" in body["improved"]
    assert {(f["id"], f["flip"]) for f in body["flips"]} == {
        ("checkout/login", "pass→fail"),
        ("checkout/search", "fail→pass"),
    }
    assert body["failed"] == {"baseline": 0, "candidate": 0}
    assert [(m["id"], m["presentIn"]) for m in body["missing"]] == [("checkout/legacy", "baseline")]
    assert any("missing from the candidate" in w for w in body["warnings"])


def test_the_confidence_level_is_the_one_asked(client: TestClient) -> None:
    params = {"baseline": BASELINE, "candidate": CANDIDATE, "level": "0.8"}
    body = client.get(PATH, params=params).json()
    assert body == expected(0.8)
    wide = {g["name"]: g["interval"] for g in expected(0.95)["graders"]}
    for grader in body["graders"]:
        assert grader["interval"]["level"] == 0.8
        assert grader["interval"]["high"] - grader["interval"]["low"] < (
            wide[grader["name"]]["high"] - wide[grader["name"]]["low"]
        )


def test_the_runs_swapped(client: TestClient) -> None:
    body = client.get(PATH, params={"baseline": CANDIDATE, "candidate": BASELINE}).json()
    assert {(f["id"], f["flip"]) for f in body["flips"]} == {
        ("checkout/login", "fail→pass"),
        ("checkout/search", "pass→fail"),
    }
    missing = [(m["id"], m["presentIn"]) for m in body["missing"]]
    assert missing == [("checkout/legacy", "candidate")]


@pytest.mark.parametrize(
    ("params", "status", "words"),
    [
        ({}, 400, "baseline"),
        ({"baseline": BASELINE}, 400, "candidate"),
        ({"candidate": CANDIDATE}, 400, "baseline"),
        ({"baseline": BASELINE, "candidate": BASELINE}, 400, "same run"),
        ({"baseline": BASELINE, "candidate": CANDIDATE, "level": "0"}, 400, "level"),
        ({"baseline": BASELINE, "candidate": CANDIDATE, "level": "1"}, 400, "level"),
        ({"baseline": BASELINE, "candidate": CANDIDATE, "level": "95"}, 400, "level"),
        ({"baseline": BASELINE, "candidate": CANDIDATE, "level": "nan"}, 400, "level"),
        ({"baseline": BASELINE, "candidate": CANDIDATE, "level": "high"}, 400, "level"),
        ({"baseline": BASELINE, "candidate": CANDIDATE, "variantCandidate": "x"}, 400, "no trial"),
        ({"baseline": BASELINE, "candidate": "nope"}, 404, "nope"),
        ({"baseline": "nope", "candidate": CANDIDATE}, 404, "nope"),
    ],
)
def test_bad_requests(client: TestClient, params: dict[str, str], status: int, words: str) -> None:
    response = client.get(PATH, params=params)
    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] == ("bad_request" if status == 400 else "not_found")
    assert words in error["message"]


def test_the_endpoint_is_documented(client: TestClient) -> None:
    operation = client.get("/api/openapi.json").json()["paths"][PATH]["get"]
    required = {p["name"] for p in operation["parameters"] if p["required"]}
    assert required == {"baseline", "candidate"}
    names = {p["name"] for p in operation["parameters"]}
    assert {"level", "variantBaseline", "variantCandidate"} <= names
