"""``vally ingest``: load run folders into a history store.

Every run folder found at or below the given paths is read (:mod:`.runfiles`): its
``results.jsonl`` gives one outcome per trial, its ``run-summary.jsonl`` the run's summaries
and experiment provenance, its trial folders the events and artifacts a record does not
carry. Outcomes are inserted in batches, each batch one transaction, with "insert unless
present" on the outcome id (:mod:`.writes`): re-ingesting a run adds nothing, and
concurrent ingests of the same or different runs (several processes, several CI shards on
one PostgreSQL server) neither lose nor duplicate a trial.

Nothing one line holds stops the ingest: a line that cannot be read, a record without the
fields that identify a trial or with identifying values the store cannot hold (a NUL, a
lone surrogate, an over-long name), and a record the database refuses are reported with
their ``file:line`` and skipped; a descriptive value the store cannot hold (a ``NaN``
duration) is left out of its column and reported, and the record is stored.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, select

from vally_serve import schema
from vally_serve.crossrun import experiment_comparison
from vally_serve.precomputed import EXPERIMENT, store_answer
from vally_serve.rows import OutcomeRows, RecordError, Row, outcome_rows
from vally_serve.runfiles import Line, Problem, RunFolder, find_run_folders, read_lines
from vally_serve.storable import is_storable_text, key_text, limit_of, path_text
from vally_serve.store import Store
from vally_serve.trialdirs import TrialFolders, list_artifacts, read_events
from vally_serve.writes import dialect_insert, in_transaction, write_outcomes

LOGGER = logging.getLogger("vally_serve")
BATCH = 4000
"""Outcomes per transaction (a transaction writes each index page it changed once: with
random outcome ids, four times the outcomes write about a quarter of the pages per
outcome)."""


@dataclass
class IngestReport:
    """What one ingest did.

    Attributes:
        runs: Run ids found, in order of first appearance.
        folders: Run folders read.
        read: Trial records read.
        added: Outcomes that were new to the store.
        problems: Lines and paths skipped, with why.
        left_out: Values of stored records that the store cannot hold and left out of
            their columns (the record's line is kept whole), with where and why.
    """

    runs: list[str] = field(default_factory=list)
    folders: int = 0
    read: int = 0
    added: int = 0
    problems: list[Problem] = field(default_factory=list)
    left_out: list[Problem] = field(default_factory=list)

    @property
    def duplicates(self) -> int:
        """Records already in the store (re-ingested)."""
        return self.read - self.added


_EVAL_LIMIT = limit_of(schema.outcomes.c.eval_name)
_TIME_LIMIT = limit_of(schema.runs.c.started_at)
_VERSION_LIMIT = limit_of(schema.runs.c.vally_version)


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
    _block: Any = field(default=None, repr=False, compare=False)
    """The last experiment block seen (each record of a variant repeats it)."""

    def see(self, data: Mapping[str, Any]) -> None:
        """Take the eval, times, version and experiment block of a record or summary
        (values the ``runs`` table cannot hold are passed over)."""
        get = data.get
        name = get("evalName")
        if isinstance(name, str) and name not in self.evals and is_storable_text(name, _EVAL_LIMIT):
            self.evals.append(name)
        # A time that is not text never comes before text (nor after it); the first one
        # seen is taken whatever it is, if the column holds it.
        started, first = get("startedAt"), self.started_at
        if (
            started is not None
            and (first is None or (isinstance(started, str) and started < first))
            and is_storable_text(started, _TIME_LIMIT)
        ):
            self.started_at = started
        completed, last = get("completedAt"), self.completed_at
        if (
            completed is not None
            and (last is None or (isinstance(completed, str) and completed > last))
            and is_storable_text(completed, _TIME_LIMIT)
        ):
            self.completed_at = completed
        version = get("vallyVersion")
        if (
            version is not None
            and version != self.vally_version
            and is_storable_text(version, _VERSION_LIMIT)
        ):
            self.vally_version = version
        block = data.get("experiment")
        if block is None or block == self._block:  # every record of a variant has the same
            return
        self._block = block
        if isinstance(block, dict) and is_storable_text(block.get("experiment")):
            from vally import safe_name  # the run folder layout: see .trialdirs

            self.experiment = block["experiment"]
            folder = Path(self.source)
            if isinstance(block.get("variant"), str) and folder.name == safe_name(block["variant"]):
                self.source = str(folder.parent)  # the experiment's folder, not a variant's
            if is_storable_text(block.get("baseline")):
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
    touched: set[str] = set()
    for folder in folders:
        report.folders += 1
        touched |= _ingest_folder(store, folder, report, progress, batch)
    _precompute(store, touched)
    return report


def _ingest_folder(
    store: Store,
    folder: RunFolder,
    report: IngestReport,
    progress: Callable[[IngestReport], None] | None,
    size: int,
) -> set[str]:
    """Ingest one folder; returns the ids of the runs it holds."""
    runs: dict[str, RunInfo] = {}
    summaries: list[Row] = []
    if folder.summaries is not None:
        for line in read_lines(folder.summaries, report.problems):
            _take_summary(folder, folder.summaries, line, runs, summaries, report)
    trials = TrialFolders(folder.path)
    batch = _Batch(folder, runs, report)
    look_first = True  # until a batch finds none of its outcomes in the store
    if folder.results is not None:
        for line in read_lines(folder.results, report.problems):
            kind = line.data.get("type")
            if kind != "trial-result":
                if kind == "run-summary":  # older versions appended summaries to the results
                    _take_summary(folder, folder.results, line, runs, summaries, report)
                else:
                    shown = "no type" if kind is None else f"type {repr(kind)[:60]}"
                    report.problems.append(
                        Problem(
                            batch.file, line.number, f"not a trial-result record ({shown}); skipped"
                        )
                    )
                continue
            if batch.add(line) >= size:
                look_first = not _write_batch(store, batch, trials, report, look_first)
                batch = _Batch(folder, runs, report)
                if progress:
                    progress(report)
    _write_batch(store, batch, trials, report, look_first)
    _write_runs(store, runs, summaries)
    if progress:
        progress(report)
    return set(runs)


def _run(folder: RunFolder, runs: dict[str, RunInfo], run_id: str, report: IngestReport) -> RunInfo:
    info = runs.get(run_id)
    if info is None:
        info = runs[run_id] = RunInfo(run_id, path_text(folder.path.resolve()))
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
    raw_block = data.get("experiment")
    block: dict[str, Any] = raw_block if isinstance(raw_block, dict) else {}
    c = schema.run_summaries.c
    try:
        row = {
            "run_id": key_text(data["runId"], "runId", limit_of(c.run_id)),
            "eval_name": _summary_key(data.get("evalName"), "evalName", limit_of(c.eval_name)),
            "variant": _summary_key(data.get("variant"), "variant", limit_of(c.variant)),
            "shard": _summary_key(block.get("shard"), "experiment.shard", limit_of(c.shard)),
            "record": line.text,
        }
    except RecordError as exc:
        report.problems.append(Problem(str(file), line.number, f"{exc}; skipped"))
        return
    _run(folder, runs, row["run_id"], report).see(data)
    summaries.append(row)


def _summary_key(value: Any, name: str, limit: int | None) -> str:
    """A key column of ``run_summaries`` ("" when absent)."""
    return key_text("" if not value else str(value), name, limit, required=False)


class _Batch:
    """The rows of the trial records of one folder read since the last batch was written,
    and the runs they belong to."""

    def __init__(self, folder: RunFolder, runs: dict[str, RunInfo], report: IngestReport):
        self.folder = folder
        self.file = str(folder.results)
        self.runs = runs
        self.report = report
        self.rows: list[OutcomeRows] = []
        self.run_infos: dict[str, RunInfo] = {}
        """The runs of the rows, by id."""
        self._last: RunInfo | None = None

    def add(self, line: Line) -> int:
        """Take the trial record ``line`` (one the store cannot hold is reported and
        skipped); returns how many rows the batch holds."""
        data = line.data
        try:
            rows = outcome_rows(data, line.raw)
        except RecordError as exc:
            self.report.problems.append(Problem(self.file, line.number, f"{exc}; skipped"))
            return len(self.rows)
        rows.origin = (self.file, line.number)
        if rows.notes:
            self.report.left_out.extend(
                Problem(self.file, line.number, note) for note in rows.notes
            )
        run_id = rows.outcome.run_id
        info = self._last
        if info is None or info.run_id != run_id:  # the records of a run come together
            info = self._last = self.run_infos[run_id] = _run(
                self.folder, self.runs, run_id, self.report
            )
        info.see(data)
        self.report.read += 1
        self.rows.append(rows)
        return len(self.rows)


def _write_batch(
    store: Store, batch: _Batch, trials: TrialFolders, report: IngestReport, look_first: bool
) -> bool:
    """Insert the outcomes of ``batch`` not yet in the store (:mod:`.writes`); a record the
    store refuses is reported with its ``file:line`` and skipped.

    Returns:
        True when every outcome of the batch was new and stored: the next batch of the
        folder is then written without asking the store first which outcomes it holds.
    """
    written = write_outcomes(
        store,
        batch.rows,
        {run_id: info.row() for run_id, info in batch.run_infos.items()},
        partial(_attach_folder, trials=trials) if trials.has_folders else None,
        look_first=look_first,
    )
    report.added += written.added
    for refusal in written.refused:
        report.read -= 1  # not an outcome of the store after all
        file, line = refusal.rows.origin
        report.problems.append(
            Problem(file, line, f"the store refused the record ({refusal.reason}); skipped")
        )
    return bool(batch.rows) and written.added == written.outcomes


def _attach_folder(rows: OutcomeRows, trials: TrialFolders) -> None:
    trial_dir = trials.find(rows.outcome)
    if trial_dir is None:
        return
    rows.trial_dir = path_text(trial_dir)
    rows.artifacts = list_artifacts(trial_dir)
    if rows.needs_folder_events:
        rows.events = read_events(trial_dir)


def _write_runs(store: Store, runs: dict[str, RunInfo], summaries: list[Row]) -> None:
    """Add the runs (or merge what this folder tells into the stored ones) and their
    summaries, in one transaction (tried again when a concurrent ingest made it fail)."""
    if runs:
        in_transaction(store, lambda connection: _merge_runs(connection, store, runs, summaries))


def _precompute(store: Store, runs: set[str]) -> None:
    """Compute and keep each experiment's comparison with its baseline, once all folders
    are in (from the sums as they stand then), so the dashboard reads it."""
    for run_id in sorted(runs):
        in_transaction(store, partial(_keep_experiment, store, run_id))


def _keep_experiment(store: Store, run_id: str, connection: Connection) -> None:
    row = connection.execute(
        select(schema.runs.c.kind, schema.runs.c.baseline).where(schema.runs.c.run_id == run_id)
    ).one_or_none()
    if row is None or row.kind != "experiment":
        return
    try:
        body = experiment_comparison(connection, run_id, row.baseline)
    except (ArithmeticError, ValueError):  # the statistics cannot be had; nothing is kept
        LOGGER.warning("the comparison of experiment %s was not computed", run_id, exc_info=True)
        return
    store_answer(connection, dialect_insert(store), run_id, EXPERIMENT, body)


def _merge_runs(
    connection: Connection, store: Store, runs: dict[str, RunInfo], summaries: list[Row]
) -> None:
    insert = dialect_insert(store)
    infos = [runs[run_id] for run_id in sorted(runs)]  # rows are locked in one order
    connection.execute(insert(schema.runs).on_conflict_do_nothing(), [i.row() for i in infos])
    table = schema.runs
    for info in infos:
        stored = (
            connection.execute(select(table).where(table.c.run_id == info.run_id).with_for_update())
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
        connection.execute(insert(schema.run_summaries).on_conflict_do_nothing(), summaries)


def _split(name: str, run_id: str) -> list[str]:
    return [] if name == run_id else [part for part in name.split(", ") if part]
