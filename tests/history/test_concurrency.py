"""Many processes ingesting different and identical runs into one store at once, on SQLite
(one file) and on a real PostgreSQL server: nothing is lost, nothing is duplicated; also
copies of one run that overlap in part and list its trials in different orders, round
after round."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import func, select

from tests.history.conftest import postgres_database
from tests.history.synth import RunSpec, write_run
from vally_serve import schema
from vally_serve.ingest import BATCH
from vally_serve.store import _use_wal, open_store

PROCESSES = 6
RUNS = 6
PER_RUN = 3 * 2 * 4  # stimuli x models x trials

WORKER = """
import json, sys
from pathlib import Path
from vally_serve.ingest import ingest
from vally_serve.store import open_store
target, batch, *paths = sys.argv[1:]
sys.stdin.readline()  # start together: the parent writes one line to every worker
store = open_store(target)
report = ingest(store, [Path(p) for p in paths], batch=int(batch))
store.close()
print(json.dumps({"read": report.read, "added": report.added, "problems": len(report.problems)}))
"""


def _runs(root: Path) -> list[Path]:
    return [
        write_run(
            root / f"run-{i}",
            RunSpec(run_id=f"run-{i}", seed=i, stimuli=3, trials=4, trial_dirs=False),
        )
        for i in range(RUNS)
    ]


def _ingest_concurrently(target: str, runs: list[Path]) -> list[dict[str, int]]:
    # Each worker ingests run 0 (identical work for all), its own run and its neighbour's.
    return _run_workers(
        target,
        [sorted({runs[0], runs[i % RUNS], runs[(i + 1) % RUNS]}) for i in range(PROCESSES)],
    )


def _run_workers(target: str, work: list[list[Path]], batch: int = 5) -> list[dict[str, int]]:
    """One worker process per list of paths, all started before any begins; each writes
    ``batch`` outcomes per transaction."""
    workers = []
    for paths in work:
        workers.append(
            subprocess.Popen(
                [sys.executable, "-c", WORKER, target, str(batch), *map(str, paths)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for worker in workers:  # every worker is started (and importing) before any begins
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()
    reports = []
    for worker in workers:
        out, err = worker.communicate(timeout=240)
        assert worker.returncode == 0, err
        reports.append(json.loads(out))
    return reports


def _check_store(target: str, reports: list[dict[str, int]]) -> None:
    assert sum(r["added"] for r in reports) == RUNS * PER_RUN  # each outcome added once
    assert all(r["problems"] == 0 for r in reports)
    store = open_store(target)
    with store.read() as connection:

        def count(table: schema.Table) -> int:
            return int(connection.execute(select(func.count()).select_from(table)).scalar_one())

        assert count(schema.outcomes) == RUNS * PER_RUN
        assert count(schema.outcome_details) == RUNS * PER_RUN
        assert count(schema.runs) == RUNS
        assert count(schema.run_summaries) == RUNS
        graded = connection.execute(
            select(func.count())
            .select_from(schema.outcomes)
            .where(schema.outcomes.c.verdict.in_(("pass", "fail")))
        ).scalar_one()
        results = connection.execute(select(func.sum(schema.grader_stats.c.results)))
        assert results.scalar_one() == graded  # one grader per graded trial, no more
        cells = connection.execute(select(func.sum(schema.cells.c.trials))).scalar_one()
        assert cells == RUNS * PER_RUN  # the running sums count each outcome once
        per_run = dict(
            connection.execute(
                select(schema.outcomes.c.run_id, func.count()).group_by(schema.outcomes.c.run_id)
            ).all()
        )
    store.close()
    assert per_run == {f"run-{i}": PER_RUN for i in range(RUNS)}


def test_concurrent_ingests_into_one_sqlite_file(tmp_path: Path) -> None:
    target = str(tmp_path / "shared.db")
    reports = _ingest_concurrently(target, _runs(tmp_path / "runs"))
    _check_store(target, reports)


def test_concurrent_ingests_into_one_postgresql_database(tmp_path: Path, postgres_url: str) -> None:
    reports = _ingest_concurrently(postgres_url, _runs(tmp_path / "runs"))
    _check_store(postgres_url, reports)


ROUNDS = 5
SHARED = "shared"


@pytest.fixture(scope="module")
def overlapping_copies(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], int]:
    """Three copies of one run of 1,500 trials that writers reach at the same moment: all
    of it, its first two thirds (in the same order: every batch collides), and all of it
    in reverse order (it meets the others in the middle)."""
    root = tmp_path_factory.mktemp("copies")
    full = write_run(
        root / "full",
        RunSpec(run_id=SHARED, stimuli=30, models=("a", "b"), trials=25, trial_dirs=False),
    )
    lines = (full / "results.jsonl").read_text().splitlines(keepends=True)
    parts = [lines, lines[: 2 * len(lines) // 3], lines[::-1]]
    copies = []
    for number, part in enumerate(parts):
        copy = root / f"copy-{number}"
        copy.mkdir()
        (copy / "results.jsonl").write_text("".join(part))
        (copy / "run-summary.jsonl").write_text((full / "run-summary.jsonl").read_text())
        copies.append(copy)
    return copies, len(lines)


def _check_exactly_once(target: str, reports: list[dict[str, int]], trials: int) -> None:
    assert all(r["problems"] == 0 for r in reports)
    assert sum(r["added"] for r in reports) == trials
    store = open_store(target)
    try:
        with store.read() as connection:
            o = schema.outcomes.c
            stored, distinct = connection.execute(
                select(func.count(), func.count(func.distinct(o.trial_id)))
            ).one()
            details = connection.execute(
                select(func.count()).select_from(schema.outcome_details)
            ).scalar_one()
            graded, timed = connection.execute(
                select(
                    func.count().filter(o.verdict.in_(("pass", "fail"))),
                    func.count(o.duration_ms),
                )
            ).one()
            cells = connection.execute(
                select(func.sum(schema.cells.c.trials), func.sum(schema.cells.c.duration_n))
            ).one()
            graders = connection.execute(select(func.sum(schema.grader_stats.c.results)))
            histogram = connection.execute(select(func.sum(schema.durations.c.trials)))
            assert (stored, distinct, details) == (trials, trials, trials)
            assert tuple(cells) == (trials, timed)
            assert graders.scalar_one() == graded
            assert histogram.scalar_one() == timed
    finally:
        store.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_overlapping_copies_ingested_at_once_keep_every_trial_once(
    backend: str, tmp_path: Path, overlapping_copies: tuple[list[Path], int]
) -> None:
    copies, trials = overlapping_copies
    for round_number in range(ROUNDS):
        databases = iter([str(tmp_path / f"round-{round_number}.db")])
        if backend == "postgresql":
            databases = postgres_database()
        target = next(databases)
        try:
            # Batches as large as a real ingest's: long transactions that overlap.
            reports = _run_workers(target, [[copy] for copy in copies], batch=BATCH)
            _check_exactly_once(target, reports, trials)
        finally:
            next(databases, None)


class _LockedCursor:
    """A cursor whose switch to WAL is refused ``refusals`` times with ``error``."""

    def __init__(self, refusals: int, error: str = "database is locked") -> None:
        self.refusals, self.error, self.switches = refusals, error, 0

    def execute(self, sql: str) -> _LockedCursor:
        if sql == "PRAGMA journal_mode=WAL":
            self.switches += 1
            if self.switches <= self.refusals:
                raise sqlite3.OperationalError(self.error)
        self.mode = "delete"
        return self

    def fetchone(self) -> tuple[str]:
        return (self.mode,)


def test_switching_to_wal_is_tried_again_while_another_process_opens_the_file() -> None:
    """SQLite refuses the switch to WAL at once, without waiting, while another connection
    opens the file; opening a store tries again instead of failing (seen with six
    processes opening one new file together)."""
    cursor = _LockedCursor(refusals=3)
    _use_wal(cursor)
    assert cursor.switches == 4
    other = _LockedCursor(refusals=1, error="disk I/O error")  # not a lock: raised at once
    with pytest.raises(sqlite3.OperationalError, match="disk I/O"):
        _use_wal(other)
    assert other.switches == 1


def test_a_file_already_in_wal_mode_is_not_switched_again(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "h.db"))
    store.close()
    connection = sqlite3.connect(tmp_path / "h.db")
    cursor = connection.cursor()
    seen: list[str] = []
    connection.set_trace_callback(seen.append)
    _use_wal(cursor)
    connection.close()
    assert seen == ["PRAGMA journal_mode"]
