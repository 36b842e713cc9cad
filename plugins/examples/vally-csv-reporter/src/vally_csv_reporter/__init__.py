"""An example third-party vally reporter: one CSV row per finished trial.

It listens to two run hooks: ``vally_trial_end`` appends (and flushes) a row as soon as a
trial finishes, so a killed run leaves a valid file, and ``vally_run_end`` closes the file.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import IO, Any, ClassVar

from pydantic import Field

from vally import (
    BaseReporter,
    OutputError,
    ReporterMetadata,
    RunInfo,
    RunOutcome,
    StrictConfig,
    TrialResultRecord,
    hookimpl,
)

__all__ = ["COLUMNS", "CsvReporter", "CsvReporterConfig", "row_of"]

PATH_ENV = "VALLY_CSV_REPORTER_PATH"
"""Environment variable giving the CSV path when the config leaves it unset."""

COLUMNS = (
    "run_id",
    "eval",
    "stimulus",
    "variant",
    "model",
    "trial",
    "status",
    "passed",
    "score",
    "duration_ms",
    "tokens",
    "tool_calls",
    "error",
)
"""The CSV header, in order."""


def _default_path() -> str:
    return os.environ.get(PATH_ENV, "results.csv")


class CsvReporterConfig(StrictConfig):
    """Options of the ``csv`` reporter.

    Attributes:
        path: Where to write the CSV. A relative path is taken from the run's output folder
            (from the current folder when the run writes no folder). Default: the
            ``VALLY_CSV_REPORTER_PATH`` environment variable, else ``results.csv``.
        delimiter: One character separating the fields.
    """

    path: str = Field(default_factory=_default_path, min_length=1)
    delimiter: str = Field(default=",", min_length=1, max_length=1)


def row_of(record: TrialResultRecord) -> list[str]:
    """The CSV row of one trial record (columns as :data:`COLUMNS`)."""
    grade = record.grade_result
    metrics = record.trajectory.metrics if record.trajectory is not None else None
    return [
        record.run_id,
        record.eval_name,
        record.stimulus_name,
        record.variant or "",
        record.model or "",
        str(record.trial_index),
        record.status,
        "" if grade is None else str(grade.passed).lower(),
        "" if grade is None else f"{grade.score:.4f}",
        str(record.duration_ms),
        "" if metrics is None else str(metrics.token_usage.total_tokens),
        "" if metrics is None else str(metrics.tool_call_count),
        "" if record.error is None else record.error.message,
    ]


class CsvReporter(BaseReporter[CsvReporterConfig]):
    """Writes ``results.csv``: a header, then one row per trial in completion order."""

    metadata: ClassVar[ReporterMetadata] = ReporterMetadata(
        name="csv",
        description="Writes one CSV row per finished trial (results.csv in the run folder).",
    )
    Config = CsvReporterConfig

    def __init__(self, config: CsvReporterConfig | None = None) -> None:
        super().__init__(config)
        self._file: IO[str] | None = None
        self._writer: Any = None
        self.path: Path | None = None
        self.rows = 0

    def _open(self, run: RunInfo) -> None:
        path = Path(self.config.path).expanduser()
        if not path.is_absolute():
            path = (run.run_dir or Path.cwd()) / path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("w", encoding="utf-8", newline="")
        except OSError as exc:
            raise OutputError(
                f"csv reporter: cannot write {path}: {exc}",
                hint=f"set {PATH_ENV} (or the reporter's 'path') to a writable file",
            ) from exc
        self.path = path
        self._writer = csv.writer(self._file, delimiter=self.config.delimiter)
        self._writer.writerow(COLUMNS)
        self._file.flush()

    @hookimpl
    def vally_run_start(self, run: RunInfo) -> None:
        """Create the file and write the header."""
        self._open(run)

    @hookimpl
    def vally_trial_end(self, run: RunInfo, record: TrialResultRecord) -> None:
        """Append the trial's row and flush it."""
        if self._file is None:
            self._open(run)
        assert self._file is not None
        self._writer.writerow(row_of(record))
        self._file.flush()
        self.rows += 1

    @hookimpl
    def vally_run_end(self, run: RunInfo, outcome: RunOutcome) -> None:
        """Close the file (a run without trials still leaves the header)."""
        if self._file is None:
            self._open(run)
        assert self._file is not None
        self._file.close()
        self._file = None
