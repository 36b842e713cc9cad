"""The ``jsonl`` reporter: writes ``results.jsonl``, one trial record per line.

Each finished trial's record is appended and flushed at once, so a run that is killed
leaves a file of complete lines. The reporter is critical: when the file cannot be written
the run fails. With ``stdout: true`` each record is also streamed to standard output
(``vally eval --output jsonl``), ready to pipe into ``vally grade``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import IO

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
from vally_builtin.reporters import output_path

RESULTS_FILE = "results.jsonl"


class JsonlConfig(StrictConfig):
    """Options of the ``jsonl`` reporter.

    Attributes:
        stdout: Also write each record to standard output.
        path: Write to this file instead of ``<run_dir>/results.jsonl``; a relative path is
            taken from the run folder.
    """

    stdout: bool = False
    path: str | None = None


class JsonlReporter(BaseReporter[JsonlConfig]):
    """Appends one ``TrialResultRecord`` line per finished trial to ``results.jsonl``."""

    metadata = ReporterMetadata(
        name="jsonl",
        description="Writes results.jsonl: one trial record per line, flushed as trials end.",
        critical=True,
    )
    Config = JsonlConfig

    def __init__(self, config: JsonlConfig | None = None) -> None:
        super().__init__(config)
        self.path: Path | None = None
        self._file: IO[str] | None = None

    def target(self, run: RunInfo) -> Path | None:
        """Where the records go for ``run`` (None when the run writes no files)."""
        return output_path(self.config.path, run.run_dir, RESULTS_FILE)

    def _open(self, run: RunInfo) -> None:
        self.path = self.target(run)
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", encoding="utf-8", newline="\n")
        except OSError as exc:
            raise OutputError(
                f"cannot open the results file {self.path}: {exc.strerror or exc}",
                hint="choose a writable folder with --output-dir",
            ) from exc

    @hookimpl
    def vally_run_start(self, run: RunInfo) -> None:
        """Open (create or append to) the results file."""
        self._open(run)

    @hookimpl
    def vally_trial_end(self, run: RunInfo, record: TrialResultRecord) -> None:
        """Append the record as one line and flush it; echo it to stdout when asked."""
        if self._file is None and self.path is None:
            self._open(run)
        line = record.to_json_line() + "\n"
        if self._file is not None:
            try:
                self._file.write(line)
                self._file.flush()
            except OSError as exc:
                raise OutputError(
                    f"cannot append to the results file {self.path}: {exc.strerror or exc}",
                    hint="check free disk space and permissions of the run folder",
                ) from exc
        if self.config.stdout:
            try:
                sys.stdout.write(line)
                sys.stdout.flush()
            except OSError as exc:
                raise OutputError(
                    f"cannot write trial records to standard output: {exc}",
                    hint="the program reading vally's output may have exited early",
                ) from exc

    @hookimpl
    def vally_run_end(self, run: RunInfo, outcome: RunOutcome) -> None:
        """Close the results file."""
        self.close()

    def close(self) -> None:
        """Close the file if open (safe to call twice)."""
        if self._file is not None:
            file, self._file = self._file, None
            try:
                file.close()
            except OSError as exc:
                raise OutputError(
                    f"cannot close the results file {self.path}: {exc.strerror or exc}"
                ) from exc
