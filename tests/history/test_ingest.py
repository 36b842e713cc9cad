"""``vally ingest``: real and synthetic run folders into SQLite and PostgreSQL stores;
idempotence, torn and invalid lines, trial folders, errors."""

from __future__ import annotations

import gc
import json
import sqlite3
import tracemalloc
import zlib
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, func, select

from tests.cli_probe import run_vally_then
from tests.history.conftest import vally
from tests.history.synth import RunSpec, write_run
from vally import json_depth_limit
from vally.models.records import RunSummaryRecord, TrialResultRecord
from vally_serve import ingest as ingest_module, recordblocks, runfiles, schema, writes
from vally_serve.graded import tally_of
from vally_serve.ingest import IngestReport, RunInfo, ingest
from vally_serve.outcomequeries import outcome_detail
from vally_serve.recordblocks import record_line
from vally_serve.rows import outcome_rows
from vally_serve.service import ingest_runs
from vally_serve.store import BULK_CACHE_KB, BULK_CHECKPOINT_PAGES, Store, StoreError, open_store
from vally_serve.writes import in_transaction


def count(target: str, table: schema.Table) -> int:
    store = open_store(target)
    try:
        with store.read() as connection:
            return int(connection.execute(select(func.count()).select_from(table)).scalar_one())
    finally:
        store.close()


def test_synthetic_records_are_valid_trial_records(synthetic_runs: Path) -> None:
    for line in (synthetic_runs / "run-a" / "results.jsonl").read_text().splitlines():
        TrialResultRecord.model_validate_json(line)
    for line in (synthetic_runs / "run-a" / "run-summary.jsonl").read_text().splitlines():
        assert len(RunSummaryRecord.model_validate_json(line).stimuli) == 8


def test_real_runs_ingest_once_whatever_the_repeats(
    real_runs: Path, store_target: str, tmp_path: Path
) -> None:
    first = json.loads(
        vally("ingest", str(real_runs), "--store", store_target, "--json", cwd=tmp_path).stdout
    )
    lines = sum(
        1 for f in real_runs.rglob("results.jsonl") for line in f.read_text().splitlines() if line
    )
    assert first["read"] == first["added"] == lines == 17  # 9 quickstart trials + 8 experiment
    assert len(first["runs"]) == 2 and first["problems"] == []
    again = json.loads(
        vally("ingest", str(real_runs), "--store", store_target, "--json", cwd=tmp_path).stdout
    )
    assert again["added"] == 0 and again["duplicates"] == lines
    assert count(store_target, schema.outcomes) == lines
    assert count(store_target, schema.outcome_details) == lines
    assert count(store_target, schema.runs) == 2
    store = open_store(store_target)
    with store.read() as connection:
        rows = {r.kind: r for r in connection.execute(select(schema.runs))}
        graders = connection.execute(select(func.sum(schema.grader_stats.c.results))).scalar_one()
    store.close()
    assert rows["experiment"].experiment == "demo-style"
    assert rows["experiment"].baseline == "plain"
    assert Path(rows["experiment"].source).parent == real_runs.resolve()
    assert rows["eval"].name == "quickstart"
    assert graders >= lines  # every quickstart and experiment stimulus has graders


def test_cli_reports_counts_in_words(real_runs: Path, tmp_path: Path) -> None:
    result = vally("ingest", str(real_runs), "--store", str(tmp_path / "h.db"), cwd=tmp_path)
    assert "Ingested 2 runs from 3 folders: 17 outcomes added, 0 already in the store" in (
        result.stdout
    )


def test_torn_and_invalid_lines_are_reported_and_the_rest_kept(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", RunSpec(run_id="torn", stimuli=2, models=("m",), trials=2))
    results = run / "results.jsonl"
    lines = results.read_text().splitlines()
    assert len(lines) == 4
    lines.insert(1, "{not json")
    lines.insert(3, "[1, 2]")
    lines.insert(4, json.dumps({"type": "trial-result", "runId": "torn"}))  # no trialId
    lines.insert(5, json.dumps({"type": "surprise"}))
    results.write_text("\n".join(lines) + "\n" + lines[-1][: len(lines[-1]) // 2])
    result = vally("ingest", str(run), "--store", str(tmp_path / "h.db"), cwd=tmp_path)
    assert "4 outcomes added" in result.stdout and "5 lines skipped" in result.stdout
    warnings = result.stderr
    assert f"{results}:2: not JSON" in warnings
    assert f"{results}:4: a JSON list, not a record" in warnings
    assert f"{results}:5: the record has no 'trialId' string; skipped" in warnings
    assert f"{results}:6: not a trial-result record (type 'surprise')" in warnings
    assert f"{results}:9: not JSON" in warnings and "torn last line" in warnings


def test_no_run_found_exits_1_and_names_the_folder(tmp_path: Path) -> None:
    empty = tmp_path / "nothing-here"
    (empty / "sub").mkdir(parents=True)
    result = vally(
        "ingest", str(empty), "--store", str(tmp_path / "h.db"), cwd=tmp_path, check=False
    )
    assert result.returncode == 1
    assert f"no vally run found in {empty}" in result.stderr
    missing = vally(
        "ingest",
        str(tmp_path / "absent"),
        "--store",
        str(tmp_path / "h.db"),
        cwd=tmp_path,
        check=False,
    )
    assert missing.returncode == 1
    assert f"no such file or folder: {tmp_path / 'absent'}" in missing.stderr


def test_events_come_from_the_trial_folder_when_the_record_has_none(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", RunSpec(run_id="moved", stimuli=1, models=("m",), trials=1))
    record = json.loads((run / "results.jsonl").read_text())
    events = record["trajectory"]["events"]
    record["trajectory"]["events"] = []
    record["trajectory"]["truncated"] = True  # a field a newer vally may add
    (run / "results.jsonl").write_text(json.dumps(record) + "\n")
    trial = run / "suite" / "task-000" / "m" / "trial-0"
    (trial / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events) + '{"tor')
    store = open_store(str(tmp_path / "h.db"))
    report = ingest(store, [run])
    assert report.added == 1
    with store.read() as connection:
        detail = connection.execute(select(schema.outcome_details)).one()
        record_stored = json.loads(record_line(connection, detail))
    store.close()
    assert json.loads(zlib.decompress(detail.events)) == events
    assert record_stored["trajectory"]["truncated"] is True  # kept verbatim
    assert Path(detail.trial_dir) == trial
    assert json.loads(detail.artifacts) == [
        {
            "path": "notes.txt",
            "size": len("notes of suite/task-000/m/0\n"),
            "text": "notes of suite/task-000/m/0\n",
        }
    ]


def test_trial_folders_under_other_names_are_found_by_their_metadata(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", RunSpec(run_id="hashed", stimuli=1, models=("m",), trials=1))
    trial = run / "suite" / "task-000" / "m" / "trial-0"
    trial.rename(trial.with_name("trial-0-1a2b3c"))  # a layout with a hash suffix
    store = open_store(str(tmp_path / "h.db"))
    ingest(store, [run])
    with store.read() as connection:
        detail = connection.execute(select(schema.outcome_details)).one()
    store.close()
    assert detail.trial_dir.endswith("trial-0-1a2b3c")


def test_a_file_that_is_no_store_is_refused_and_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("my notes\n" * 200)
    with pytest.raises(StoreError, match="cannot open the history store"):
        open_store(str(target))
    assert target.read_text() == "my notes\n" * 200


def test_a_store_from_a_newer_vally_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "h.db"
    open_store(str(target)).close()
    with sqlite3.connect(target) as connection:
        connection.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="schema version 99, newer than"):
        open_store(str(target))


def _as_version_2(target: Path) -> None:
    """Rewrite the SQLite store ``target`` as version 2 kept it: each record line
    compressed on its own in ``outcome_details.record``, no blocks."""
    store = open_store(str(target))
    with store.read() as connection:
        lines = {
            row.outcome_id: record_line(connection, row)
            for row in connection.execute(select(schema.outcome_details))
        }
    store.close()
    with sqlite3.connect(target) as connection:
        connection.executemany(
            "UPDATE outcome_details SET record = ? WHERE outcome_id = ?",
            [(zlib.compress(line, 1), oid) for oid, line in lines.items()],
        )
        for column in ("block", "block_start", "block_length"):
            connection.execute(f"ALTER TABLE outcome_details DROP COLUMN {column}")
        connection.execute("DROP TABLE record_blocks")
        connection.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")


def test_a_version_2_store_is_migrated_and_keeps_its_records(
    synthetic_runs: Path, tmp_path: Path
) -> None:
    target = tmp_path / "h.db"
    store = open_store(str(target))
    ingest(store, [synthetic_runs / "run-a"])
    store.close()
    _as_version_2(target)
    store = open_store(str(target))  # migrated: the old records stay as they were
    ingest(store, [synthetic_runs / "run-b"])  # new records go into blocks
    with store.read() as connection:
        version = connection.execute(select(schema.meta.c.value)).scalar_one()
        rows = connection.execute(
            select(schema.outcomes.c.run_id, schema.outcomes.c.trial_id, schema.outcome_details)
            .join(
                schema.outcome_details, schema.outcome_details.c.outcome_id == schema.outcomes.c.id
            )
            .order_by(schema.outcomes.c.seq)
        ).all()
        stored = {(r.run_id, r.trial_id): json.loads(record_line(connection, r)) for r in rows}
        old = next(r for r in rows if r.run_id == "run-a")
        shown = outcome_detail(connection, old.outcome_id)
        tally = tally_of(connection, "run-a", None, [0])
    store.close()
    assert version == str(schema.SCHEMA_VERSION)
    assert {r.run_id for r in rows if r.block is None} == {"run-a"}
    assert {r.run_id for r in rows if r.block is not None} == {"run-b"}
    for run in ("run-a", "run-b"):
        for line in (synthetic_runs / run / "results.jsonl").read_text().splitlines():
            record = json.loads(line)
            assert stored[(run, record["trialId"])] == record
    assert shown["record"]["trialId"] == old.trial_id
    assert tally.records == sum(1 for r in rows if r.run_id == "run-a")


def test_a_version_1_store_is_migrated_and_its_outcomes_searchable(
    synthetic_runs: Path, tmp_path: Path
) -> None:
    target = tmp_path / "h.db"
    store = open_store(str(target))
    ingest(store, [synthetic_runs / "run-a"])
    store.close()
    _as_version_2(target)
    with sqlite3.connect(target) as connection:  # the store as version 1 made it
        connection.execute("DROP TABLE analyses")
        connection.execute("ALTER TABLE outcomes DROP COLUMN error_text")
        connection.execute("ALTER TABLE outcomes DROP COLUMN grader_verdicts")
        connection.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
        errored = connection.execute("SELECT count(*) FROM outcomes WHERE status = 'error'")
        errors = errored.fetchone()[0]
        failed = connection.execute("SELECT count(*) FROM outcomes WHERE verdict = 'fail'")
        fails = failed.fetchone()[0]
    assert errors and fails
    store = open_store(str(target))
    store.close()
    with sqlite3.connect(target) as connection:
        version = connection.execute("SELECT value FROM meta WHERE key = 'schema_version'")
        assert version.fetchone()[0] == str(schema.SCHEMA_VERSION)
        found = connection.execute(
            "SELECT count(*) FROM outcomes WHERE error_text = ?",
            ("execute: VALLY_TIMEOUT: agent timed out",),
        )
        assert found.fetchone()[0] == errors
        graded = connection.execute(
            "SELECT count(*) FROM outcomes WHERE grader_verdicts = ?", ("\noutput-contains=fail\n",)
        )
        assert graded.fetchone()[0] == fails
        assert connection.execute("SELECT count(*) FROM analyses").fetchone()[0] == 0


def test_sqlite_store_uses_wal(tmp_path: Path) -> None:
    target = tmp_path / "h.db"
    open_store(str(target)).close()
    with sqlite3.connect(target) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_missing_extra_is_one_clear_error(tmp_path: Path) -> None:
    code = "import sys; sys.modules['sqlalchemy'] = None\nfrom vally.cli.app import main; main()"
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", code, "ingest", str(tmp_path), "--store", "x.db"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 1
    assert "needs the Python package 'sqlalchemy'" in result.stderr
    assert "pip install 'vally[serve]'" in result.stderr


def test_an_ingest_without_trial_folders_imports_no_record_model(tmp_path: Path) -> None:
    """The run folder layout (its module imports the record models, a tenth of a second
    of start-up) is imported only where a trial folder is looked at."""
    run = write_run(tmp_path / "run", RunSpec(run_id="light", stimuli=2, trial_dirs=False))
    result = run_vally_then(
        ["ingest", str(run), "--store", str(tmp_path / "h.db")],
        "print('vally.models.records' in sys.modules, file=sys.stderr)\n",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines()[-1] == "False"


def test_outcomes_another_ingest_stored_meanwhile_are_left_alone(
    store_target: str, tmp_path: Path
) -> None:
    """A batch whose outcomes were partly stored after it checked (by a concurrent ingest)
    inserts only the others, and adds only those to the running sums and the records."""
    run = write_run(tmp_path / "run", RunSpec(run_id="meanwhile", stimuli=3, trials=2))
    lines = [line for line in (run / "results.jsonl").read_bytes().splitlines() if line]
    batch = [outcome_rows(json.loads(line), line) for line in lines]
    first = (run / "first") / "results.jsonl"
    first.parent.mkdir()
    first.write_bytes(b"".join(line + b"\n" for line in lines[::2]))  # every other one
    store = open_store(store_target)
    try:
        ingest(store, [first.parent])
        info = {"meanwhile": RunInfo("meanwhile", str(run)).row()}
        added = in_transaction(store, partial(writes._insert, store, batch, info))
        with store.read() as connection:
            trials = connection.execute(select(func.sum(schema.cells.c.trials))).scalar_one()
            stored = {
                row.trial_id: json.loads(record_line(connection, row))
                for row in connection.execute(
                    select(schema.outcomes.c.trial_id, schema.outcome_details).join(
                        schema.outcome_details,
                        schema.outcome_details.c.outcome_id == schema.outcomes.c.id,
                    )
                )
            }
    finally:
        store.close()
    assert added == len(lines) - len(lines[::2])
    assert trials == len(lines)
    assert stored == {json.loads(line)["trialId"]: json.loads(line) for line in lines}


def _ingest_peak(tmp_path: Path, trials: int) -> tuple[int, int]:
    """The traced peak of ingesting a run of ``trials`` trials per stimulus and model (in
    batches of 100), and the size of its ``results.jsonl``."""
    spec = RunSpec(
        run_id=f"flat-{trials}", stimuli=10, models=("m",), trials=trials, trial_dirs=False
    )
    run = write_run(tmp_path / f"run-{trials}", spec)
    store = open_store(str(tmp_path / f"h-{trials}.db"))
    tracemalloc.start()
    try:
        report = ingest(store, [run], batch=100)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        store.close()
    assert report.added == 10 * trials
    return peak, (run / "results.jsonl").stat().st_size


def test_ingest_memory_is_flat_in_the_records(tmp_path: Path) -> None:
    small, small_size = _ingest_peak(tmp_path, 50)  # 500 records
    large, large_size = _ingest_peak(tmp_path, 500)  # 5,000 records, ten times the bytes
    assert large_size > 9 * small_size
    # Holding the records (or their lines) would cost the file's size; a batch costs the
    # same at either size, plus heap noise.
    assert large < small + 2_000_000, (small, large)
    assert large < large_size / 4, (large, large_size)


@pytest.mark.parametrize("deflate", ["isal", "zlib"])
def test_record_blocks_are_zlib_streams_whichever_library_writes_them(
    deflate: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ISA-L (the serve extra's) or zlib (without it) writes the blocks; either way every
    reader's ``zlib.decompress`` gives back each record line as read."""
    if deflate == "zlib":
        monkeypatch.setattr(recordblocks, "_deflate", zlib.compress)
    else:
        isal_zlib = pytest.importorskip("isal.isal_zlib")
        assert recordblocks._deflate is isal_zlib.compress
    run = write_run(tmp_path / "run", RunSpec(run_id="blocks", stimuli=20, models=("m",)))
    lines = [line for line in (run / "results.jsonl").read_bytes().splitlines() if line]
    store = open_store(str(tmp_path / "h.db"))
    try:
        ingest(store, [run])
        with store.read() as connection:
            stored = [
                record_line(connection, row)
                for row in connection.execute(
                    select(schema.outcome_details)
                    .join(
                        schema.outcomes, schema.outcomes.c.id == schema.outcome_details.c.outcome_id
                    )
                    .order_by(schema.outcomes.c.seq)
                )
            ]
            blocks = connection.execute(select(schema.record_blocks.c.data)).scalars().all()
    finally:
        store.close()
    assert stored == lines
    assert len(blocks) == -(-len(lines) // recordblocks.BLOCK_RECORDS)
    assert sum(map(len, blocks)) < sum(map(len, lines)) / 5


def test_a_folder_of_new_outcomes_asks_the_store_once_which_it_holds(tmp_path: Path) -> None:
    """Once a batch found none of its outcomes stored, the folder's next batches are
    written without asking first; a re-ingest still asks for every batch and adds nothing."""
    run = write_run(tmp_path / "run", RunSpec(run_id="asked", stimuli=5, trials=10))
    store = open_store(str(tmp_path / "h.db"))
    asked: list[str] = []

    def count_lookups(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if statement.lstrip().startswith("SELECT outcomes.id"):
            asked.append(statement)

    event.listen(store.engine, "before_cursor_execute", count_lookups)
    try:
        first = ingest(store, [run], batch=20)  # 100 records: 5 batches
        lookups_first = len(asked)
        asked.clear()
        again = ingest(store, [run], batch=20)
    finally:
        store.close()
    assert (first.read, first.added) == (100, 100)
    assert lookups_first == 1
    assert (again.read, again.added) == (100, 0)
    assert len(asked) == 5


def test_vally_ingest_opens_a_sqlite_store_for_a_bulk_load(tmp_path: Path) -> None:
    """The store ``vally ingest`` writes gets a larger page cache and fewer checkpoints;
    one opened to be read keeps SQLite's defaults."""
    target = str(tmp_path / "h.db")
    pragmas = "PRAGMA cache_size", "PRAGMA wal_autocheckpoint"
    for bulk, expected in ((True, (-BULK_CACHE_KB, BULK_CHECKPOINT_PAGES)), (False, (-2000, 1000))):
        store = open_store(target, bulk=bulk)
        try:
            with store.read() as connection:
                got = tuple(connection.exec_driver_sql(p).scalar_one() for p in pragmas)
        finally:
            store.close()
        assert got == expected, bulk


def test_vally_ingest_collects_once_a_batch_with_the_collector_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While ``vally ingest`` writes, the collector makes no automatic runs (they walked a
    batch's live rows again and again): it collects once after each batch, and is on
    again afterwards."""
    run = write_run(tmp_path / "run", RunSpec(run_id="collected", stimuli=5, trials=20))
    seen: list[tuple[str, object]] = []
    real_ingest = ingest_module.ingest

    def in_batches_of_50(store: Store, paths: list[Path], **options: Any) -> IngestReport:
        seen.append(("start", gc.isenabled()))
        try:
            return real_ingest(store, paths, progress=options["progress"], batch=50)
        finally:
            seen.append(("end", gc.isenabled()))

    def collection(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(("collect", info["generation"]))

    monkeypatch.setattr(ingest_module, "ingest", in_batches_of_50)
    gc.callbacks.append(collection)
    try:
        report = ingest_runs(
            [run], str(tmp_path / "h.db"), progress=lambda _r: seen.append(("batch", None))
        )
    finally:
        gc.callbacks.remove(collection)
    assert report.added == 200  # 5 stimuli x 2 models x 20 trials: 4 batches and the last call
    writing = seen[seen.index(("start", False)) : seen.index(("end", False)) + 1]
    assert writing[1:-1] == [("collect", 2), ("batch", None)] * 5, writing
    assert gc.isenabled()


def test_a_results_file_reads_its_depth_limit_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The JSON depth limit of a file's lines is read from the environment once for the
    file, and every line is held to it."""
    monkeypatch.setenv("VALLY_MAX_JSON_DEPTH", "3")
    reads: list[int] = []

    def limit() -> int:
        reads.append(1)
        return json_depth_limit()

    monkeypatch.setattr(runfiles, "json_depth_limit", limit)
    lines = ['{"a": {"b": [1]}}', '{"a": {"b": [[1]]}}'] * 20
    results = tmp_path / "results.jsonl"
    results.write_text("\n".join(lines) + "\n")
    problems: list[runfiles.Problem] = []
    read = list(runfiles.read_lines(results, problems))
    assert len(reads) == 1
    assert [line.number for line in read] == list(range(1, 41, 2))
    assert [p.line for p in problems] == list(range(2, 41, 2))
    assert all("deeper than 3 levels" in p.message for p in problems)
