"""Run folders, trial paths and secret scrubbing."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from vally.contracts.protocols import TrialKey
from vally.engine.records.run_folder import (
    REDACTED,
    SLUG_LENGTH,
    Scrubber,
    create_run_dir,
    find_trial_dir,
    legacy_trial_relpath,
    name_folder,
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
    eval_part, stimulus_part, model_part, trial_part = trial_relpath(key).parts
    assert re.fullmatch(r"my_eval-[0-9a-f]{8}", eval_part)
    assert re.fullmatch(r"s1-[0-9a-f]{8}", stimulus_part)
    assert re.fullmatch(r"openai_gpt-4o-[0-9a-f]{8}", model_part)
    assert trial_part == "trial-2"
    assert trial_relpath(TrialKey("v=1,b", "e", "s", "default", 0)).parts[0] == "v=1,b"


def test_names_differing_in_unsafe_characters_or_case_get_their_own_folders() -> None:
    names = ["a b", "a?b", "a_b", "A_b", "a/b", "a\\b", "a\u00e9b", "a\x00b", "\ud800"]
    folders = {name_folder(name) for name in names}
    assert len(folders) == len(names)
    assert all(re.fullmatch(r"[A-Za-z0-9._=,-]+", folder) for folder in folders)
    assert name_folder("a b") == name_folder("a b")  # stable across runs and processes
    long = name_folder("x" * 300)
    assert len(long) == SLUG_LENGTH + 9 and long != name_folder("x" * 299)


def test_trial_folders_of_older_runs_are_still_found(tmp_path: Path) -> None:
    key = TrialKey("v", "my eval", "s 1", "default", 0)
    assert find_trial_dir(tmp_path, key) == tmp_path / trial_relpath(key)  # neither exists
    old = tmp_path / legacy_trial_relpath(key)
    old.mkdir(parents=True)
    assert old == tmp_path / "v" / "my_eval" / "s_1" / "default" / "trial-0"
    assert find_trial_dir(tmp_path, key) == old
    new = tmp_path / trial_relpath(key)
    new.mkdir(parents=True)
    assert find_trial_dir(tmp_path, key) == new
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
