"""The ``console`` reporter: progress while trials run, then the results and how the run
went.

While trials run: on a terminal, a live display (finished/planned trials, pass/fail counts
per eval, elapsed time, ETA) redrawn in place on standard error; when the stream is not a
terminal (CI logs, a pipe), one line per finished trial as it finishes (not with
``quiet``) and, on standard error, a progress line every ``heartbeat`` (30s by default)
and each time another ``progress_step`` percent of the planned trials finished (10% by
default), quiet or not, so a long run is never silent::

    progress: 1,234/20,000 trials (6%), 12 failed, 0 errored, 5 running, elapsed 1m 02s

At the end, by default: one line per stimulus (and model) with failed or errored trials,
saying how many of its trials failed and the most common reason (the failing grader and
its evidence, or the error) with how many trials had it, a summary table (one row per
eval, stimulus and model) and the saved artifact paths. With ``verbose`` (``-v``), or
when the run has a single trial, each stimulus gets
its full block instead: a header (``━━━ <stimulus> ━━━``), the prompt cut to one line, a
Metrics block (Tokens, Turns, Tool calls, Wall time, Errors, Skills used, Model), the
``Graders (n/m)`` list with ✔/✘ and evidence, the verdict and, with several trials, the
pass rate, pass@k, pass^k and flakiness. With ``quiet`` (``--quiet``) only the failure
lines, the progress lines (below) and the closing block are printed.

With ``style: lines`` (experiment runs and merges) it prints one line per finished trial,
and at the end the comparison of the variants with the baseline. Either style ends with
the closing block: trial totals, elapsed time, the overall verdict and, when a verdict
failed without ``--require-pass``, why the exit code is still 0. Colours are used only on
a terminal and never when ``NO_COLOR`` is set; the text reads the same without them.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import Field
from rich.console import Console
from rich.table import Table
from rich.text import Text

from vally import (
    BaseReporter,
    Duration,
    GraderResult,
    RecordCounter,
    ReporterMetadata,
    RunInfo,
    RunOutcome,
    StrictConfig,
    TrialKey,
    TrialResultRecord,
    hookimpl,
)
from vally_builtin.reporters import (
    GroupKey,
    StimulusStats,
    cap,
    failed_graders,
    format_count,
    format_ms,
    format_rate,
    format_score,
    group_records,
    one_line,
    trial_outcome,
)
from vally_builtin.reporters.aggregate import (
    ReportAggregate,
    RowAggregate,
    failure_reason,
    run_aggregate,
)
from vally_builtin.reporters.console_live import (
    Heartbeat,
    LiveDisplay,
    ProgressSteps,
    Tally,
    format_seconds,
)
from vally_builtin.reporters.table_parts import print_rows_in_parts

SEALED_KEY = "console.report-aggregate"
"""The key of the console's report rows in a shard's seal (``vally_seal_counters``)."""

PROMPT_LIMIT = 160
EVIDENCE_LIMIT = 200
VERBOSE_EVIDENCE_LIMIT = 4000
OUTPUT_LIMIT = 2000

ARTIFACTS = (
    ("JSONL", "results.jsonl"),
    ("Run summary", "run-summary.jsonl"),
    ("Markdown", "report.md"),
    ("JUnit", "junit.xml"),
)
"""Files shown under "Saved artifacts" when they exist in the run folder."""


class ConsoleConfig(StrictConfig):
    """Options of the ``console`` reporter.

    Attributes:
        verbose: Print each stimulus's full block, the agent's output and full grader
            evidence (still capped).
        quiet: Print only the failing stimuli and the closing block (no live display, no
            per-trial lines, no summary table; progress lines off a terminal stay).
        stream: Where the report goes; ``stderr`` when records stream to stdout.
        progress: Show the live display while trials run (only ever on a terminal).
        heartbeat: When the stream is not a terminal, print a progress line on standard
            error this often, also with ``quiet`` (``0s`` turns it off).
        progress_step: When the stream is not a terminal, also print the progress line
            each time another this many percent of the planned trials finished (``0``
            turns it off).
        style: ``report`` (failures and a summary at the end) or ``lines`` (a line per
            finished trial, then the comparison with the baseline).
    """

    verbose: bool = False
    quiet: bool = False
    stream: Literal["stdout", "stderr"] = "stdout"
    progress: bool = True
    heartbeat: Duration = 30.0
    progress_step: float = Field(default=10.0, ge=0, le=100)
    style: Literal["report", "lines"] = "report"


def _is_terminal(file: Any) -> bool:
    isatty = getattr(file, "isatty", None)
    return bool(isatty and isatty())


def _use_color(file: Any) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    return _is_terminal(file)


def _terminal_size(file: Any) -> tuple[int, int]:
    """``file``'s terminal size, read once (rich would ask the terminal on every print)."""
    try:
        size = os.get_terminal_size(file.fileno())
    except (AttributeError, OSError, ValueError):
        return 80, 25
    return size.columns or 80, size.lines or 25


def make_console(file: Any) -> Console:
    """A rich console over ``file``: colours only on a terminal without ``NO_COLOR``; its
    size is fixed when it is made, so printing never asks the terminal again."""
    color = _use_color(file)
    columns = int(os.environ.get("COLUMNS", "0") or 0)
    width, height = _terminal_size(file) if color else (120, 25)
    width = columns or width
    return Console(
        file=file,
        no_color=not color,
        color_system="auto" if color else None,
        force_terminal=color,
        highlight=False,
        emoji=False,
        width=width,
        height=height,
        soft_wrap=True,
    )


class ConsoleReporter(BaseReporter[ConsoleConfig]):
    """Shows the run's progress while it goes, then the results and how the run went."""

    metadata = ReporterMetadata(
        name="console",
        description="Progress while trials run; failures, a summary and the verdict after.",
    )

    _tally: Tally | None = None
    _aggregate: ReportAggregate | None = None
    _live: LiveDisplay | None = None
    _heartbeat: Heartbeat | None = None
    _steps: ProgressSteps | None = None
    _print_lock: threading.Lock | None = None
    _stream_is_terminal: bool = False
    clock: Callable[[], float] = staticmethod(time.monotonic)
    """Where the run's elapsed time is read (monotonic seconds)."""

    # ------------------------------------------------------------------ hooks

    @property
    def stream(self) -> Any:
        """Where the report goes."""
        return sys.stderr if self.config.stream == "stderr" else sys.stdout

    def _verbose(self, run: RunInfo) -> bool:
        return self.config.verbose or bool(run.options.get("verbose", False))

    def _quiet(self, run: RunInfo) -> bool:
        return self.config.quiet or bool(run.options.get("quiet", False))

    def _print(self, line: str) -> None:
        lock = self._print_lock or threading.Lock()
        with lock:
            print(line, file=self.stream, flush=True)

    def _progress(self, line: str) -> None:
        """Print a progress line on standard error (never mixed into the records)."""
        lock = self._print_lock or threading.Lock()
        with lock:
            print(line, file=sys.stderr, flush=True)

    @hookimpl
    def vally_run_start(self, run: RunInfo) -> None:
        """Start the live display (terminal) or the heartbeat (not a terminal)."""
        self._tally = Tally(run.planned_trials, list(run.evals), clock=self.clock)
        self._aggregate = run_aggregate(run, keep_failures=False)
        self._print_lock = threading.Lock()
        self._stream_is_terminal = _is_terminal(self.stream)  # asked once, not per trial
        if run.planned_trials <= 0:
            return
        if not self._stream_is_terminal:
            self._steps = ProgressSteps(run.planned_trials, self.config.progress_step)
            if self.config.heartbeat > 0:
                self._heartbeat = Heartbeat(self._tally, self.config.heartbeat, self._progress)
                self._heartbeat.start()
        if self._quiet(run):
            return
        if self.config.style == "report" and self.config.progress and sys.stderr.isatty():
            self._live = LiveDisplay(run, self._tally, make_console(sys.stderr))
            self._live.start()

    @hookimpl
    def vally_trial_start(self, run: RunInfo, key: TrialKey) -> None:
        """Count the trial as running."""
        if self._tally is not None:
            self._tally.start()

    @hookimpl
    def vally_trial_end(self, run: RunInfo, record: TrialResultRecord) -> None:
        """Count the trial, print its line (``lines`` style, or any style when the stream
        is not a terminal; never when quiet) and update the live display."""
        if self._tally is not None:
            self._tally.finish(record)
        if self._aggregate is not None:
            self._aggregate.add_once(record)
        per_trial = self.config.style == "lines" or not self._stream_is_terminal
        if per_trial and not self._quiet(run):
            for line in trial_lines(record, verbose=self._verbose(run)):
                self._print(line)
        tally, steps = self._tally, self._steps
        if steps is not None and tally is not None and steps.crossed(tally.done):
            self._progress(tally.progress_line())
        if self._live is not None:
            self._live.update()

    @hookimpl(trylast=True)
    def vally_run_end(self, run: RunInfo, outcome: RunOutcome) -> None:
        """Stop the live display and heartbeat, and print the report (after the file
        writers ran)."""
        self._stop_progress()
        stream = self.stream
        verbose, quiet = self._verbose(run), self._quiet(run)
        aggregate = self._aggregate
        if aggregate is None or aggregate.trials != len(outcome.records):
            # Records that did not go by (a resumed run's earlier trials, a merge): what the
            # shards' seals counted, else one pass.
            aggregate = sealed_report_aggregate(outcome) or ReportAggregate.of(
                outcome.records, keep_failures=False
            )
        if self.config.style == "lines":
            print(file=stream)
            for line in aggregate_failure_lines(run, aggregate) if quiet else []:
                print(line, file=stream)
            for line in comparison_lines(run, aggregate):
                print(line, file=stream)
        elif quiet:
            for line in aggregate_failure_lines(run, aggregate):
                print(line, file=stream)
        else:
            console = make_console(stream)
            full = verbose or aggregate.trials == 1
            render_run(
                console,
                run,
                outcome.records,
                verbose=verbose,
                full=full,
                cancelled=outcome.cancelled,
                aggregate=aggregate,
            )
        print(file=stream)
        for line in closing_lines(run, outcome, aggregate):
            print(line, file=stream)
        stream.flush()

    @hookimpl
    def vally_seal_counters(self, run: RunInfo) -> Mapping[str, RecordCounter] | None:
        """The report rows and totals, counted of a shard's (or a merge's) records."""
        return {SEALED_KEY: ReportAggregate(keep_failures=False)}

    def _stop_progress(self) -> None:
        if self._heartbeat is not None:
            heartbeat, self._heartbeat = self._heartbeat, None
            heartbeat.stop()
        if self._live is not None:
            live, self._live = self._live, None
            live.stop()


# ---------------------------------------------------------------------- rendering


def trial_lines(record: TrialResultRecord, *, verbose: bool = False) -> list[str]:
    """A finished trial as one line (and, ``verbose``, its failed graders and output)."""
    grade = record.grade_result
    if record.status != "success":
        mark, text = "!", f"{record.status}: {record.error.message if record.error else ''}"
    elif grade is None:
        mark, text = "·", "not graded"
    else:
        mark = "✔" if grade.passed else "✘"
        text = f"score {grade.score:.2f}"
        failing = [] if grade.passed or verbose else failed_graders(record)
        if failing:
            evidence = f": {failing[0].evidence}" if failing[0].evidence else ""
            text += " " + one_line(f"· {failing[0].name}{evidence}", EVIDENCE_LIMIT)
    model = f" [{record.model}]" if record.model else ""
    variant = f"{record.variant} · " if record.variant else ""
    lines = [
        f"  {mark} {variant}{record.eval_name}/{record.stimulus_name}{model} "
        f"#{record.trial_index}: {text}"
    ]
    if verbose and grade is not None:
        lines += [
            f"      ✘ {detail.name}: {detail.evidence[:OUTPUT_LIMIT]}"
            for detail in grade.details
            if not detail.passed
        ]
        if record.trajectory is not None and record.trajectory.output:
            lines.append(f"      output: {record.trajectory.output[:OUTPUT_LIMIT]}")
    return lines


def closing_lines(
    run: RunInfo, outcome: RunOutcome, aggregate: ReportAggregate | None = None
) -> list[str]:
    """How the run went, in one line (totals, elapsed time, overall verdict), and a hint
    when a verdict failed but the exit code will not say so (no ``--require-pass``).
    ``aggregate`` holds the outcome's records counted already (else they are read)."""
    if aggregate is None:
        aggregate = ReportAggregate.of(outcome.records, keep_failures=False)
    counts = aggregate.outcomes
    verdicts = {s.verdict for s in outcome.summaries}
    if not outcome.summaries:  # re-grading: no summaries, the trials decide
        verdicts = {"fail"} if counts["failed"] or counts["errored"] else set()
        verdicts |= {"pass"} if counts["passed"] else set()
    verdict = "FAIL" if "fail" in verdicts else "PASS" if "pass" in verdicts else "NONE"
    if outcome.cancelled:
        verdict = "INTERRUPTED"
    trials = aggregate.trials
    cancelled = f", {counts['cancelled']} cancelled" if counts.get("cancelled") else ""
    line = (
        f"{trials} trial{'' if trials == 1 else 's'}: {counts['passed']} passed, "
        f"{counts['failed']} failed, {counts['errored']} errored{cancelled} in "
        f"{_elapsed(run)} · verdict: {verdict}"
    )
    lines = [*_per_eval_lines(outcome), line]
    if aggregate.cost.spent:
        lines.append(f"  cost: {aggregate.cost.line()}")
    if verdict == "FAIL" and run.options.get("require_pass") is False and not counts["errored"]:
        lines.append(
            "  The exit code is still 0 because --require-pass was not given; "
            "with --require-pass a failed verdict exits 1."
        )
    return lines


def _per_eval_lines(outcome: RunOutcome) -> list[str]:
    """One line per eval (and variant) when the run has several: its passed trials and
    verdict, so the closing block says which eval failed."""
    if len(outcome.summaries) < 2:
        return []
    lines = []
    for summary in outcome.summaries:
        name = f"{summary.variant} · {summary.eval_name}" if summary.variant else summary.eval_name
        graded = summary.passed + summary.failed
        errored = f", {summary.errored} errored" if summary.errored else ""
        lines.append(
            f"  {name}: {summary.passed}/{graded} passed{errored} · {summary.verdict.upper()}"
        )
    return lines


def _elapsed(run: RunInfo) -> str:
    """Time since the run started, as ``12.3s`` or ``4m 05s``."""
    try:
        started = datetime.fromisoformat(run.started_at)
    except ValueError:
        return "?"
    if started.tzinfo is None:
        started = started.replace(tzinfo=UTC)
    return format_seconds(max(0.0, (datetime.now(UTC) - started).total_seconds()))


def failure_line(record: TrialResultRecord) -> str | None:
    """One line for a failed or errored trial (its first failing grader's evidence, or its
    error); None for any other trial."""
    outcome = trial_outcome(record)
    reason = failure_reason(record, outcome)
    if reason is None:
        return None
    model = f" [{record.model}]" if record.model else ""
    variant = f"{record.variant} · " if record.variant else ""
    where = f"{variant}{record.eval_name}/{record.stimulus_name}{model} #{record.trial_index}"
    mark = "!" if outcome == "errored" else "✘"
    return f"  {mark} {where}: {one_line(reason, EVIDENCE_LIMIT)}"


def stimulus_failure_line(key: GroupKey, row: RowAggregate) -> str | None:
    """One line for a stimulus (and model) with failed or errored trials: how many of its
    trials failed and the most common reason with how many trials had it, e.g.
    ``✘ ev/sub [gpt]: 57/100 trials failed · 41 with tests: exit code 1 (+2 other reasons)``;
    None when none failed or errored."""
    top = row.top_reason()
    if top is None:
        return None
    stats = row.stats()
    model = f" [{key.model}]" if key.model else ""
    variant = f"{key.variant} · " if key.variant else ""
    count = f"{stats.failed:,}/{stats.trials:,} trials failed"
    if stats.errored:
        count += f", {stats.errored:,} errored"
    mark = "!" if not stats.failed else "✘"
    reason, seen = top
    others = len(row.reasons or ()) - 1 + (1 if row.other_reasons else 0)
    more = f" (+{others} other reason{'' if others == 1 else 's'})" if others else ""
    return (
        f"  {mark} {variant}{key.eval_name}/{key.stimulus}{model}: {count} · "
        f"{seen:,} with {one_line(reason, EVIDENCE_LIMIT)}{more}"
    )


def failure_lines(run: RunInfo, records: Iterable[TrialResultRecord]) -> list[str]:
    """A heading and one line per failed or errored trial, in the report's order; nothing
    when every trial passed (see :func:`aggregate_failure_lines`)."""
    return aggregate_failure_lines(run, ReportAggregate.of(records, keep_failures=False))


def sealed_report_aggregate(outcome: RunOutcome) -> ReportAggregate | None:
    """The report rows added up from the sealed shards' (a merge of sealed shards), or
    None when the outcome has none or they do not add up to its records."""
    states = outcome.sealed.get(SEALED_KEY)
    if not states:
        return None
    try:
        aggregate = ReportAggregate.of_states(states, keep_failures=False)
    except (KeyError, TypeError, ValueError):
        return None
    return aggregate if aggregate.trials == len(outcome.records) else None


def aggregate_failure_lines(run: RunInfo, aggregate: ReportAggregate) -> list[str]:
    """A heading and one line per stimulus (and model) with failed or errored trials
    counted into ``aggregate`` (:func:`stimulus_failure_line`), in the report's order;
    nothing when every trial passed."""
    if not aggregate.failures:
        return []
    rows = report_order(aggregate.rows, run)
    lines = [
        line
        for key in rows
        if (line := stimulus_failure_line(key, aggregate.rows[key])) is not None
    ]
    where = "report.md" if run.run_dir and (run.run_dir / "report.md").exists() else ""
    more = f"details in {where}, or run with -v" if where else "details with -v"
    stimuli = f", {len(lines):,} stimuli" if len(lines) > 1 else ""
    return [
        f"Failures ({aggregate.failures:,} of {aggregate.trials:,} trials{stimuli}; {more})",
        *lines,
    ]


def report_order(groups: Mapping[GroupKey, object], run: RunInfo) -> list[GroupKey]:
    """The report's rows in the run's order: evals in plan order, variants in the
    experiment's order, stimuli as the spec lists them; anything unknown after, sorted
    (see :func:`iter_report_order`)."""
    return list(iter_report_order(groups, run))


def iter_report_order(groups: Mapping[GroupKey, object], run: RunInfo) -> Iterator[GroupKey]:
    """The keys of :func:`report_order`, one at a time.

    Rows of the run's evals and stimuli are found in that order from the spec's names
    (each eval's names are read once), holding nothing a row but, for the while, a
    dictionary of each eval's names; only rows of an eval or a stimulus the run does not
    know (a merge or a resumed run of a changed spec) make it sort every row. The keys
    given are equal to ``groups``' keys, not the same objects."""
    evals = {name: i for i, name in enumerate(run.evals)}
    variants = {name: i for i, name in enumerate(run.variants)}
    pairs: dict[str, set[tuple[str, str]]] = {}  # each eval's (variant, model)s: few
    for key in groups:
        pairs.setdefault(key.eval_name, set()).add((key.variant, key.model))
    if not pairs.keys() <= evals.keys():
        yield from _sorted_order(groups, run, evals, variants)
        return
    # each eval's stimuli in their first places, and looked up by name
    names = {name: dict.fromkeys(run.stimuli.get(name, ())) for name in pairs}
    if any(key.stimulus not in names[key.eval_name] for key in groups):
        yield from _sorted_order(groups, run, evals, variants)
        return
    for eval_name in sorted(pairs, key=evals.__getitem__):
        present = pairs[eval_name]
        listed = sorted({v for v, _ in present if v in variants}, key=variants.__getitem__)
        for variant in listed:
            models = sorted(m for v, m in present if v == variant)
            for stimulus in names[eval_name]:
                for model in models:
                    if (key := GroupKey(eval_name, variant, stimulus, model)) in groups:
                        yield key
        unlisted = sorted((v, m) for v, m in present if v not in variants)
        for stimulus in names[eval_name]:
            for variant, model in unlisted:
                if (key := GroupKey(eval_name, variant, stimulus, model)) in groups:
                    yield key


def _sorted_order(
    groups: Mapping[GroupKey, object],
    run: RunInfo,
    evals: Mapping[str, int],
    variants: Mapping[str, int],
) -> list[GroupKey]:
    """:func:`report_order` by sorting every row on its places (rows the run does not
    know among them)."""
    late = len(groups) + len(evals) + len(variants)
    places: dict[str, dict[str, int]] = {}

    def stimulus_places(eval_name: str) -> dict[str, int]:
        """Each stimulus of ``eval_name`` by its first place in the spec, made once."""
        found = places.get(eval_name)
        if found is None:
            found = places[eval_name] = {}
            for i, name in enumerate(run.stimuli.get(eval_name, ())):
                found.setdefault(name, i)
        return found

    def position(key: GroupKey) -> tuple[int, int, int, GroupKey]:
        stimulus = stimulus_places(key.eval_name).get(key.stimulus, late)
        return (evals.get(key.eval_name, late), variants.get(key.variant, late), stimulus, key)

    return sorted(groups, key=position)


class RowsInOrder(Mapping[GroupKey, RowAggregate]):
    """``rows`` in the run's order (:func:`iter_report_order`, found again for each
    pass): a view, neither a second dictionary of the rows nor a list of their keys."""

    def __init__(self, rows: Mapping[GroupKey, RowAggregate], run: RunInfo) -> None:
        self._rows = rows
        self._run = run

    def __getitem__(self, key: GroupKey) -> RowAggregate:
        return self._rows[key]

    def __iter__(self) -> Iterator[GroupKey]:
        return iter_report_order(self._rows, self._run)

    def __len__(self) -> int:
        return len(self._rows)


def comparison_lines(run: RunInfo, aggregate: ReportAggregate) -> list[str]:
    """The comparison of the run's variants with its baseline (nothing without a baseline),
    from the run's records counted in ``aggregate``."""
    if run.baseline is None:
        return []
    from vally_builtin.reporters.experiment import compare_stats, comparison_table

    observed = aggregate.variant_stats(list(run.variants))
    return comparison_table(compare_stats(observed, run.baseline, shard=run.shard))


def render_run(
    console: Console,
    run: RunInfo,
    records: Sequence[TrialResultRecord],
    *,
    verbose: bool = False,
    full: bool = True,
    cancelled: bool = False,
    aggregate: ReportAggregate | None = None,
) -> None:
    """Print the per-stimulus blocks (``full``: every trial, so the records are read) or
    one line per failure, the summary table and the saved artifacts. ``aggregate`` holds
    ``records`` counted already; without ``full`` nothing else is read."""
    if aggregate is None:
        aggregate = ReportAggregate.of(records, keep_failures=False)
    rows = RowsInOrder(aggregate.rows, run)
    if full:
        render_blocks(console, run, records, rows, verbose=verbose)
    else:
        failures = aggregate_failure_lines(run, aggregate)
        if failures:
            console.print()
        for line in failures:
            console.print(Text(line), soft_wrap=True)
    if not rows:
        console.print("No trials were run.")
    else:
        render_summary(console, rows)
    if cancelled:
        console.print(Text("Run interrupted: results are partial.", style="bold yellow"))
    render_artifacts(console, run.run_dir)


def render_blocks(
    console: Console,
    run: RunInfo,
    records: Iterable[TrialResultRecord],
    rows: Mapping[GroupKey, RowAggregate],
    *,
    verbose: bool = False,
) -> None:
    """Print a block per stimulus and model (``rows``, in their order) with every trial."""
    grouped = group_records(records)
    evals = {k.eval_name for k in rows}
    models = {k.model for k in rows}
    variants = {k.variant for k in rows}
    for key, row in rows.items():
        trials = grouped.get(key)
        if not trials:
            continue
        title = key.stimulus
        if len(evals) > 1:
            title = f"{key.eval_name} / {title}"
        if len(variants) > 1 and key.variant:
            title = f"{key.variant} · {title}"
        if len(models) > 1:
            title = f"{title} [{row.model_label(key)}]"
        render_stimulus(console, title, trials, row.stats(), verbose=verbose)


def render_stimulus(
    console: Console,
    title: str,
    trials: Sequence[TrialResultRecord],
    stats: StimulusStats,
    *,
    verbose: bool = False,
) -> None:
    """Print one stimulus block: header, prompt, and each trial's metrics and graders."""
    console.print()
    console.print(Text(f"━━━ {title} ━━━", style="bold cyan"))
    first = trials[0]
    prompts = first.stimulus.prompts
    prompt = one_line(prompts[0], PROMPT_LIMIT)
    if len(prompts) > 1:
        prompt += f" (+{len(prompts) - 1} more turns)"
    console.print(Text(prompt, style="dim"))
    several = len(trials) > 1
    shown_passing = False
    for record in trials:
        passing = trial_outcome(record) == "passed"
        if several and passing and shown_passing and not verbose:
            render_trial_line(console, record)
            continue
        render_trial(console, record, verbose=verbose, heading=several)
        shown_passing = shown_passing or passing
    if several:
        console.print()
        line = (
            f"  Trials: {stats.trials}  Passed: {stats.passed}/{stats.graded}  "
            f"Pass rate: {format_rate(stats.pass_rate)}  "
            f"pass@{stats.k}: {format_rate(stats.pass_at_k)}  "
            f"pass^{stats.k}: {format_rate(stats.pass_to_the_k)}"
        )
        if stats.errored:
            line += f"  Errored: {stats.errored}"
        console.print(line)
        if stats.flaky:
            console.print(Text("  ⚠ Flaky: some trials passed and some failed.", style="yellow"))


def _metrics_rows(record: TrialResultRecord) -> list[tuple[str, str]]:
    traj = record.trajectory
    if traj is None:
        return [("Model", record.model or "default"), ("Wall time", format_ms(record.duration_ms))]
    m = traj.metrics
    usage = m.token_usage
    tokens = format_count(usage.total_tokens)
    if usage.total_tokens:
        tokens += f" (in {usage.input_tokens:,} / out {usage.output_tokens:,})"
    tools = format_count(m.tool_call_count)
    if m.tool_call_breakdown:
        parts = sorted(m.tool_call_breakdown.items(), key=lambda kv: (-kv[1], kv[0]))
        tools += " (" + ", ".join(f"{name}×{n}" for name, n in parts[:6])  # noqa: RUF001
        tools += ", …)" if len(parts) > 6 else ")"
    skills = sorted(m.skill_activation_breakdown) or list(traj.metadata.skills_loaded)
    wall = m.wall_time_ms or record.duration_ms
    return [
        ("Tokens", tokens),
        ("Turns", format_count(m.turn_count)),
        ("Tool calls", tools),
        ("Wall time", format_ms(wall)),
        ("Errors", format_count(m.error_count)),
        ("Skills used", ", ".join(skills) if skills else "none"),
        ("Model", traj.metadata.model or record.model or "default"),
    ]


def _evidence(result: GraderResult, verbose: bool) -> str:
    if not result.evidence:
        return ""
    if verbose:
        return cap(result.evidence, VERBOSE_EVIDENCE_LIMIT)
    return one_line(result.evidence, EVIDENCE_LIMIT)


def render_trial_line(console: Console, record: TrialResultRecord) -> None:
    """One line for a passing trial after the first (its graders all passed as shown)."""
    label = Text(f"Trial {record.trial_index}: ", style="bold")
    label.append("PASSED", style="bold green")
    facts = []
    if record.grade_result is not None:
        facts.append(f"score {format_score(record.grade_result.score)}")
    if record.trajectory is not None:
        m = record.trajectory.metrics
        facts.append(f"{format_count(m.token_usage.total_tokens)} tokens")
        facts.append(f"{format_count(m.turn_count)} turns")
        facts.append(f"{format_count(m.tool_call_count)} tool calls")
        facts.append(format_ms(m.wall_time_ms or record.duration_ms))
    label.append(" (" + ", ".join(facts) + ")")
    console.print()
    console.print(label)


def render_trial(
    console: Console, record: TrialResultRecord, *, verbose: bool = False, heading: bool = False
) -> None:
    """Print one trial: metrics, graders with evidence, and its verdict or error."""
    outcome = trial_outcome(record)
    if heading:
        console.print()
        style = {"passed": "green", "failed": "red", "errored": "red"}.get(outcome, "yellow")
        label = Text(f"Trial {record.trial_index}: ", style="bold")
        label.append(outcome.upper(), style=f"bold {style}")
        if record.grade_result is not None and outcome in ("passed", "failed"):
            label.append(f" (score {format_score(record.grade_result.score)})")
        console.print(label)
    console.print()
    console.print(Text("  Metrics", style="bold"))
    rows = _metrics_rows(record)
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        console.print(f"    {name.ljust(width)}  {value}", highlight=False)

    grade = record.grade_result
    if grade is not None and grade.details:
        passed = sum(1 for d in grade.details if d.passed and d.status == "success")
        console.print()
        console.print(Text(f"  Graders ({passed}/{len(grade.details)})", style="bold"))
        for result in grade.details:
            _render_grader(console, result, verbose)
    if verbose and record.trajectory is not None and record.trajectory.output:
        console.print()
        console.print(Text("  Agent output", style="bold"))
        for line in cap(record.trajectory.output, OUTPUT_LIMIT).splitlines():
            console.print(Text(f"    {line}"))
    console.print()
    _render_verdict(console, record, outcome)


def _render_grader(console: Console, result: GraderResult, verbose: bool) -> None:
    if result.status == "error":
        mark, style, state = "✘", "red", " (grader error)"
    elif result.passed:
        mark, style, state = "✔", "green", ""
    else:
        mark, style, state = "✘", "red", ""
    label = result.name if result.name == result.type else f"{result.name} ({result.type})"
    line = Text(f"    {mark} ", style=style)
    line.append(f"{label}{state}", style="bold" if not result.passed else "")
    evidence = _evidence(result, verbose)
    if evidence and "\n" not in evidence:
        line.append(f": {evidence}")
    console.print(line)
    if evidence and "\n" in evidence:
        for part in evidence.splitlines():
            console.print(Text(f"        {part}"))


def _render_verdict(console: Console, record: TrialResultRecord, outcome: str) -> None:
    grade = record.grade_result
    if outcome == "cancelled":
        console.print(Text("  Cancelled before it finished.", style="yellow"))
        return
    if outcome == "errored":
        if record.error is not None:
            text = f"  ✘ Errored ({record.error.phase}): [{record.error.code}] "
            text += one_line(record.error.message, 400)
        else:
            broken = [d.name for d in (grade.details if grade else []) if d.status == "error"]
            text = "  ✘ Errored: grader error in " + (", ".join(broken) or "grading")
        console.print(Text(text, style="bold red"))
        return
    if grade is None:
        console.print(Text("  Not graded (grading was skipped).", style="yellow"))
        return
    if outcome == "ungraded":
        console.print(Text("  No graders: nothing was checked.", style="yellow"))
        return
    if grade.passed:
        if grade.mode == "threshold" and grade.threshold is not None:
            text = (
                f"All graders passed (score {format_score(grade.score)} ≥ "
                f"threshold {format_score(grade.threshold)})."
                if all(d.passed for d in grade.details)
                else f"Passed: score {format_score(grade.score)} ≥ threshold "
                f"{format_score(grade.threshold)}."
            )
        else:
            text = "All graders passed."
        console.print(Text(f"  {text}", style="bold green"))
        return
    reasons: list[str] = []
    required = [d.name for d in grade.details if d.required and not d.passed]
    if required:
        reasons.append("required grader failed: " + ", ".join(required))
    if grade.constraint_violations:
        reasons.append("constraints violated: " + "; ".join(grade.constraint_violations))
    if grade.mode == "threshold" and grade.threshold is not None:
        reasons.append(
            f"score {format_score(grade.score)} < threshold {format_score(grade.threshold)}"
        )
    else:
        failed = sum(1 for d in grade.details if not d.passed)
        if failed:
            reasons.append(f"{failed} of {len(grade.details)} graders failed")
    console.print(Text("  ✘ Failed: " + ("; ".join(reasons) or "verdict failed"), style="bold red"))


def render_summary(console: Console, rows: Mapping[GroupKey, RowAggregate]) -> None:
    """Print the summary table: one row per eval, stimulus and model, in ``rows``' order
    (a part of the rows at a time, see :func:`print_rows_in_parts`)."""
    console.print()
    console.print(Text("Summary", style="bold"))
    table = Table()
    show_variant = any(k.variant for k in rows)
    if show_variant:
        table.add_column("variant")
    for name in ("eval", "stimulus", "model"):
        table.add_column(name)
    for name in ("trials", "passed", "pass rate", "mean score"):
        table.add_column(name, justify="right")
    print_rows_in_parts(console, table, lambda: _summary_cells(rows, show_variant))


def _summary_cells(
    rows: Mapping[GroupKey, RowAggregate], show_variant: bool
) -> Iterator[list[str]]:
    """The summary table's cells, a row at a time."""
    for key, aggregate in rows.items():
        s = aggregate.stats()
        passed = f"{s.passed}/{s.graded}"
        if s.errored:
            passed += f" ({s.errored} errored)"
        row = [
            key.eval_name,
            key.stimulus,
            aggregate.model_label(key),
            str(s.trials),
            passed,
            format_rate(s.pass_rate),
            format_score(s.mean_score),
        ]
        yield [key.variant or "—", *row] if show_variant else row


def render_artifacts(console: Console, run_dir: Path | None) -> None:
    """Print the paths of the files written to the run folder."""
    if run_dir is None:
        return
    found = [(label, run_dir / name) for label, name in ARTIFACTS if (run_dir / name).exists()]
    if not found:
        return
    console.print()
    console.print(Text("Saved artifacts", style="bold"))
    for label, path in found:
        console.print(Text(f"  {label} → {path}"), soft_wrap=True)
