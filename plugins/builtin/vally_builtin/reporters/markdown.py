"""The ``markdown`` reporter: writes ``report.md`` in the run folder when the run ends.

The report holds a run header, one table per eval (and variant) with a row per stimulus
and model, the failed graders with their evidence and the errored trials (the first
:data:`~vally_builtin.reporters.aggregate.FAILURES_KEPT` of each row by trial index, then
how many more). It is computed from the records alone, sorted by eval, stimulus, model and
trial, so the same records always give the same text except for the one line that states
when it was rendered (:data:`RENDERED_PREFIX`). The reporter counts records into its rows
as trials end (:class:`~vally_builtin.reporters.aggregate.ReportAggregate`) and never holds
every record. :func:`render_report` is usable without a run, e.g. to render a merged report.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from vally import (
    RecordCounter,
    ReporterMetadata,
    RunInfo,
    RunOutcome,
    RunSummaryRecord,
    StrictConfig,
    TrialResultRecord,
    __version__ as vally_version,
    hookimpl,
    utc_now,
)
from vally_builtin.reporters import (
    FileReporter,
    GroupKey,
    failed_graders,
    format_count,
    format_ms,
    format_rate,
    format_score,
    markdown_text,
    one_line,
    summary_threshold,
    text_pieces,
    trial_outcome,
)
from vally_builtin.reporters.aggregate import ReportAggregate, RowAggregate, run_aggregate
from vally_builtin.reporters.jsonl import RESULTS_FILE

if TYPE_CHECKING:
    # The experiment report (and the comparison statistics it imports) is imported by an
    # experiment's run only: an eval's start-up does not pay for it.
    from vally_builtin.reporters.experiment_aggregate import ExperimentAggregate

REPORT_FILE = "report.md"

RENDERED_PREFIX = "_Rendered at "
"""The only line of a report that changes between two renderings of the same records."""

EVIDENCE_LIMIT = 500


class MarkdownConfig(StrictConfig):
    """Options of the ``markdown`` reporter.

    Attributes:
        path: Write here instead of ``<run_dir>/report.md`` (relative to the run folder).
        title: The report's heading.
    """

    path: str | None = None
    title: str = "vally report"


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell (one line, pipes escaped)."""
    return markdown_text(one_line(text, 10_000)).replace("|", "\\|")


def _inline(text: str, limit: int = EVIDENCE_LIMIT) -> str:
    return markdown_text(one_line(text, limit)).replace("`", "'")


def _code(text: str) -> str:
    """``text`` inside a code span: one line, no backtick to end the span early."""
    return one_line(text, 10_000).replace("`", "'")


def _tokens_line(aggregate: ReportAggregate) -> str:
    """The run's token totals, agent and judge: ``agent 240 in / 60 out (2 calls); ...``."""
    return "; ".join(
        f"{who} {totals.input_tokens:,} in / {totals.output_tokens:,} out ({totals.calls:,} calls)"
        for who, totals in aggregate.usage.items()
    )


def render_report(
    run: RunInfo,
    records: Iterable[TrialResultRecord],
    summaries: Sequence[RunSummaryRecord] = (),
    *,
    title: str = "vally report",
    rendered_at: str | None = None,
) -> str:
    """The Markdown text of a report over ``records``.

    Args:
        run: The run (id, command, start time, experiment and shard).
        records: The trial records, in any order (read once).
        summaries: Run summaries, used for the thresholds they record.
        title: The report's heading.
        rendered_at: The render time to print (default: now).
    """
    aggregate = ReportAggregate.of(records)
    return render_aggregate(run, aggregate, summaries, title=title, rendered_at=rendered_at)


def render_aggregate(
    run: RunInfo,
    aggregate: ReportAggregate,
    summaries: Sequence[RunSummaryRecord] = (),
    *,
    title: str = "vally report",
    rendered_at: str | None = None,
) -> str:
    """The Markdown text of a report over the records counted into ``aggregate`` (see
    :func:`render_report`)."""
    lines = aggregate_lines(run, aggregate, summaries, title=title, rendered_at=rendered_at)
    return "".join(text_pieces(lines))


def aggregate_lines(
    run: RunInfo,
    aggregate: ReportAggregate,
    summaries: Sequence[RunSummaryRecord] = (),
    *,
    title: str = "vally report",
    rendered_at: str | None = None,
) -> Iterator[str]:
    """The lines of :func:`render_aggregate`'s text, one at a time (a table row is made
    when it is written)."""
    yield f"# {_inline(title)}"
    yield ""
    header = [
        ("Run", f"`{run.run_id}`"),
        ("Command", f"`vally {run.command}`"),
    ]
    if run.experiment:
        header.append(("Experiment", _inline(run.experiment)))
    if run.shard:
        header.append(("Shard", run.shard))
    header += [
        ("Started", run.started_at),
        ("Completed", aggregate.completed_at or "—"),
        ("vally version", vally_version),
        ("Trials", str(aggregate.trials)),
        ("Tokens", _tokens_line(aggregate)),
        ("Cost", aggregate.cost.line()),
    ]
    yield from (f"- **{name}:** {value}" for name, value in header)
    yield from ("", f"{RENDERED_PREFIX}{rendered_at or utc_now()}_", "")

    if not aggregate.rows:
        yield from ("No trials were run.", "")
        return

    counts = aggregate.outcomes
    yield from (
        "## Overview",
        "",
        "| Passed | Failed | Errored | Cancelled | Not graded |",
        "|---:|---:|---:|---:|---:|",
        f"| {counts['passed']} | {counts['failed']} | {counts['errored']} "
        f"| {counts['cancelled']} | {counts['ungraded']} |",
        "",
    )
    rows = aggregate.rows
    sections = itertools.groupby(sorted(rows), key=lambda key: (key.eval_name, key.variant))
    for (eval_name, variant), keys in sections:
        yield from _section(eval_name, variant, ((key, rows[key]) for key in keys), summaries)


def _section(
    eval_name: str,
    variant: str,
    rows: Iterable[tuple[GroupKey, RowAggregate]],
    summaries: Sequence[RunSummaryRecord],
) -> Iterator[str]:
    """One eval's (and variant's) table, failed graders and errored trials."""
    shown = f"## Eval: {_inline(eval_name)}" + (f" — variant {_inline(variant)}" if variant else "")
    yield from (shown, "")
    threshold = summary_threshold(summaries, eval_name, variant)
    if threshold is not None:
        yield from (f"Threshold: {format_score(threshold)}", "")
    yield (
        "| Stimulus | Model | Trials | Passed | Pass rate | pass@k | pass^k | Flaky "
        "| Mean score | Tokens | Turns | Tool calls | Wall time | Errors |"
    )
    yield "|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"
    failed_lines: list[str] = []
    errored_lines: list[str] = []
    for key, row in rows:
        s = row.stats()
        cells = [
            _cell(key.stimulus),
            _cell(row.model_label(key)),
            str(s.trials),
            f"{s.passed}/{s.graded}",
            format_rate(s.pass_rate),
            f"{format_rate(s.pass_at_k)} (k={s.k})" if s.k else "—",
            format_rate(s.pass_to_the_k),
            "yes" if s.flaky else "no",
            format_score(s.mean_score),
            format_count(s.mean_tokens),
            format_count(s.mean_turns),
            format_count(s.mean_tool_calls),
            format_ms(s.mean_wall_time_ms),
            str(s.total_errors),
        ]
        yield "| " + " | ".join(cells) + " |"
        for record in row.failed_records():
            _failure_lines(key, record, failed_lines, errored_lines)
        if row.failures_left_out:
            failed_lines.append(
                f"- **{_inline(key.stimulus)}** [{_inline(key.model_label)}]: "
                f"{row.failures_left_out} more "
                f"failed or errored trial(s) not listed (see {RESULTS_FILE})"
            )
    yield ""
    if failed_lines:
        yield from ("### Failed graders", "", *failed_lines, "")
    if errored_lines:
        yield from ("### Errored trials", "", *errored_lines, "")


def _failure_lines(
    key: GroupKey, record: TrialResultRecord, failed_lines: list[str], errored_lines: list[str]
) -> None:
    """Append a failed or errored trial's lines: its error, failed graders, violations."""
    where = f"**{_inline(key.stimulus)}** [{_inline(key.model_label)}] trial {record.trial_index}"
    outcome = trial_outcome(record)
    if outcome == "errored":
        if record.error is not None:
            errored_lines.append(
                f"- {where}: {record.error.phase} error `{record.error.code}`: "
                f"{_inline(record.error.message)}"
            )
        else:
            errored_lines.append(f"- {where}: a grader failed to run")
    for result in failed_graders(record):
        state = "error" if result.status == "error" else "failed"
        evidence = _inline(result.evidence) if result.evidence else "(no evidence)"
        label = f"`{_code(result.name)}`"
        if result.name != result.type:
            label += f" ({_inline(result.type)})"
        failed_lines.append(
            f"- {where}: {label} {state} — score {format_score(result.score)}: {evidence}"
        )
    grade = record.grade_result
    if grade is not None:
        failed_lines += [
            f"- {where}: constraint violated: {_inline(v)}" for v in grade.constraint_violations
        ]


class MarkdownReporter(FileReporter[MarkdownConfig]):
    """Writes ``report.md`` (temporary file, then rename) when the run ends."""

    metadata = ReporterMetadata(
        name="markdown",
        description="Writes report.md: per-stimulus tables, failed graders, errored trials.",
    )
    file_name = REPORT_FILE

    _aggregate: ReportAggregate | None = None
    _experiment: ExperimentAggregate | None = None

    @hookimpl
    def vally_run_start(self, run: RunInfo) -> None:
        """Start counting the run's records (an eval's report rows, or an experiment's
        report figures; a shard renders no report)."""
        self._aggregate = self._experiment = None
        if run.snapshot is None:
            self._aggregate = run_aggregate(run, keep_failures=True)
        elif run.shard is None:
            from vally_builtin.reporters.experiment_report import experiment_aggregate

            self._experiment = experiment_aggregate(run.snapshot)

    @hookimpl
    def vally_trial_end(self, run: RunInfo, record: TrialResultRecord) -> None:
        """Count a finished trial into the report's rows or figures."""
        if self._aggregate is not None:
            self._aggregate.add_once(record)
        elif self._experiment is not None:
            self._experiment.add(record)

    @hookimpl
    def vally_seal_counters(self, run: RunInfo) -> Mapping[str, RecordCounter] | None:
        """The experiment report's figures, counted of a shard's (or a merge's) records."""
        if run.snapshot is None:
            return None
        from vally_builtin.reporters.experiment_report import SEALED_KEY, experiment_aggregate

        return {SEALED_KEY: experiment_aggregate(run.snapshot)}

    def render_lines(self, run: RunInfo, outcome: RunOutcome) -> Iterable[str] | None:
        """The report of a run that is no experiment, a line at a time (see
        :meth:`render`); None for an experiment run, whose report :meth:`render` gives."""
        if run.snapshot is not None:
            return None
        aggregate = self._aggregate
        if aggregate is None or aggregate.trials != len(outcome.records):
            aggregate = ReportAggregate.of(outcome.records)
        return aggregate_lines(run, aggregate, outcome.summaries, title=self.config.title)

    def render(self, run: RunInfo, outcome: RunOutcome) -> str | None:
        """The run's report. An experiment run gets the experiment report, except a shard:
        its report is rendered when the shards are merged. The rows come from the records
        counted as trials ended; when the outcome holds others too (a resumed run's earlier
        trials, a merge), they are counted again from the outcome in one pass."""
        if run.snapshot is None:
            return "".join(text_pieces(self.render_lines(run, outcome) or ()))
        if run.shard is not None:
            return None
        from vally_builtin.reporters.experiment_report import (
            render_experiment_report,
            sealed_experiment_aggregate,
        )

        counted = self._experiment
        if counted is None or counted.finished != len(outcome.records):
            counted = sealed_experiment_aggregate(run.snapshot, outcome)
        return render_experiment_report(run, outcome.records, outcome.summaries, aggregate=counted)
