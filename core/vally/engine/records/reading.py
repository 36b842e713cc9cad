"""Reading a finished run back from Python: :func:`read_run` gives the trial records and run
summaries of a run folder, of an experiment folder (a results file per variant folder) or
of one results file, for analysis in scripts and notebooks; :meth:`RunRecords.records_frame`
and :meth:`RunRecords.summaries_frame` turn them into pandas DataFrames when pandas is
installed."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vally.engine.records.run_folder import (
    RESULTS_FILE,
    SUMMARY_FILE,
    iter_json_lines,
    iter_records,
    reading_results,
)
from vally.errors import ConfigError
from vally.models.records import RunSummaryRecord, TrialResultRecord


@dataclass(frozen=True)
class RunRecords:
    """A run read back (see :func:`read_run`).

    Attributes:
        path: The folder or file that was read.
        records: Every trial record, in the order of the results files (variant folders
            by name in an experiment folder).
        summaries: Every run summary (one per eval and variant).
        warnings: What was passed over while reading (a torn last line of a results file
            that a killed run left).
    """

    path: Path
    records: list[TrialResultRecord]
    summaries: list[RunSummaryRecord]
    warnings: list[str] = field(default_factory=list)

    @property
    def variants(self) -> list[str]:
        """The variants of the records, in first-seen order (``[""]`` for a plain run)."""
        return list(dict.fromkeys(r.variant or "" for r in self.records))

    def records_frame(self) -> Any:
        """A ``pandas.DataFrame``, one row per trial: its identity, status, verdict, score,
        duration, tokens and cost.

        Raises:
            ConfigError: pandas is not installed.
        """
        rows = [_record_row(r) for r in self.records]
        return _pandas().DataFrame(rows, columns=list(RECORD_COLUMNS))

    def summaries_frame(self) -> Any:
        """A ``pandas.DataFrame``, one row per run summary: eval, variant, trial counts, pass
        rate, verdict, cost.

        Raises:
            ConfigError: pandas is not installed.
        """
        rows = [_summary_row(s) for s in self.summaries]
        return _pandas().DataFrame(rows, columns=list(SUMMARY_COLUMNS))


RECORD_COLUMNS = (
    "runId",
    "variant",
    "evalName",
    "stimulus",
    "model",
    "trialIndex",
    "trialId",
    "status",
    "passed",
    "score",
    "durationMs",
    "inputTokens",
    "outputTokens",
    "totalTokens",
    "costUsd",
    "errorMessage",
)
"""The columns of :meth:`RunRecords.records_frame`."""

SUMMARY_COLUMNS = (
    "runId",
    "variant",
    "evalName",
    "trials",
    "passed",
    "failed",
    "errored",
    "passRate",
    "verdict",
    "costUsd",
)
"""The columns of :meth:`RunRecords.summaries_frame`."""


def _record_row(record: TrialResultRecord) -> dict[str, Any]:
    grade = record.grade_result
    tokens = record.trajectory.metrics.token_usage if record.trajectory else None
    return {
        "runId": record.run_id,
        "variant": record.variant,
        "evalName": record.eval_name,
        "stimulus": record.stimulus_name,
        "model": record.model,
        "trialIndex": record.trial_index,
        "trialId": record.trial_id,
        "status": record.status,
        "passed": grade.passed if grade else None,
        "score": grade.score if grade else None,
        "durationMs": record.duration_ms,
        "inputTokens": tokens.input_tokens if tokens else None,
        "outputTokens": tokens.output_tokens if tokens else None,
        "totalTokens": tokens.total_tokens if tokens else None,
        "costUsd": record.cost.total_usd,
        "errorMessage": record.error.message if record.error else None,
    }


def _summary_row(summary: RunSummaryRecord) -> dict[str, Any]:
    data = summary.to_json_dict()
    row = {key: data.get(key) for key in SUMMARY_COLUMNS if key != "costUsd"}
    row["costUsd"] = (data.get("cost") or {}).get("totalUsd")
    return row


@functools.cache
def _pandas() -> Any:
    try:
        pandas = importlib.import_module("pandas")  # optional: no stubs needed to type-check
    except ImportError:
        raise ConfigError(
            "a DataFrame needs pandas, which is not installed",
            hint="install it with: pip install pandas (the records and summaries are "
            "lists of models without it)",
        ) from None
    return pandas


def _results_files(path: Path) -> list[Path]:
    """The results files of a results file, a run folder or an experiment folder."""
    if path.is_file():
        return [path]
    if (path / RESULTS_FILE).is_file():
        return [path / RESULTS_FILE]
    if path.is_dir():
        found = sorted(c / RESULTS_FILE for c in path.iterdir() if (c / RESULTS_FILE).is_file())
        if found:
            return found
    what = "does not exist" if not path.exists() else "holds no results.jsonl"
    raise ConfigError(
        f"no run at {path}: it {what}",
        hint="pass a run folder (with results.jsonl), an experiment folder (a results.jsonl "
        "per variant folder) or a results file",
    )


def _summary_files(results: list[Path]) -> Iterator[Path]:
    """The run-summary files beside each results file (once each)."""
    seen: set[Path] = set()
    for file in results:
        summary = file.parent / SUMMARY_FILE
        if summary not in seen and summary.is_file():
            seen.add(summary)
            yield summary


def _summaries(file: Path, warn: Any) -> Iterator[RunSummaryRecord]:
    with reading_results(file) as handle:
        for number, data in iter_json_lines(handle, str(file), warn):
            if not isinstance(data, dict) or data.get("type") != "run-summary":
                continue
            try:
                yield RunSummaryRecord.model_validate(data)
            except Exception as exc:
                raise ConfigError(f"{file}:{number}: not a run-summary record: {exc}") from None


def read_run(path: str | Path) -> RunRecords:
    """The trial records and run summaries of a run folder, an experiment folder or a
    results file, read in full (for a run too large for memory, iterate its results file
    with the ``jsonl`` format instead).

    Raises:
        ConfigError: No run at ``path``, or a line that is not a vally record (named with
            its file and line number).
    """
    root = Path(path).expanduser()
    warnings: list[str] = []
    results = _results_files(root)
    records = [r for file in results for r in iter_records(file, warnings.append)]
    summaries = [
        s for file in _summary_files(results) for s in _summaries(file, warnings.append)
    ]
    return RunRecords(root, records, summaries, warnings)
