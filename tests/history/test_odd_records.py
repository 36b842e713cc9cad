"""Records holding values no column can keep (NaN, Infinity, 10^30, a lone surrogate, a NUL,
an over-long id or name, an object where a string belongs), mixed with good ones in one
folder, on SQLite and on PostgreSQL: the good ones and every record that can be kept are
stored, the others are named with ``file:line`` and why, and nothing aborts the ingest."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from tests.history.conftest import vally
from tests.history.serving import LOCAL
from tests.history.synth import RunSpec, write_run
from vally_serve import schema
from vally_serve.ingest import ingest
from vally_serve.recordblocks import record_line
from vally_serve.store import open_store

pytest.importorskip("starlette")
from starlette.testclient import TestClient

from vally_serve.api import create_app

RUN = "odd"
NAN, INF = float("nan"), float("inf")


@dataclass(frozen=True)
class Odd:
    """One odd value put into one record: where, what, and what the ingest must say."""

    path: tuple[str | int, ...]
    value: Any
    message: str
    kept: bool
    column: str | None = None
    """The outcome column left empty when the record is kept."""


ODD = [
    Odd(("durationMs",), NAN, "durationMs is NaN", True, "duration_ms"),
    Odd(("durationMs",), INF, "durationMs is Infinity", True, "duration_ms"),
    Odd(("durationMs",), 1e30, "durationMs is 1e+30", True, "duration_ms"),
    Odd(("durationMs",), 10**30, "durationMs is a number of 31 digits", True, "duration_ms"),
    Odd(
        ("trajectory", "metrics", "tokenUsage", "totalTokens"),
        NAN,
        "trajectory.metrics.tokenUsage.totalTokens is NaN",
        True,
        "tokens",
    ),
    Odd(
        ("trajectory", "metrics", "tokenUsage", "totalTokens"),
        10**30,
        "totalTokens is a number of 31 digits",
        True,
        "tokens",
    ),
    Odd(("gradeResult", "score"), NAN, "gradeResult.score is NaN", True, "score"),
    Odd(
        ("gradeResult", "details", 0, "score"),
        -INF,
        "gradeResult.details[0].score is -Infinity",
        True,
    ),
    Odd(
        ("trajectory", "endReason"),
        {"kind": "completed"},
        "trajectory.endReason is a JSON object, not a string",
        True,
        "end_reason",
    ),
    Odd(("stimulusName",), "bad\ud800name", "stimulusName holds a lone surrogate", False),
    Odd(("stimulusName",), "nul\x00name", "stimulusName holds a NUL character", False),
    Odd(("runId",), "r" * 201, "runId is 201 characters long", False),
    Odd(("stimulusName",), "s" * 301, "stimulusName is 301 characters long", False),
]


@dataclass
class OddFolder:
    """A run folder with :data:`ODD` put into its records, one each."""

    path: Path
    results: Path
    records: int
    lines: dict[int, Odd]  # line number -> the odd value it holds
    trial_ids: dict[int, str]


def _put(record: dict[str, Any], path: tuple[str | int, ...], value: Any) -> None:
    target: Any = record
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value


def odd_folder(root: Path) -> OddFolder:
    """16 good records and one odd record per :data:`ODD`, and a summary that cannot be
    kept beside a good one."""
    run = write_run(
        root / "run",
        RunSpec(run_id=RUN, stimuli=15, models=("m",), trials=2, seed=7, trial_dirs=False),
    )
    results = run / "results.jsonl"
    records = [json.loads(line) for line in results.read_text().splitlines()]
    complete = [i for i, r in enumerate(records) if r["trajectory"] and r["gradeResult"]]
    assert len(complete) >= len(ODD)
    lines: dict[int, Odd] = {}
    for odd, index in zip(ODD, complete, strict=False):
        _put(records[index], odd.path, odd.value)
        lines[index + 1] = odd
    results.write_text("".join(json.dumps(r) + "\n" for r in records))
    summaries = run / "run-summary.jsonl"
    summary = json.loads(summaries.read_text())
    summaries.write_text(
        json.dumps({**summary, "evalName": "e" * 400}) + "\n" + json.dumps(summary)
    )
    trial_ids = {i + 1: str(r["trialId"]) for i, r in enumerate(records)}
    return OddFolder(run, results, len(records), lines, trial_ids)


def test_odd_records_are_kept_or_named_and_the_good_ones_stored(
    store_target: str, tmp_path: Path
) -> None:
    folder = odd_folder(tmp_path / "runs")
    result = vally("ingest", str(folder.path), "--store", store_target, "--json", cwd=tmp_path)
    report = json.loads(result.stdout)
    skipped = {n: o for n, o in folder.lines.items() if not o.kept}
    kept = {n: o for n, o in folder.lines.items() if o.kept}
    assert report["added"] == report["read"] == folder.records - len(skipped)
    assert report["runs"] == [RUN]
    for number, odd in skipped.items():
        assert any(
            p.startswith(f"{folder.results}:{number}: {odd.message}") and p.endswith("skipped")
            for p in report["problems"]
        ), (odd, report["problems"])
    summaries = folder.path / "run-summary.jsonl"
    assert f"{summaries}:1: evalName is 400 characters long" in "\n".join(report["problems"])
    assert len(report["problems"]) == len(skipped) + 1
    for number, odd in kept.items():
        assert any(
            p.startswith(f"{folder.results}:{number}: ") and odd.message in p
            for p in report["leftOut"]
        ), (odd, report["leftOut"])
    assert len(report["leftOut"]) == len(kept)

    store = open_store(store_target)
    try:
        with store.read() as connection:
            rows = {r.trial_id: r for r in connection.execute(select(schema.outcomes))}
            records = {
                row.trial_id: json.loads(record_line(connection, row))
                for row in connection.execute(
                    select(schema.outcomes.c.trial_id, schema.outcome_details).join(
                        schema.outcome_details,
                        schema.outcome_details.c.outcome_id == schema.outcomes.c.id,
                    )
                )
            }
            cell = connection.execute(
                select(func.sum(schema.cells.c.trials), func.sum(schema.cells.c.duration_n))
            ).one()
            summary_count = connection.execute(
                select(func.count()).select_from(schema.run_summaries)
            ).scalar_one()
        assert len(rows) == folder.records - len(skipped)
        for number, odd in kept.items():
            row = rows[folder.trial_ids[number]]
            if odd.column is not None:
                assert getattr(row, odd.column) is None, odd
            record: Any = records[folder.trial_ids[number]]  # the line is kept as it was
            for key in odd.path:
                record = record[key]
            assert record == odd.value or (record != record and odd.value != odd.value)
        assert cell == (len(rows), sum(1 for r in rows.values() if r.duration_ms is not None))
        assert summary_count == 1  # the good summary of the run

        client = TestClient(create_app(store), base_url=LOCAL)
        nan_line = next(n for n, o in kept.items() if o.value != o.value)
        outcome = rows[folder.trial_ids[nan_line]]
        page = client.get(f"/api/outcomes/{outcome.id}")
        assert page.status_code == 200, page.text
        assert page.json()["record"]["durationMs"] is None  # JSON has no NaN
        assert client.get(f"/api/runs/{RUN}").status_code == 200
    finally:
        store.close()

    again = json.loads(
        vally("ingest", str(folder.path), "--store", store_target, "--json", cwd=tmp_path).stdout
    )
    assert again["added"] == 0 and again["duplicates"] == report["read"]


def test_the_cli_names_what_was_skipped_and_left_out(tmp_path: Path) -> None:
    folder = odd_folder(tmp_path / "runs")
    result = vally("ingest", str(folder.path), "--store", str(tmp_path / "h.db"), cwd=tmp_path)
    skipped = sum(1 for o in ODD if not o.kept) + 1  # and the summary
    left_out = sum(1 for o in ODD if o.kept)
    stored = folder.records - skipped + 1
    assert (
        f"{stored} outcomes added, 0 already in the store, {skipped} lines skipped, "
        f"{left_out} values left out" in result.stdout
    )
    assert f"warning: skipped {folder.results}:" in result.stderr
    assert "correct it in the record" in result.stderr
    assert "stored without it" in result.stderr


def test_a_record_the_database_refuses_is_named_and_the_rest_stored(
    postgres_url: str, tmp_path: Path
) -> None:
    """PostgreSQL cannot index a key over about 2,700 bytes: no check of the ingest
    foresees it, and the record is reported with the database's reason."""
    run = write_run(
        tmp_path / "run",
        RunSpec(run_id="refused", stimuli=3, models=("m",), trials=2, trial_dirs=False),
    )
    results = run / "results.jsonl"
    records = [json.loads(line) for line in results.read_text().splitlines()]
    records[2]["trialId"] = secrets.token_hex(4000)  # random: the index cannot compress it
    results.write_text("".join(json.dumps(r) + "\n" for r in records))
    store = open_store(postgres_url)
    try:
        report = ingest(store, [run])
        assert report.added == report.read == len(records) - 1
        [problem] = report.problems
        assert (problem.file, problem.line) == (str(results), 3)
        assert problem.message.startswith("the store refused the record (")
        assert "INSERT" not in problem.message
        with store.read() as connection:
            stored = connection.execute(select(func.count()).select_from(schema.outcomes))
            assert stored.scalar_one() == len(records) - 1
    finally:
        store.close()
