"""The jsonl reporter: one flushed line per trial, critical failures, stdout streaming."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from reporter_helpers import Driver, make_record, make_run

from vally.contracts.events import RunOutcome
from vally.errors import OutputError
from vally.models.records import TrialResultRecord
from vally.plugins.capabilities import is_critical
from vally_builtin.reporters.jsonl import JsonlConfig, JsonlReporter


def test_each_line_is_flushed_before_the_next_trial(tmp_path: Path) -> None:
    reporter = JsonlReporter()
    driver = Driver(reporter)
    run = make_run(tmp_path, planned=2)
    first, second = make_record("a"), make_record("b")
    driver.emitter.emit("vally_run_start", run=run)
    driver.emitter.emit("vally_trial_end", run=run, record=first)
    lines = (tmp_path / "results.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1
    assert TrialResultRecord.model_validate_json(lines[0]) == first
    driver.emitter.emit("vally_trial_end", run=run, record=second)
    lines = (tmp_path / "results.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["stimulusName"] for line in lines] == ["a", "b"]
    driver.emitter.emit("vally_run_end", run=run, outcome=RunOutcome([first, second], []))
    assert reporter._files == {}  # closed at the end of the run
    assert driver.emitter.failures == []


def test_lines_are_camel_case_records(tmp_path: Path) -> None:
    Driver(JsonlReporter()).run(make_run(tmp_path, 1), [make_record()])
    data = json.loads((tmp_path / "results.jsonl").read_text(encoding="utf-8"))
    assert data["type"] == "trial-result"
    assert data["gradeResult"]["passed"] is True
    assert data["trajectory"]["metrics"]["tokenUsage"]["totalTokens"] == 120


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_unwritable_folder_fails_the_run(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        driver = Driver(JsonlReporter())
        with pytest.raises(OutputError, match="results file") as info:
            driver.emitter.emit("vally_run_start", run=make_run(locked / "run"))
        assert info.value.code == "VALLY_OUTPUT"
        assert driver.emitter.failures[0].critical is True
    finally:
        locked.chmod(0o700)


def test_write_failure_is_critical(tmp_path: Path) -> None:
    # A folder where the file should be: opening it fails whatever the user's rights.
    (tmp_path / "results.jsonl").mkdir()
    driver = Driver(JsonlReporter())
    with pytest.raises(OutputError):
        driver.emitter.emit("vally_run_start", run=make_run(tmp_path))
    assert JsonlReporter.metadata.critical is True
    assert is_critical(JsonlReporter)


def test_stdout_streaming(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = [make_record("a"), make_record("b")]
    Driver(JsonlReporter(JsonlConfig(stdout=True))).run(make_run(tmp_path, 2), records)
    out = capsys.readouterr().out.splitlines()
    assert [TrialResultRecord.model_validate_json(line) for line in out] == records
    assert len((tmp_path / "results.jsonl").read_text(encoding="utf-8").splitlines()) == 2


def test_no_run_dir_writes_no_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Driver(JsonlReporter(JsonlConfig(stdout=True))).run(make_run(None, 1), [make_record()])
    assert json.loads(capsys.readouterr().out)["stimulusName"] == "add-test"
    assert list(tmp_path.iterdir()) == []


def test_path_override_relative_to_run_dir(tmp_path: Path) -> None:
    Driver(JsonlReporter(JsonlConfig(path="out/records.jsonl"))).run(
        make_run(tmp_path, 1), [make_record()]
    )
    assert (tmp_path / "out" / "records.jsonl").is_file()
    assert not (tmp_path / "results.jsonl").exists()


def test_config_is_strict() -> None:
    with pytest.raises(ValueError, match="extra"):
        JsonlConfig.model_validate({"stdout": True, "bogus": 1})
