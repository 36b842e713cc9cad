"""Run folders, trial paths and secret scrubbing."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from vally.contracts.protocols import TrialKey
from vally.engine.rundir import (
    REDACTED,
    Scrubber,
    create_run_dir,
    run_timestamp,
    safe_name,
    secret_values,
    trial_relpath,
)
from vally.errors import OutputError
from vally.models.records import TrialError


def test_timestamp_format() -> None:
    moment = datetime(2026, 6, 9, 20, 41, 10, 885_123, tzinfo=UTC)
    assert run_timestamp(moment) == "2026-06-09T20-41-10-885Z"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z", run_timestamp())


def test_run_dirs_are_unique(tmp_path: Path) -> None:
    first = create_run_dir(tmp_path / "out", name="x")
    second = create_run_dir(tmp_path / "out", name="x")
    assert first.name == "x" and second.name == "x-2"
    assert first.is_dir() and second.is_dir()


def test_output_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.write_text("not a folder")
    with pytest.raises(OutputError, match="is a file"):
        create_run_dir(target)
    with pytest.raises(OutputError, match="is a file"):
        create_run_dir(target / "below")


def test_trial_paths_are_safe() -> None:
    key = TrialKey("", "my eval", "s1", "openai/gpt-4o", 2)
    assert trial_relpath(key) == Path("my_eval", "s1", "openai_gpt-4o", "trial-2")
    assert trial_relpath(TrialKey("v=1,b", "e", "s", "default", 0)).parts[0] == "v=1,b"
    assert safe_name("..") == "_.."
    assert safe_name("") == "_"


def test_secret_values_by_name() -> None:
    env = {
        "OPENAI_API_KEY": "sk-abc123",
        "GITHUB_TOKEN": "ghp_xyz987",
        "DB_PASSWORD_FILE": "hunter22",
        "MY_SECRET": "s3cr3t!",
        "PATH": "/usr/bin",
        "SHORT_KEY": "ab",
    }
    assert secret_values(env) == {"sk-abc123", "ghp_xyz987", "hunter22", "s3cr3t!"}


def test_scrubber_replaces_in_text_data_and_records() -> None:
    scrub = Scrubber(["sk-abc123", 'quo"te'])
    assert scrub.text("key=sk-abc123;") == f"key={REDACTED};"
    assert scrub.data({"a": ["x sk-abc123"], "sk-abc123": 1}) == {
        "a": [f"x {REDACTED}"],
        REDACTED: 1,
    }
    record = TrialError(phase="execute", code="X", message='said sk-abc123 and quo"te')
    clean = scrub.record(record)
    assert clean.message == f"said {REDACTED} and {REDACTED}"
    untouched = TrialError(phase="execute", code="X", message="nothing")
    assert scrub.record(untouched) is untouched
    assert not Scrubber()
