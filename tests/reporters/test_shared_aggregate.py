"""The console and the Markdown report share one aggregate of a run's report rows: each
record is counted once and each row kept once, and what either renders is what it renders
alone."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path
from typing import Any

import pytest

from tests.reporters.reporter_helpers import Driver, make_record, make_run
from vally.models.records import TrialError, TrialResultRecord
from vally_builtin.reporters.aggregate import ReportAggregate, RowAggregate, run_aggregate
from vally_builtin.reporters.console import ConsoleConfig, ConsoleReporter
from vally_builtin.reporters.markdown import MarkdownReporter


def _records() -> list[TrialResultRecord]:
    error = TrialError(phase="execute", code="VALLY_TIMEOUT", message="timed out")
    return [
        make_record("a", trial=0),
        make_record("b", trial=0, passed=False),
        make_record("a", trial=1, passed=False),
        make_record("b", trial=1, error=error),
        make_record("c", trial=0, model=None),
    ]


def _outputs(
    reporters: list[Any], run_dir: Path, capsys: pytest.CaptureFixture[str], report: str = ""
) -> tuple[str, str]:
    """The console's output and ``report.md`` of one run through ``reporters`` (with
    ``report`` as ``report.md`` before it, when given: the console names it)."""
    run_dir.mkdir()
    if report:
        (run_dir / "report.md").write_text(report, encoding="utf-8")
    records = _records()
    driver = Driver(*reporters)
    driver.run(make_run(run_dir, planned=len(records)), records)
    assert not driver.emitter.failures, driver.emitter.failures[0].error
    report = run_dir / "report.md"
    text = report.read_text(encoding="utf-8") if report.exists() else ""
    kept = [line for line in text.splitlines() if not line.startswith("_Rendered")]
    return capsys.readouterr().out.replace(str(run_dir), "<run>"), "\n".join(kept)


@pytest.mark.parametrize("console_first", [True, False])
def test_both_reporters_count_each_record_once_and_render_as_alone(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    console_first: bool,
) -> None:
    console = lambda: ConsoleReporter(ConsoleConfig(progress=False))  # noqa: E731
    _, alone_report = _outputs([MarkdownReporter()], tmp_path / "markdown", capsys)
    alone_out, _ = _outputs([console()], tmp_path / "console", capsys, report=alone_report)

    counted: list[TrialResultRecord] = []
    add = ReportAggregate.add

    def counting_add(self: ReportAggregate, record: TrialResultRecord) -> None:
        counted.append(record)
        add(self, record)

    monkeypatch.setattr(ReportAggregate, "add", counting_add)
    both = [console(), MarkdownReporter()]
    out, report = _outputs(both if console_first else both[::-1], tmp_path / "both", capsys)
    assert len(counted) == len(_records())
    assert (out, report) == (alone_out, alone_report)
    assert "`VALLY_TIMEOUT`" in report  # the Markdown report still lists its failures


def test_equal_runs_do_not_share_and_a_finished_run_s_aggregate_is_forgotten() -> None:
    first, second = make_run(None), make_run(None)
    assert first == second
    aggregate = run_aggregate(first, keep_failures=False)
    assert run_aggregate(first, keep_failures=True) is aggregate
    assert aggregate.keep_failures  # a reporter that lists failures asked before any record
    assert run_aggregate(second, keep_failures=False) is not aggregate
    gone = weakref.ref(aggregate)
    del first, aggregate
    gc.collect()
    assert gone() is None


def test_a_passing_row_holds_no_container_for_failures_or_models() -> None:
    row = ReportAggregate()
    row.add(make_record("a", model=None))
    counted: RowAggregate = next(iter(row.rows.values()))
    assert counted.failures is None and counted.reasons is None
    assert counted.reported_models == ("default",)
    row.add(make_record("a", trial=1, passed=False, model=None))
    assert counted.failures is not None and counted.reasons is not None
    assert counted.failures_left_out == 0
