"""The console reporter: per-stimulus blocks, summary, artifacts, plain text off a TTY."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from reporter_helpers import Driver, make_record, make_run

from vally.contracts.events import RunOutcome
from vally.models.records import TrialError
from vally_builtin.reporters import stimulus_stats
from vally_builtin.reporters.console import ConsoleConfig, ConsoleReporter, make_console
from vally_builtin.reporters.jsonl import JsonlReporter
from vally_builtin.reporters.markdown import MarkdownReporter


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], records, **config) -> str:  # type: ignore[no-untyped-def]
    driver = Driver(ConsoleReporter(ConsoleConfig(**config)), JsonlReporter(), MarkdownReporter())
    driver.run(make_run(tmp_path, len(records)), records)
    assert driver.emitter.failures == []
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    return captured.out


def test_quickstart_block(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _run(tmp_path, capsys, [make_record()])
    lines = out.splitlines()
    assert "━━━ add-test ━━━" in lines
    assert "Write a unit test for add.js. Put it in add.test.js and make it pass." in lines
    for label in ("Tokens", "Turns", "Tool calls", "Wall time", "Errors", "Skills used", "Model"):
        assert any(line.strip().startswith(label) for line in lines), label
    assert "    Tokens       120 (in 100 / out 20)" in lines
    assert "  Graders (2/2)" in lines
    assert "    ✔ file-exists: Files matching 'add.test.js' found: add.test.js" in lines
    assert "  All graders passed." in lines
    assert "Saved artifacts" in lines
    assert f"  JSONL → {tmp_path / 'results.jsonl'}" in lines
    assert f"  Markdown → {tmp_path / 'report.md'}" in lines
    # Not a terminal: no ANSI escape codes.
    assert "\x1b[" not in out


def test_summary_table_and_multi_trial_stats(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = [make_record("sub", trial=0), make_record("sub", trial=1, passed=False)]
    out = _run(tmp_path, capsys, records, verbose=True)
    assert "Trial 0: PASSED (score 1.00)" in out
    assert "Trial 1: FAILED (score 0.50)" in out
    assert "  Graders (1/2)" in out
    assert "✘ output-contains: expected 'PASS' in output | not found" in out
    assert "✘ Failed: 1 of 2 graders failed" in out
    assert "Pass rate: 50.0%  pass@2: 100.0%  pass^2: 25.0%" in out
    assert "Flaky" in out
    summary = out[out.index("Summary") :]
    for header in ("eval", "stimulus", "model", "trials", "passed", "pass rate", "mean score"):
        assert header in summary
    row = next(line for line in summary.splitlines() if "sub" in line)
    assert "quickstart" in row and "1/2" in row and "50.0%" in row and "0.75" in row


def test_errored_trial_shows_its_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    error = TrialError(phase="execute", code="VALLY_EXECUTION", message="agent crashed\nbadly")
    out = _run(tmp_path, capsys, [make_record("boom", error=error)])
    assert "✘ Errored (execute): [VALLY_EXECUTION] agent crashed badly" in out
    assert "All graders passed." not in out


def test_threshold_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _run(tmp_path, capsys, [make_record(passed=False, threshold=0.7)])
    assert "✘ Failed: score 0.50 < threshold 0.70" in out


def test_stream_stderr_and_verbose(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    long_evidence = "line one\n" + "x" * 300
    driver = Driver(ConsoleReporter(ConsoleConfig(stream="stderr", verbose=True)))
    driver.run(make_run(tmp_path, 1), [make_record(evidence=long_evidence)])
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "━━━ add-test ━━━" in captured.err
    assert "Agent output" in captured.err and "    done" in captured.err
    assert "        line one" in captured.err  # full multi-line evidence when verbose


def test_evidence_is_cut_when_not_verbose(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _run(tmp_path, capsys, [make_record(evidence="y" * 1000)])
    line = next(line for line in out.splitlines() if "file-exists" in line)
    assert line.endswith("…") and len(line) < 300
    assert "Agent output" not in out


def test_colour_only_on_tty(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    tty = Tty()
    make_console(tty).print("[red]x[/red]")
    assert "\x1b[" in tty.getvalue()
    monkeypatch.setenv("NO_COLOR", "1")
    plain = Tty()
    make_console(plain).print("[red]x[/red]")
    assert plain.getvalue() == "x\n"


def test_no_trials(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "No trials were run." in _run(tmp_path, capsys, [])


def test_stats_pass_at_k() -> None:
    records = [make_record("s", trial=i, passed=p) for i, p in enumerate([1, 1, 0, 1, 1])]
    stats = stimulus_stats(records)
    assert (stats.graded, stats.passed, stats.k) == (5, 4, 5)
    assert stats.pass_rate == pytest.approx(0.8)
    assert stats.pass_at_k == 1.0
    assert stats.pass_to_the_k == pytest.approx(0.8**5)
    assert stats.flaky
    none_passed = stimulus_stats([make_record("s", trial=i, passed=False) for i in range(3)])
    assert none_passed.pass_at_k == 0.0 and not none_passed.flaky


def test_progress_bar_on_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    fake = Tty()
    monkeypatch.setattr("sys.stderr", fake)
    monkeypatch.setenv("NO_COLOR", "1")
    reporter = ConsoleReporter()
    driver = Driver(reporter)
    run = make_run(tmp_path, 2)
    driver.emitter.emit("vally_run_start", run=run)
    assert reporter._live is not None
    records = [make_record("a"), make_record("b", passed=False)]
    for record in records:
        driver.emitter.emit("vally_trial_end", run=run, record=record)
    task = reporter._live._progress.tasks[0]
    assert (task.completed, task.total) == (2, 2)
    assert task.fields["counts"] == "1 passed, 1 failed"
    driver.emitter.emit("vally_run_end", run=run, outcome=RunOutcome(records, []))
    assert reporter._live is None
    assert driver.emitter.failures == []
    assert "✘ quickstart/b [gpt-test]: 1/1 trials failed · 1 with output-contains" in (
        capsys.readouterr().out
    )


def test_no_live_display_off_a_terminal(tmp_path: Path) -> None:
    reporter = ConsoleReporter(ConsoleConfig(heartbeat="0s"))
    Driver(reporter).emitter.emit("vally_run_start", run=make_run(tmp_path, 3))
    assert reporter._live is None and reporter._heartbeat is None


def test_default_report_is_one_line_per_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = [
        make_record("sub", trial=0),
        make_record("sub", trial=1),
        make_record("sub", trial=2, passed=False),
        make_record("sub", trial=3),
    ]
    out = _run(tmp_path, capsys, records)
    assert "Graders (" not in out and "Metrics" not in out
    report = out[out.index("Failures (") :]
    failures = [line for line in report.splitlines() if line.startswith("  ✘ ")]
    assert failures == [
        "  ✘ quickstart/sub [gpt-test]: 1/4 trials failed · "
        "1 with output-contains: expected 'PASS' in output | not found"
    ]
    assert "Failures (1 of 4 trials; details in report.md, or run with -v)" in out
    verbose = _run(tmp_path / "v", capsys, records, verbose=True)
    assert verbose.count("  Graders (") == 4
    assert "Trial 2: FAILED (score 0.50)" in verbose


def test_quiet_prints_failures_and_nothing_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    error = TrialError(phase="execute", code="VALLY_EXECUTION", message="agent crashed")
    records = [make_record("a"), make_record("b", passed=False), make_record("c", error=error)]
    out = _run(tmp_path, capsys, records, quiet=True)
    lines = [line for line in out.splitlines() if line]
    assert lines[0].startswith("Failures (2 of 3 trials, 2 stimuli")
    assert lines[1].startswith(
        "  ✘ quickstart/b [gpt-test]: 1/1 trials failed · 1 with output-contains"
    )
    errored = (
        "  ! quickstart/c [gpt-test]: 0/1 trials failed, 1 errored · "
        "1 with errored (execute): [VALLY_EXECUTION] agent crashed"
    )
    assert lines[2] == errored
    assert lines[3].startswith("3 trials: 1 passed, 1 failed, 1 errored in ")
    assert len(lines) == 4, lines


def test_summary_names_the_model_the_agent_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = []
    for trial in (0, 1):
        record = make_record("a", trial=trial, model=None)
        assert record.trajectory is not None
        metadata = record.trajectory.metadata.model_copy(update={"model": "gpt-reported"})
        trajectory = record.trajectory.model_copy(update={"metadata": metadata})
        records.append(record.model_copy(update={"trajectory": trajectory}))
    out = _run(tmp_path, capsys, records)
    row = next(line for line in out.splitlines() if "quickstart" in line and "│" in line)
    assert "gpt-reported" in row and "default" not in row


def test_whether_the_stream_is_a_terminal_is_asked_once_per_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Log(io.StringIO):
        asked = 0

        def isatty(self) -> bool:
            Log.asked += 1
            return False

    log = Log()
    monkeypatch.setattr("sys.stdout", log)
    monkeypatch.setattr("sys.stderr", io.StringIO())
    reporter = ConsoleReporter(ConsoleConfig(heartbeat="0s"))
    driver = Driver(reporter)
    run = make_run(tmp_path, 50)
    driver.emitter.emit("vally_run_start", run=run)
    for index in range(50):
        driver.emitter.emit("vally_trial_end", run=run, record=make_record(f"s{index}"))
    assert Log.asked == 1
    assert log.getvalue().count("s49") == 1  # still one plain line per trial


def test_a_piped_failure_line_keeps_a_space_before_the_dot() -> None:
    from vally_builtin.reporters.console import trial_lines

    [line] = trial_lines(make_record("sub", passed=False))
    assert "score 0.50 · output-contains: expected 'PASS'" in line, line
    assert "0.50·" not in line


def test_the_closing_line_counts_cancelled_trials(tmp_path: Path) -> None:
    from vally_builtin.reporters.console import closing_lines

    cancelled = make_record("b").model_copy(update={"status": "cancelled", "grade_result": None})
    records = [make_record("a"), make_record("c", passed=False), cancelled]
    outcome = RunOutcome(records=records, summaries=[], cancelled=True)
    lines = closing_lines(make_run(tmp_path, 4), outcome)
    assert lines[-1].startswith("3 trials: 1 passed, 1 failed, 0 errored, 1 cancelled in "), lines
    assert lines[-1].endswith("verdict: INTERRUPTED")
    calm = closing_lines(make_run(tmp_path, 2), RunOutcome(records=records[:2], summaries=[]))
    assert "cancelled" not in calm[-1]


def test_failures_are_one_line_per_stimulus_with_the_most_common_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """200 trials of two stimuli, 60 failing: two failure lines, not 60."""
    error = TrialError(phase="execute", code="VALLY_EXECUTION", message="agent crashed")
    records = [make_record("ok", trial=i) for i in range(100)]
    records += [make_record("flaky", trial=i, passed=i >= 50) for i in range(90)]
    records += [make_record("flaky", trial=90 + i, error=error) for i in range(3)]
    for i in range(7):
        odd = make_record("flaky", trial=93 + i, passed=False)
        assert odd.grade_result is not None
        details = [d.model_copy(update={"evidence": "timed out"}) for d in odd.grade_result.details]
        grade = odd.grade_result.model_copy(update={"details": details})
        records.append(odd.model_copy(update={"grade_result": grade}))
    out = _run(tmp_path, capsys, records, quiet=True)
    lines = [line for line in out.splitlines() if line]
    assert lines[0] == "Failures (60 of 200 trials; details in report.md, or run with -v)"
    assert lines[1] == (
        "  ✘ quickstart/flaky [gpt-test]: 57/100 trials failed, 3 errored · "
        "50 with output-contains: expected 'PASS' in output | not found (+2 other reasons)"
    )
    assert lines[2].startswith("200 trials: 140 passed, 57 failed, 3 errored in ")


def test_a_sealed_row_keeps_its_failure_reasons(tmp_path: Path) -> None:
    """A merge adds up the shards' reasons: the most common one is the same."""
    from vally_builtin.reporters.aggregate import ReportAggregate

    records = [make_record("s", trial=i, passed=False) for i in range(4)]
    whole = ReportAggregate.of(records)
    halves = ReportAggregate.of_states(
        [ReportAggregate.of(records[:2]).state(), ReportAggregate.of(records[2:]).state()]
    )
    [row] = halves.rows.values()
    assert row.top_reason() == next(iter(whole.rows.values())).top_reason()
    assert row.top_reason() == ("output-contains: expected 'PASS' in output | not found", 4)


def test_progress_lines_off_a_terminal_every_step_of_the_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A quiet run in a log still says how far it got, on standard error, each 10% of the
    plan (counted by trials, with the run's clock replaced)."""
    err, out = io.StringIO(), io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    monkeypatch.setattr("sys.stdout", out)
    now = [1000.0]
    reporter = ConsoleReporter(ConsoleConfig(quiet=True, heartbeat="0s"))
    reporter.clock = lambda: now[0]  # type: ignore[method-assign]
    driver = Driver(reporter)
    run = make_run(tmp_path, 40, quiet=True)
    driver.emitter.emit("vally_run_start", run=run)
    for index in range(40):
        now[0] += 1.5
        record = make_record(f"s{index}", passed=index % 8 != 0)
        driver.emitter.emit("vally_trial_end", run=run, record=record)
    lines = err.getvalue().splitlines()
    assert len(lines) == 10, lines
    assert lines[0] == (
        "progress: 4/40 trials (10%), 1 failed, 0 errored, 0 running, elapsed 6.0s, ETA 54.0s"
    )
    assert (
        lines[-1] == "progress: 40/40 trials (100%), 5 failed, 0 errored, 0 running, elapsed 1m 00s"
    )
    assert out.getvalue() == ""  # quiet: nothing else while the run goes


def test_progress_steps_are_reported_once_each() -> None:
    from vally_builtin.reporters.console_live import ProgressSteps

    steps = ProgressSteps(20_000, 10)
    crossed = [done for done in range(0, 20_001, 500) if steps.crossed(done)]
    assert crossed == [2_000 * i for i in range(1, 11)]
    assert not ProgressSteps(10, 0).crossed(10)


def test_a_quiet_run_in_a_log_keeps_its_heartbeat(tmp_path: Path) -> None:
    reporter = ConsoleReporter(ConsoleConfig(quiet=True, heartbeat="1h"))
    driver = Driver(reporter)
    run = make_run(tmp_path, 3, quiet=True)
    driver.emitter.emit("vally_run_start", run=run)
    try:
        assert reporter._heartbeat is not None
    finally:
        driver.emitter.emit("vally_run_end", run=run, outcome=RunOutcome([], []))
    assert reporter._heartbeat is None
