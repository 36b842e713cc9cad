"""Tests of the CSV reporter, written only against vally's public API and vally.testing."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from vally_csv_reporter import COLUMNS, CsvReporter

from vally import ConfigError, GradeResult, RunInfo, RunOutcome, TrialResultRecord
from vally.plugins.session import Session
from vally.testing import make_session, make_trajectory


def _record(stimulus: str, passed: bool, trial: int = 0) -> TrialResultRecord:
    trajectory = make_trajectory("done", tool_calls=["write_file"], input_tokens=7)
    return TrialResultRecord(
        run_id="run-1",
        eval_name="demo",
        eval_file=None,
        stimulus_name=stimulus,
        stimulus=trajectory.stimulus,
        variant=None,
        model="m",
        trial_index=trial,
        trial_id=f"demo/{stimulus}/m/{trial}",
        status="success",
        error=None,
        started_at="2026-01-01T00:00:00.000Z",
        completed_at="2026-01-01T00:00:01.000Z",
        duration_ms=1000,
        grade_result=GradeResult(
            passed=passed, score=1.0 if passed else 0.25, threshold=None, mode="binary",
            has_graders=True, errored=False, details=[],
        ),
        trajectory=trajectory,
    )


def _run(tmp_path: Path) -> RunInfo:
    return RunInfo(
        run_id="run-1", command="eval", run_dir=tmp_path, planned_trials=2,
        started_at="2026-01-01T00:00:00.000Z",
    )


def test_rows_are_appended_and_flushed_per_trial(tmp_path: Path) -> None:
    session = make_session(CsvReporter)
    config = {"path": "out/trials.csv"}
    reporter = session.create("reporter", CsvReporter.metadata.name, config, where="test")
    run = _run(tmp_path)
    reporter.vally_run_start(run=run)
    reporter.vally_trial_end(run=run, record=_record("a", True))
    # flushed already: readable before the run ends
    rows = list(csv.reader((tmp_path / "out/trials.csv").open()))
    assert rows[0] == list(COLUMNS)
    assert rows[1][:8] == ["run-1", "demo", "a", "", "m", "0", "success", "true"]
    reporter.vally_trial_end(run=run, record=_record("b", False, trial=1))
    reporter.vally_run_end(run=run, outcome=RunOutcome(records=[], summaries=[]))
    rows = list(csv.reader((tmp_path / "out/trials.csv").open()))
    assert [r[2] for r in rows[1:]] == ["a", "b"]
    assert rows[2][7:9] == ["false", "0.2500"]
    assert rows[2][10:12] == ["7", "1"]


def test_default_path_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VALLY_CSV_REPORTER_PATH", str(tmp_path / "env.csv"))
    reporter = CsvReporter()
    run = _run(tmp_path / "run")
    reporter.vally_run_start(run=run)
    reporter.vally_run_end(run=run, outcome=RunOutcome(records=[], summaries=[]))
    assert (tmp_path / "env.csv").read_text().startswith("run_id,eval,stimulus")


def test_config_is_strict() -> None:
    session = make_session(CsvReporter)
    with pytest.raises(ConfigError, match="delimiter"):
        session.create("reporter", CsvReporter.metadata.name, {"delimiter": ";;"}, where="test")
    with pytest.raises(ConfigError, match="paht"):
        session.create("reporter", CsvReporter.metadata.name, {"paht": "x.csv"}, where="test")


def test_installed_entry_point_resolves_to_this_class() -> None:
    session = Session(environ={})
    assert session.plugin_class("reporter", CsvReporter.metadata.name) is CsvReporter
