"""What ``vally ingest`` stores, row for row: every table of a store filled from a fixed set
of run folders (an eval run with trial folders, an experiment, records holding values no
column keeps, and records written by hand for the rarer branches: error events, graders
that errored or have no name, tags that are not all text, a tool name that is not ASCII, a
trial repeated within a batch and across batches), on SQLite and on PostgreSQL, against
the rows written down in ``store_rows.json``.

The rows were written down from the ingest as it stood before its per-record work was cut
(tuples instead of dicts, the rows built in one pass), so a faster ingest must store the
same thing. After a change meant to alter what is stored, write them again with
``VALLY_WRITE_STORE_ROWS=1 pytest tests/history/test_store_rows.py -k sqlite`` and read
the diff.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from tests.history.storedump import table_rows, tables
from tests.history.synth import RunSpec, write_run
from tests.history.test_odd_records import odd_folder
from vally_serve.ingest import ingest
from vally_serve.store import open_store

EXPECTED = Path(__file__).with_name("store_rows.json")
LONG = 400
"""Texts longer than this (and all bytes) are written down as a hash of their content."""


def _complete(results: Path, skip: int = 0) -> tuple[int, dict[str, Any]]:
    """The index and record of a line of ``results`` with a trajectory and a grade (the
    first after ``skip`` of them)."""
    found = [
        (index, record)
        for index, record in enumerate(
            json.loads(line) for line in results.read_text().splitlines()
        )
        if record["trajectory"] and record["gradeResult"]
    ]
    return found[skip]


def _hand_written(root: Path, eval_results: Path) -> Path:
    """A run folder of records made from one of the eval run's, each for a rarer branch of
    the rows, with a line of another type, a summary among the results (as older versions
    wrote them) and a trial repeated."""
    _index, base = _complete(eval_results)
    records: list[dict[str, Any]] = []

    def add(trial: str, **fields: Any) -> dict[str, Any]:
        record = copy.deepcopy(base)
        record.update(runId="rows-hand", trialId=trial, **fields)
        records.append(record)
        return record

    errors = add("errors", status="error")
    errors["error"] = {"phase": "grade", "code": "E1", "message": "line one\nline\x00two"}
    errors["trajectory"]["events"] += [
        {"type": "error", "data": {"code": "TOOL", "message": "disk full"}},
        {"type": "error", "data": "not an object"},
        {"type": "tool_result", "data": {"success": False}},  # no tool name: "unknown"
        "not an event",
    ]
    add("empty-code", status="error")["error"] = {"code": "", "message": "no code"}
    add("code-only", status="error")["error"] = {"code": "E2"}
    graders = add("graders")
    graders["gradeResult"]["details"] = [
        {"type": "llm-judge", "passed": False, "status": "error", "score": 0.25, "required": 1},
        {"passed": True, "score": 1},
        "not a detail",
        {"name": "n\u00e9", "type": "t", "passed": True, "score": None},
        {"name": "x" * 301, "type": "t", "passed": True},
    ]
    add("ungraded")["gradeResult"]["hasGraders"] = False
    add("grader-errored")["gradeResult"]["errored"] = True
    add("no-grade", gradeResult=None)
    add("number-tags", tags={"n": 1, "flag": True, "list": [1, "a"]})
    add("text-tags", tags={"n": "1", "flag": "true"})
    add("text-tags-again", tags={"n": "1", "flag": "true"})
    add("no-tags", tags={})
    tools = add("tools", stimulusName="t\u00e2che-\u00e9", model=None, variant="")
    tools["trajectory"]["metrics"]["toolCallBreakdown"] = {
        "\u00e9crire": 2,
        "read_file": 1.5,
        "search": -1,
        "y" * 301: 1,
    }
    tools["trajectory"]["events"].append(
        {"type": "tool_result", "data": {"toolName": "\u00e9crire", "success": False}}
    )
    add("truncated")["trajectory"]["truncated"] = True
    add("odd-counts", trialIndex=2.7, durationMs=None)["trajectory"]["metrics"].update(
        turnCount=True, errorCount="3", toolCallCount=-2
    )
    repeated = add("repeated", durationMs=1)
    add("repeated", durationMs=2)  # the same trial again, in the same batch
    lines = [json.dumps(r) for r in records]
    lines.insert(3, json.dumps({"type": "something-else", "runId": "rows-hand"}))
    summary = json.loads((eval_results.parent / "run-summary.jsonl").read_text().splitlines()[0])
    lines.insert(5, json.dumps({**summary, "runId": "rows-hand"}))
    lines.append(json.dumps({**repeated, "durationMs": 3}))  # and in a later batch
    folder = root / "hand"
    folder.mkdir()
    (folder / "results.jsonl").write_text("".join(line + "\n" for line in lines))
    return folder


def _fixture(root: Path) -> list[Path]:
    """The run folders, written the same way on every call."""
    eval_run = write_run(
        root / "eval",
        RunSpec(run_id="rows-eval", seed=11, stimuli=3, models=("gpt-a", None), trials=3),
    )
    results = eval_run / "results.jsonl"
    index, moved = _complete(results, skip=1)  # its events are in its trial folder
    events = moved["trajectory"]["events"]
    moved["trajectory"]["events"] = []
    lines = results.read_text().splitlines()
    lines[index] = json.dumps(moved)
    results.write_text("".join(line + "\n" for line in lines))
    trial = eval_run.joinpath(
        "suite", moved["stimulusName"], moved["model"] or "_", f"trial-{moved['trialIndex']}"
    )
    (trial / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    experiment = write_run(
        root / "experiment",
        RunSpec(
            run_id="rows-exp",
            seed=12,
            stimuli=3,
            models=("gpt-a",),
            trials=2,
            variants=("baseline", "better"),
            baseline="baseline",
            experiment="rows",
            pass_bias={"baseline": 0.4, "better": 0.9},
        ),
    )
    odd = odd_folder(root / "odd").path
    return [eval_run, experiment, odd, _hand_written(root, results)]


def _plain(value: Any, root: str) -> Any:
    """A stored value as it is written down: paths below the fixture's folder relative to
    it, long texts and bytes as a hash of their content."""
    if isinstance(value, bytes):
        return "sha256:" + hashlib.sha256(value).hexdigest()[:16]
    if isinstance(value, str):
        value = value.replace(root, "<root>")
        if len(value) > LONG:
            return "sha256:" + hashlib.sha256(value.encode("utf-8", "replace")).hexdigest()[:16]
    return value


def _store_rows(target: str, root: Path) -> dict[str, list[list[Any]]]:
    store = open_store(target)
    try:
        with store.read() as connection:
            return {
                table.name: [
                    [_plain(value, str(root)) for value in row]
                    for row in table_rows(connection, table)
                ]
                for table in tables()
            }
    finally:
        store.close()


def test_every_table_holds_the_rows_written_down(store_target: str, tmp_path: Path) -> None:
    root = tmp_path / "runs"
    folders = _fixture(root)
    store = open_store(store_target)
    try:
        first = ingest(store, folders, batch=5)
        again = ingest(store, folders, batch=5)
    finally:
        store.close()
    reports = {
        "first": [first.runs, first.read, first.added, [str(p) for p in first.problems]],
        "again": [again.runs, again.read, again.added, [str(p) for p in again.problems]],
        "left_out": [str(p) for p in first.left_out],
    }
    found = json.loads(json.dumps({**_store_rows(store_target, root), "reports": reports}))
    found = json.loads(json.dumps(found).replace(str(root), "<root>"))
    if os.environ.get("VALLY_WRITE_STORE_ROWS") == "1":
        EXPECTED.write_text(json.dumps(found, indent=1, ensure_ascii=False) + "\n")
    expected = json.loads(EXPECTED.read_text())
    assert found.keys() == expected.keys()
    for name in expected:
        assert found[name] == expected[name], name
