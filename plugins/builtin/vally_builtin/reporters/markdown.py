"""The ``markdown`` reporter: writes ``report.md`` in the run folder when the run ends.

The report holds a run header, one table per eval (and variant) with a row per stimulus
and model, the failed graders with their evidence and the errored trials. It is computed
from the records alone, sorted by eval, stimulus, model and trial, so the same records
always give the same text except for the one line that states when it was rendered
(:data:`RENDERED_PREFIX`). :func:`render_report` is usable without a run, e.g. to render a
merged report.
"""

from __future__ import annotations

from collections.abc import Sequence

from vally import (
    ReporterMetadata,
    RunInfo,
    RunOutcome,
    RunSummaryRecord,
    StrictConfig,
    TrialResultRecord,
    __version__ as vally_version,
    utc_now,
)
from vally_builtin.reporters import (
    FileReporter,
    failed_graders,
    format_count,
    format_ms,
    format_rate,
    format_score,
    group_records,
    one_line,
    reported_model_label,
    stimulus_stats,
    summary_threshold,
    trial_outcome,
)
from vally_builtin.reporters.cost import cost_line
from vally_builtin.reporters.experiment import render_experiment_report

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
    return one_line(text, 10_000).replace("|", "\\|")


def _inline(text: str, limit: int = EVIDENCE_LIMIT) -> str:
    return one_line(text, limit).replace("`", "'")


def _tokens_line(records: Sequence[TrialResultRecord]) -> str:
    """The run's token totals, agent and judge: ``agent 240 in / 60 out (2 calls); ...``."""
    parts: list[str] = []
    for who in ("agent", "judge"):
        totals = [getattr(r.usage, who) for r in records]
        parts.append(
            f"{who} {sum(t.input_tokens for t in totals):,} in / "
            f"{sum(t.output_tokens for t in totals):,} out "
            f"({sum(t.calls for t in totals):,} calls)"
        )
    return "; ".join(parts)


def render_report(
    run: RunInfo,
    records: Sequence[TrialResultRecord],
    summaries: Sequence[RunSummaryRecord] = (),
    *,
    title: str = "vally report",
    rendered_at: str | None = None,
) -> str:
    """The Markdown text of a report over ``records``.

    Args:
        run: The run (id, command, start time, experiment and shard).
        records: The trial records, in any order.
        summaries: Run summaries, used for the thresholds they record.
        title: The report's heading.
        rendered_at: The render time to print (default: now).
    """
    out: list[str] = [f"# {title}", ""]
    completed = max((r.completed_at for r in records), default=None)
    header = [
        ("Run", f"`{run.run_id}`"),
        ("Command", f"`vally {run.command}`"),
    ]
    if run.experiment:
        header.append(("Experiment", run.experiment))
    if run.shard:
        header.append(("Shard", run.shard))
    header += [
        ("Started", run.started_at),
        ("Completed", completed or "—"),
        ("vally version", vally_version),
        ("Trials", str(len(records))),
        ("Tokens", _tokens_line(records)),
        ("Cost", cost_line(records)),
    ]
    out += [f"- **{name}:** {value}" for name, value in header]
    out += ["", f"{RENDERED_PREFIX}{rendered_at or utc_now()}_", ""]

    groups = group_records(records)
    if not groups:
        out += ["No trials were run.", ""]
        return "\n".join(out)

    counts = {"passed": 0, "failed": 0, "errored": 0, "cancelled": 0, "ungraded": 0}
    for record in records:
        counts[trial_outcome(record)] += 1
    out += [
        "## Overview",
        "",
        "| Passed | Failed | Errored | Cancelled | Not graded |",
        "|---:|---:|---:|---:|---:|",
        f"| {counts['passed']} | {counts['failed']} | {counts['errored']} "
        f"| {counts['cancelled']} | {counts['ungraded']} |",
        "",
    ]

    sections: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for key in groups:
        sections.setdefault((key.eval_name, key.variant), []).append((key.stimulus, key.model))
    for (eval_name, variant), _rows in sections.items():
        heading = f"## Eval: {eval_name}" + (f" — variant {variant}" if variant else "")
        out += [heading, ""]
        threshold = summary_threshold(summaries, eval_name, variant)
        if threshold is not None:
            out += [f"Threshold: {format_score(threshold)}", ""]
        out += [
            "| Stimulus | Model | Trials | Passed | Pass rate | pass@k | pass^k | Flaky "
            "| Mean score | Tokens | Turns | Tool calls | Wall time | Errors |",
            "|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|",
        ]
        failed_lines: list[str] = []
        errored_lines: list[str] = []
        for key, trials in groups.items():
            if (key.eval_name, key.variant) != (eval_name, variant):
                continue
            s = stimulus_stats(trials)
            out.append(
                "| "
                + " | ".join(
                    [
                        _cell(key.stimulus),
                        _cell(reported_model_label(key, trials)),
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
                )
                + " |"
            )
            for record in trials:
                where = f"**{key.stimulus}** [{key.model_label}] trial {record.trial_index}"
                outcome = trial_outcome(record)
                if outcome == "errored":
                    if record.error is not None:
                        errored_lines.append(
                            f"- {where}: {record.error.phase} error `{record.error.code}`: "
                            f"{_inline(record.error.message)}"
                        )
                    else:
                        errored_lines.append(f"- {where}: a grader failed to run")
                if outcome in ("failed", "errored"):
                    for result in failed_graders(record):
                        state = "error" if result.status == "error" else "failed"
                        evidence = _inline(result.evidence) if result.evidence else "(no evidence)"
                        label = f"`{result.name}`"
                        if result.name != result.type:
                            label += f" ({result.type})"
                        failed_lines.append(
                            f"- {where}: {label} {state}"
                            f" — score {format_score(result.score)}: {evidence}"
                        )
                    grade = record.grade_result
                    if grade is not None:
                        failed_lines += [
                            f"- {where}: constraint violated: {_inline(v)}"
                            for v in grade.constraint_violations
                        ]
        out.append("")
        if failed_lines:
            out += ["### Failed graders", "", *failed_lines, ""]
        if errored_lines:
            out += ["### Errored trials", "", *errored_lines, ""]
    return "\n".join(out).rstrip("\n") + "\n"


class MarkdownReporter(FileReporter[MarkdownConfig]):
    """Writes ``report.md`` (temporary file, then rename) when the run ends."""

    metadata = ReporterMetadata(
        name="markdown",
        description="Writes report.md: per-stimulus tables, failed graders, errored trials.",
    )
    file_name = REPORT_FILE

    def render(self, run: RunInfo, outcome: RunOutcome) -> str | None:
        """The run's report. An experiment run gets the experiment report, except a shard:
        its report is rendered when the shards are merged."""
        if run.snapshot is None:
            return render_report(run, outcome.records, outcome.summaries, title=self.config.title)
        if run.shard is not None:
            return None
        return render_experiment_report(run, outcome.records, outcome.summaries)
