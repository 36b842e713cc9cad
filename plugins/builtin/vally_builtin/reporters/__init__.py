"""Built-in reporters: ``console``, ``jsonl``, ``markdown``, ``junit`` and ``otel``.

Each reporter is a plugin class selected by name (group ``vally.reporters``) whose methods
implement the run hooks of :mod:`vally.contracts.hookspecs`. This module holds what they share: the
stable ordering of records, the per-stimulus statistics (pass rate, pass@k, pass^k, flaky)
and small text helpers. Everything here is computed from the records alone, so two runs
with the same records render the same reports.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal, NamedTuple, TypeVar

from pydantic import BaseModel

from vally import (
    BaseReporter,
    GraderResult,
    OutputError,
    RunInfo,
    RunOutcome,
    RunSummaryRecord,
    TrialFacts,
    TrialResultRecord,
    hookimpl,
    pass_at_k,
    write_pieces_atomic,
)

ConfigT = TypeVar("ConfigT", bound=BaseModel)

__all__ = [
    "FileReporter",
    "GroupKey",
    "StimulusStats",
    "TrialOutcome",
    "atomic_write_pieces",
    "atomic_write_text",
    "cap",
    "facts_outcome",
    "failed_graders",
    "format_count",
    "format_ms",
    "format_rate",
    "format_score",
    "group_records",
    "one_line",
    "record_sort_key",
    "sorted_records",
    "stimulus_stats",
    "summary_threshold",
    "text_pieces",
    "trial_outcome",
]

TrialOutcome = Literal["passed", "failed", "errored", "cancelled", "ungraded"]
"""How one trial ended, as reports show it."""


class GroupKey(NamedTuple):
    """The rows of a report: one eval, variant, stimulus and model.

    A named tuple: equal to the plain tuple of its fields and hashed as it, so a report
    row is looked up by that tuple without building a key (a frozen dataclass built for
    each trial cost counting a trial 30% more instructions)."""

    eval_name: str
    variant: str
    stimulus: str
    model: str

    @property
    def model_label(self) -> str:
        """The model as shown to users (``default`` when the agent picked it)."""
        return self.model or "default"


def reported_model_label(key: GroupKey, trials: Sequence[TrialResultRecord]) -> str:
    """The model of a report row: the one asked for, else the one(s) the agent reported in
    its trajectories, else ``default``."""
    if key.model:
        return key.model
    reported = {r.trajectory.metadata.model or "" for r in trials if r.trajectory} - {""}
    return ", ".join(sorted(reported)) or key.model_label


def record_sort_key(record: TrialResultRecord) -> tuple[str, str, str, str, int, str]:
    """Sort records by eval, variant, stimulus, model, trial index (then trial id)."""
    return (
        record.eval_name,
        record.variant or "",
        record.stimulus_name,
        record.model or "",
        record.trial_index,
        record.trial_id,
    )


def sorted_records(records: Iterable[TrialResultRecord]) -> list[TrialResultRecord]:
    """The records in report order (see :func:`record_sort_key`)."""
    return sorted(records, key=record_sort_key)


def group_records(
    records: Iterable[TrialResultRecord],
) -> dict[GroupKey, list[TrialResultRecord]]:
    """Group records by eval, variant, stimulus and model, groups and trials sorted."""
    groups: dict[GroupKey, list[TrialResultRecord]] = {}
    for record in sorted_records(records):
        key = GroupKey(
            record.eval_name, record.variant or "", record.stimulus_name, record.model or ""
        )
        groups.setdefault(key, []).append(record)
    return groups


def trial_outcome(record: TrialResultRecord) -> TrialOutcome:
    """Classify a record: errored and cancelled trials are never counted as failures."""
    if record.status == "cancelled":
        return "cancelled"
    grade = record.grade_result
    if record.status == "error" or record.error is not None or (grade and grade.errored):
        return "errored"
    if grade is None or (not grade.has_graders and not grade.constraint_violations):
        return "ungraded"
    return "passed" if grade.passed else "failed"


def facts_outcome(facts: TrialFacts) -> TrialOutcome:
    """:func:`trial_outcome` of the record ``facts`` were read from."""
    status = facts.status
    if status == "cancelled":
        return "cancelled"
    if status == "error" or facts.error is not None or facts.grade_errored:
        return "errored"
    if not facts.graded or (not facts.has_graders and not facts.constraint_violations):
        return "ungraded"
    return "passed" if facts.passed else "failed"


def failed_graders(record: TrialResultRecord) -> list[GraderResult]:
    """The graders of a record that failed or errored, in grading order."""
    if record.grade_result is None:
        return []
    return [d for d in record.grade_result.details if not d.passed or d.status == "error"]


@dataclass(frozen=True)
class StimulusStats:
    """Aggregates of one report row (one :class:`GroupKey`).

    ``n`` counts graded trials (neither errored, cancelled nor ungraded); pass@k uses the
    unbiased estimator of Chen et al. (2021) with ``k = n``, pass^k is ``p ** k``, and a
    stimulus is flaky when some but not all graded trials passed.
    """

    trials: int
    graded: int
    passed: int
    failed: int
    errored: int
    cancelled: int
    pass_rate: float | None
    pass_at_k: float | None
    pass_to_the_k: float | None
    k: int
    flaky: bool
    mean_score: float | None
    mean_tokens: float | None
    mean_turns: float | None
    mean_tool_calls: float | None
    mean_wall_time_ms: float | None
    total_errors: int
    outcomes: list[TrialOutcome] = field(default_factory=list)

    @classmethod
    def of_counts(
        cls,
        counts: Mapping[str, int],
        *,
        trials: int,
        mean_score: float | None,
        mean_tokens: float | None,
        mean_turns: float | None,
        mean_tool_calls: float | None,
        mean_wall_time_ms: float | None,
        metric_errors: int,
        outcomes: list[TrialOutcome] | None = None,
    ) -> StimulusStats:
        """The statistics of a row whose trials ended as ``counts`` says (trials per
        :data:`TrialOutcome`), with its means and the error events its trajectories
        recorded (``metric_errors``); the pass figures follow from the counts."""
        c = counts.get("passed", 0)
        n = c + counts.get("failed", 0)
        rate = c / n if n else None
        return cls(
            trials=trials,
            graded=n,
            passed=c,
            failed=counts.get("failed", 0),
            errored=counts.get("errored", 0),
            cancelled=counts.get("cancelled", 0),
            pass_rate=rate,
            pass_at_k=pass_at_k(n, c, n) if n else None,
            pass_to_the_k=rate**n if rate is not None else None,
            k=n,
            flaky=0 < c < n,
            mean_score=mean_score,
            mean_tokens=mean_tokens,
            mean_turns=mean_turns,
            mean_tool_calls=mean_tool_calls,
            mean_wall_time_ms=mean_wall_time_ms,
            total_errors=metric_errors + counts.get("errored", 0),
            outcomes=[] if outcomes is None else outcomes,
        )


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def stimulus_stats(records: Sequence[TrialResultRecord]) -> StimulusStats:
    """Compute the row statistics of one group of records."""
    outcomes = [trial_outcome(r) for r in records]
    graded = [r for r, o in zip(records, outcomes, strict=True) if o in ("passed", "failed")]
    scores = [r.grade_result.score for r in graded if r.grade_result is not None]
    trajectories = [r.trajectory for r in records if r.trajectory is not None]
    metrics = [t.metrics for t in trajectories]
    return StimulusStats.of_counts(
        Counter(outcomes),
        trials=len(records),
        mean_score=_mean(scores),
        mean_tokens=_mean([float(m.token_usage.total_tokens) for m in metrics]),
        mean_turns=_mean([float(m.turn_count) for m in metrics]),
        mean_tool_calls=_mean([float(m.tool_call_count) for m in metrics]),
        mean_wall_time_ms=_mean([float(m.wall_time_ms) for m in metrics]),
        metric_errors=sum(m.error_count for m in metrics),
        outcomes=outcomes,
    )


def summary_threshold(
    summaries: Sequence[RunSummaryRecord], eval_name: str, variant: str
) -> float | None:
    """The threshold a run summary recorded for an eval (None when absent)."""
    for summary in summaries:
        if summary.eval_name == eval_name and (summary.variant or "") == variant:
            return summary.threshold
    return None


def format_rate(value: float | None) -> str:
    """A ratio as a percentage (``80.0%``), ``—`` when undefined."""
    return "—" if value is None else f"{value * 100:.1f}%"


def format_score(value: float | None) -> str:
    """A score with two decimals, ``—`` when undefined."""
    return "—" if value is None else f"{value:.2f}"


def format_count(value: float | None) -> str:
    """A (mean) count with thousands separators, one decimal when fractional."""
    if value is None:
        return "—"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.1f}"


def format_ms(value: float | None) -> str:
    """Milliseconds as ``850ms``, ``12.3s`` or ``4m 05s``."""
    if value is None:
        return "—"
    if value < 1000:
        return f"{round(value)}ms"
    seconds = value / 1000
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}m {rest:02d}s"


def markdown_text(text: str) -> str:
    """``text`` shown as written in Markdown: ``&``, ``<`` and ``>`` as HTML entities, so a
    stimulus, model or eval name such as ``<img onerror=...>`` is never rendered as HTML."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def one_line(text: str, limit: int) -> str:
    """Collapse whitespace to single spaces and cut to ``limit`` characters with ``…``."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return flat[: max(0, limit - 1)].rstrip() + "…"


def cap(text: str, limit: int) -> str:
    """Cut ``text`` to ``limit`` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit} more characters not shown)"


def output_path(configured: str | None, run_dir: Path | None, default_name: str) -> Path | None:
    """Where a reporter writes its file: its configured ``path`` (relative ones inside the
    run folder), else ``default_name`` in the run folder; None when the run writes no files
    and no path was configured."""
    if configured:
        path = Path(configured).expanduser()
        if not path.is_absolute() and run_dir is not None:
            path = run_dir / path
        return path
    return run_dir / default_name if run_dir is not None else None


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename,
    so readers never see a half-written file.

    Raises:
        OutputError: The folder or file could not be written.
    """
    atomic_write_pieces(path, (text,))


def atomic_write_pieces(path: Path, pieces: Iterable[str]) -> None:
    """Write the text of ``pieces``, one at a time as they come, to ``path`` as
    :func:`atomic_write_text` does (:func:`vally.write_pieces_atomic`: the file appears
    whole or not at all; when ``pieces`` raises, nothing is written and the error
    propagates).

    Raises:
        OutputError: The folder or file could not be written.
    """
    try:
        write_pieces_atomic(path, pieces)
    except OSError as exc:
        raise OutputError(
            f"could not write {path}: {exc.strerror or exc}",
            hint="check that the output folder exists and is writable (see --output-dir)",
        ) from exc


def text_pieces(lines: Iterable[str]) -> Iterator[str]:
    """The text of ``lines`` a piece at a time: ``"\\n".join(lines).rstrip("\\n") + "\\n"``
    (the lines joined by newlines, trailing newlines left out, ended by one), without
    holding the lines or the text whole (newlines are held back until a line with more
    than newlines follows)."""
    newlines = 0  # newlines held back: the text may end after them
    first = True
    for line in lines:
        chunk = line if first else "\n" + line
        first = False
        body = chunk.rstrip("\n")
        if body:
            yield "\n" * newlines + body
            newlines = len(chunk) - len(body)
        else:
            newlines += len(chunk)
    yield "\n"


class FileReporter(BaseReporter[ConfigT]):
    """A reporter that writes one file when the run ends (temporary file, then rename):
    ``<run_dir>/<file_name>``, or its config's ``path``. Subclasses set :attr:`file_name` and
    implement :meth:`render`."""

    file_name: ClassVar[str]
    """The file's name in the run folder."""

    path: Path | None = None
    """Where the file was written (None before the run ends or without a run folder)."""

    def render(self, run: RunInfo, outcome: RunOutcome) -> str | None:
        """The file's text, or None to write nothing for this run."""
        raise NotImplementedError

    def render_lines(self, run: RunInfo, outcome: RunOutcome) -> Iterable[str] | None:
        """The file's text as lines, written as they come (see :func:`text_pieces`): a
        report of many rows is then never held whole. None (the default) writes
        :meth:`render`'s text instead."""
        return None

    @hookimpl
    def vally_run_end(self, run: RunInfo, outcome: RunOutcome) -> None:
        """Render and write the file (nothing when the run writes no files)."""
        path = output_path(getattr(self.config, "path", None), run.run_dir, self.file_name)
        if path is None:
            return
        lines = self.render_lines(run, outcome)
        if lines is not None:
            atomic_write_pieces(path, text_pieces(lines))
            self.path = path
            return
        text = self.render(run, outcome)
        if text is not None:
            atomic_write_text(path, text)
            self.path = path
