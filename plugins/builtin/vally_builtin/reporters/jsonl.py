"""The ``jsonl`` reporter: writes ``results.jsonl``, one trial record per line.

Each finished trial's record is appended and flushed at once, so a run that is killed
leaves a file of complete lines, except at most the last one when the kill came while it
was being written: readers skip such a torn last line with a warning, and a later writer
ends it before appending. The reporter is critical: when the file cannot be written
the run fails. With ``stdout: true`` each record is also streamed to standard output
(``vally eval --output jsonl``), ready to pipe into ``vally grade``. With
``per_variant: true`` (experiment runs) each variant's records go to
``<variant>/results.jsonl``; every variant's file is created when the run starts.
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
    safe_name,
)
from vally_builtin.reporters import output_path

RESULTS_FILE = "results.jsonl"


def _ends_mid_line(path: Path) -> bool:
    """True when ``path`` exists, is not empty and its last byte is not a line end."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, 2)
            if handle.tell() == 0:
                return False
            handle.seek(-1, 2)
            return handle.read(1) != b"\n"
    except OSError:
        return False


class JsonlConfig(StrictConfig):
    """Options of the ``jsonl`` reporter.

    Attributes:
        stdout: Also write each record to standard output.
        path: Write to this file instead of ``<run_dir>/results.jsonl``; a relative path is
            taken from the run folder.
        per_variant: Write each variant's records to ``<run_dir>/<variant>/results.jsonl``.
    """

    stdout: bool = False
    path: str | None = None
    per_variant: bool = False


class JsonlReporter(BaseReporter[JsonlConfig]):
    """Appends one ``TrialResultRecord`` line per finished trial to ``results.jsonl``."""

    metadata = ReporterMetadata(
        name="jsonl",
        description="Writes results.jsonl: one trial record per line, flushed as trials end.",
        critical=True,
    )

    def __init__(self, config: JsonlConfig | None = None) -> None:
        super().__init__(config)
        self.paths: dict[str, Path] = {}
        self._files: dict[str, IO[str]] = {}
        self._opened = False

    @property
    def path(self) -> Path | None:
        """The results file of a run without variant folders (None before the run starts)."""
        return self.paths.get("")

    def target(self, run: RunInfo, variant: str = "") -> Path | None:
        """Where the records of ``variant`` go (None when the run writes no files)."""
        if self.config.per_variant and run.run_dir is not None:
            return run.run_dir / safe_name(variant) / RESULTS_FILE
        return output_path(self.config.path, run.run_dir, RESULTS_FILE)

    def _open(self, run: RunInfo) -> None:
        self._opened = True
        variants = list(run.variants) if self.config.per_variant else [""]
        for variant in variants:
            path = self.target(run, variant)
            if path is None:
                continue
            self.paths[variant] = path
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                torn = _ends_mid_line(path)
                self._files[variant] = path.open("a", encoding="utf-8", newline="\n")
                if torn:
                    # A killed writer left half a line: end it, so that it stays a torn
                    # line of its own that readers skip, never glued to the next record.
                    self._files[variant].write("\n")
            except OSError as exc:
                self.close()
                if self.config.per_variant:
                    raise OutputError(
                        f"cannot create the results file of variant {variant!r} at {path}: "
                        f"{exc.strerror or exc}",
                        hint="check that the output directory is writable and nothing is in "
                        "the way of the variant folder",
                    ) from exc
                raise OutputError(
                    f"cannot open the results file {path}: {exc.strerror or exc}",
                    hint="choose a writable folder with --output-dir",
                ) from exc

    @hookimpl
    def vally_run_start(self, run: RunInfo) -> None:
        """Open (create or append to) the results file(s)."""
        self._open(run)

    @hookimpl
    def vally_trial_end(self, run: RunInfo, record: TrialResultRecord) -> None:
        """Append the record as one line and flush it; echo it to stdout when asked."""
        if not self._opened:
            self._open(run)
        variant = (record.variant or "") if self.config.per_variant else ""
        if variant not in self.paths and run.run_dir is not None:
            raise OutputError(f"no results file for variant {record.variant!r}")
        line = record.to_json_line() + "\n"
        file = self._files.get(variant)
        if file is not None:
            try:
                file.write(line)
                file.flush()
            except OSError as exc:
                raise OutputError(
                    f"cannot append to the results file {self.paths[variant]}: "
                    f"{exc.strerror or exc}",
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
        """Close the files if open (safe to call twice).

        Raises:
            OutputError: A file could not be closed (its last lines may be lost).
        """
        files, self._files = self._files, {}
        failed: list[str] = []
        for variant, file in files.items():
            try:
                file.close()
            except OSError as exc:
                failed.append(f"{self.paths[variant]}: {exc.strerror or exc}")
        if failed:
            raise OutputError(f"cannot close the results file {'; '.join(failed)}")
