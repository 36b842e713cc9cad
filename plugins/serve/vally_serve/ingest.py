"""``vally ingest``: load run folders into a history store.

Every run folder found at or below the given paths is read (:mod:`.runfiles`): its
``results.jsonl`` gives one outcome per trial, its ``run-summary.jsonl`` the run's summaries
and experiment provenance, its trial folders the events and artifacts a record does not
carry. Outcomes are inserted in batches, each batch one transaction, with "insert unless
present" on the outcome id: re-ingesting a run adds nothing, and concurrent ingests of the
same or different runs (several processes, several CI shards on one PostgreSQL server)
neither lose nor duplicate a trial. Bad lines are reported and skipped.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Table, select
from sqlalchemy.exc import IntegrityError, OperationalError

from vally import safe_name
from vally_serve import schema
from vally_serve.rows import OutcomeRows, RecordError, Row, outcome_rows, sums_of
from vally_serve.runfiles import Line, Problem, RunFolder, find_run_folders, read_lines
from vally_serve.store import Store
from vally_serve.trialdirs import TrialFolders, list_artifacts, read_events

BATCH = 1000
"""Outcomes per transaction."""
RETRIES = 5
"""Attempts of one batch that collides with a concurrent ingest."""


@dataclass
class IngestReport:
    """What one ingest did.

    Attributes:
        runs: Run ids found, in order of first appearance.
        folders: Run folders read.
        read: Trial records read.
        added: Outcomes that were new to the store.
        problems: Lines and paths skipped, with why.
    """

    runs: list[str] = field(default_factory=list)
    folders: int = 0
    read: int = 0
    added: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def duplicates(self) -> int:
        """Records already in the store (re-ingested)."""
        return self.read - self.added


@dataclass
class RunInfo:
    """What is known of one run from its records and summaries."""

    run_id: str
    source: str
    evals: list[str] = field(default_factory=list)
    experiment: str | None = None
    baseline: str | None = None
    started_at: str | None = None
    completed_at: str | None = None
    vally_version: str | None = None

    def see(self, data: Mapping[str, Any]) -> None:
        """Take the eval, times, version and experiment block of a record or summary."""
        name = data.get("evalName")
        if isinstance(name, str) and name not in self.evals:
            self.evals.append(name)
        self.started_at = _earliest(self.started_at, data.get("startedAt"))
        self.completed_at = _latest(self.completed_at, data.get("completedAt"))
        if isinstance(data.get("vallyVersion"), str):
            self.vally_version = data["vallyVersion"]
        block = data.get("experiment")
        if isinstance(block, dict) and isinstance(block.get("experiment"), str):
            self.experiment = block["experiment"]
            folder = Path(self.source)
            if isinstance(block.get("variant"), str) and folder.name == safe_name(block["variant"]):
                self.source = str(folder.parent)  # the experiment's folder, not a variant's
            if isinstance(block.get("baseline"), str):
                self.baseline = block["baseline"]

    def row(self) -> Row:
        """The ``runs`` row."""
        return {
            "run_id": self.run_id,
            "kind": "experiment" if self.experiment else "eval",
            "name": self.experiment or ", ".join(self.evals) or self.run_id,
            "experiment": self.experiment,
            "baseline": self.baseline,
            "started_at": self.started_at,
            "completed_at": self.completed_at,
            "vally_version": self.vally_version,
            "source": self.source,
            "ingested_at": datetime.now(UTC).isoformat(timespec="milliseconds"),
        }


def _earliest(current: str | None, value: Any) -> str | None:
    if not isinstance(value, str):
        return current
    return value if current is None or value < current else current


def _latest(current: str | None, value: Any) -> str | None:
    if not isinstance(value, str):
        return current
    return value if current is None or value > current else current


def ingest(
    store: Store,
    paths: Iterable[Path],
    *,
    progress: Callable[[IngestReport], None] | None = None,
    batch: int = BATCH,
) -> IngestReport:
    """Load every run folder at or below ``paths`` into ``store``.

    Args:
        store: The open store.
        paths: Run folders, experiment folders, output folders holding many runs, or
            ``results.jsonl`` files.
        progress: Called after each batch with the report so far.
        batch: Outcomes per transaction.

    Returns:
        The report; ``report.runs`` is empty when no run was found.
    """
    report = IngestReport()
    folders, report.problems = find_run_folders(paths)
    for folder in folders:
        report.folders += 1
        _ingest_folder(store, folder, report, progress, batch)
    return report


def _ingest_folder(
    store: Store,
    folder: RunFolder,
    report: IngestReport,
    progress: Callable[[IngestReport], None] | None,
    size: int,
) -> None:
    runs: dict[str, RunInfo] = {}
    summaries: list[Row] = []
    if folder.summaries is not None:
        for line in read_lines(folder.summaries, report.problems):
            _take_summary(folder, folder.summaries, line, runs, summaries, report)
    trials = TrialFolders(folder.path)
    batch: list[OutcomeRows] = []
    if folder.results is not None:
        for line in read_lines(folder.results, report.problems):
            kind = line.data.get("type")
            if kind == "run-summary":  # older versions appended summaries to the results
                _take_summary(folder, folder.results, line, runs, summaries, report)
                continue
            rows = _trial_rows(folder, folder.results, line, runs, report)
            if rows is None:
                continue
            batch.append(rows)
            if len(batch) >= size:
                _write_batch(store, batch, runs, trials, report)
                batch = []
                if progress:
                    progress(report)
    _write_batch(store, batch, runs, trials, report)
    _write_runs(store, runs, summaries)
    if progress:
        progress(report)


def _run(folder: RunFolder, runs: dict[str, RunInfo], run_id: str, report: IngestReport) -> RunInfo:
    info = runs.get(run_id)
    if info is None:
        info = runs[run_id] = RunInfo(run_id, str(folder.path.resolve()))
        if run_id not in report.runs:
            report.runs.append(run_id)
    return info


def _take_summary(
    folder: RunFolder,
    file: Path,
    line: Line,
    runs: dict[str, RunInfo],
    summaries: list[Row],
    report: IngestReport,
) -> None:
    data = line.data
    if data.get("type") != "run-summary" or not isinstance(data.get("runId"), str):
        report.problems.append(
            Problem(str(file), line.number, "not a run-summary record (no type or runId)")
        )
        return
    info = _run(folder, runs, data["runId"], report)
    info.see(data)
    raw_block = data.get("experiment")
    block: dict[str, Any] = raw_block if isinstance(raw_block, dict) else {}
    summaries.append(
        {
            "run_id": data["runId"],
            "eval_name": str(data.get("evalName") or ""),
            "variant": str(data.get("variant") or ""),
            "shard": str(block.get("shard") or ""),
            "record": line.raw,
        }
    )


def _trial_rows(
    folder: RunFolder, file: Path, line: Line, runs: dict[str, RunInfo], report: IngestReport
) -> OutcomeRows | None:
    kind = line.data.get("type")
    if kind != "trial-result":
        shown = "no type" if kind is None else f"type {kind!r}"
        report.problems.append(
            Problem(str(file), line.number, f"not a trial-result record ({shown}); skipped")
        )
        return None
    try:
        rows = outcome_rows(line.data, line.raw)
    except RecordError as exc:
        report.problems.append(Problem(str(file), line.number, f"{exc}; skipped"))
        return None
    _run(folder, runs, rows.outcome["run_id"], report).see(line.data)
    report.read += 1
    return rows


def _write_batch(
    store: Store,
    batch: list[OutcomeRows],
    runs: dict[str, RunInfo],
    trials: TrialFolders,
    report: IngestReport,
) -> None:
    """Insert the outcomes of ``batch`` not yet in the store, and add them to the sums, in
    one transaction. Another ingest may insert the same outcomes at the same moment (a
    PostgreSQL store shared by CI shards): the loser's transaction fails on the unique id
    (or is chosen as a deadlock victim), is rolled back whole and retried, and then finds
    them present."""
    unique = list({b.outcome["id"]: b for b in batch}.values())
    if not unique:
        return
    for attempt in range(RETRIES):
        try:
            with store.engine.begin() as connection:
                report.added += _insert_batch(connection, store, unique, runs, trials)
            return
        except (IntegrityError, OperationalError):
            if attempt == RETRIES - 1:
                raise


def _insert_batch(
    connection: Connection,
    store: Store,
    batch: list[OutcomeRows],
    runs: dict[str, RunInfo],
    trials: TrialFolders,
) -> int:
    _ensure_runs(connection, store, [runs[r] for r in sorted({b.outcome["run_id"] for b in batch})])
    ids = [b.outcome["id"] for b in batch]
    present = set(
        connection.execute(
            select(schema.outcomes.c.id).where(schema.outcomes.c.id.in_(ids))
        ).scalars()
    )
    fresh = [b for b in batch if b.outcome["id"] not in present]
    if not fresh:
        return 0
    for rows in fresh:
        _attach_folder(rows, trials)
        rows.detail["record"] = zlib.compress(rows.detail["record"].encode(), 1)
    connection.execute(schema.outcomes.insert(), [b.outcome for b in fresh])
    connection.execute(schema.outcome_details.insert(), [b.detail for b in fresh])
    for table, sums, additions in sums_of(fresh):
        _add_sums(connection, store, table, sums, additions)
    return len(fresh)


def _add_sums(
    connection: Connection, store: Store, table: Table, sums: tuple[str, ...], rows: list[Row]
) -> None:
    """Add ``rows`` to the running sums of ``table`` (insert, or add to the stored row)."""
    if not rows:
        return
    statement = _insert(store)(table)
    keys = [c.name for c in table.primary_key.columns]
    statement = statement.on_conflict_do_update(
        index_elements=keys,
        set_={name: table.c[name] + statement.excluded[name] for name in sums},
    )
    connection.execute(statement, rows)


def _attach_folder(rows: OutcomeRows, trials: TrialFolders) -> None:
    trial_dir = trials.find(rows.outcome)
    if trial_dir is None:
        return
    rows.detail["trial_dir"] = str(trial_dir)
    rows.detail["artifacts"] = list_artifacts(trial_dir)
    if rows.needs_folder_events:
        events = read_events(trial_dir)
        rows.detail["events"] = None if events is None else zlib.compress(events.encode(), 1)


def _insert(store: Store) -> Any:
    if store.dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert


def _ensure_runs(connection: Connection, store: Store, infos: list[RunInfo]) -> None:
    rows = [info.row() for info in infos]
    connection.execute(_insert(store)(schema.runs).on_conflict_do_nothing(), rows)


def _write_runs(store: Store, runs: dict[str, RunInfo], summaries: list[Row]) -> None:
    """Add the runs (or merge what this folder tells into the stored ones) and their
    summaries."""
    if not runs:
        return
    with store.engine.begin() as connection:
        _ensure_runs(connection, store, list(runs.values()))
        table = schema.runs
        for info in runs.values():
            stored = (
                connection.execute(
                    select(table).where(table.c.run_id == info.run_id).with_for_update()
                )
                .one()
                ._mapping
            )
            merged = RunInfo(info.run_id, stored["source"], list(info.evals))
            merged.experiment = stored["experiment"] or info.experiment
            merged.baseline = stored["baseline"] or info.baseline
            merged.started_at = _earliest(stored["started_at"], info.started_at)
            merged.completed_at = _latest(stored["completed_at"], info.completed_at)
            merged.vally_version = info.vally_version or stored["vally_version"]
            known = [] if merged.experiment else _split(stored["name"], info.run_id)
            merged.evals = known + [e for e in info.evals if e not in known]
            values = merged.row()
            del values["ingested_at"], values["source"]
            connection.execute(table.update().where(table.c.run_id == info.run_id).values(**values))
        if summaries:
            connection.execute(
                _insert(store)(schema.run_summaries).on_conflict_do_nothing(), summaries
            )


def _split(name: str, run_id: str) -> list[str]:
    return [] if name == run_id else [part for part in name.split(", ") if part]
