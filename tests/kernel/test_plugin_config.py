"""``.vally.yaml`` ``plugin_config`` configures plugins chosen by name on the command line."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from vally.errors import ConfigError
from vally.models import ProjectConfig
from vally.plugins.session import Session


def test_project_config_reaches_the_plugin_and_flags_win() -> None:
    project = ProjectConfig.model_validate(
        {"plugin_config": {"reporter": {"jsonl": {"stdout": True, "path": "x.jsonl"}}}}
    )
    session = Session(project=project)
    reporter = session.create("reporter", "jsonl", {"stdout": False})
    assert reporter.config.path == "x.jsonl"
    assert reporter.config.stdout is False


def test_bad_project_plugin_config_names_where() -> None:
    project = ProjectConfig.model_validate({"plugin_config": {"reporter": {"jsonl": {"nope": 1}}}})
    with pytest.raises(ConfigError, match=r"plugin_config\.reporter\.jsonl"):
        Session(project=project).create("reporter", "jsonl", {}, where="--reporter-plugin")


def test_plugin_config_kinds_are_checked() -> None:
    with pytest.raises(ValueError, match="cannot configure grader"):
        ProjectConfig.model_validate({"plugin_config": {"grader": {"x": {}}}})


def test_csv_reporter_path_from_project_file(tmp_path: Path) -> None:
    (tmp_path / ".vally.yaml").write_text(
        "plugin_config:\n  reporter:\n    csv:\n      path: my-trials.csv\n"
    )
    (tmp_path / "eval.yaml").write_text(
        "name: e\ndefaults: {executor: mock}\nstimuli:\n  - {name: s, prompt: hi}\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "vally", "eval", "-e", "eval.yaml", "--reporter-plugin", "csv"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    written = list((tmp_path / "vally-results").glob("*/my-trials.csv"))
    assert len(written) == 1
    rows = list(csv.DictReader(written[0].open()))
    assert [r.get("stimulus") for r in rows] == ["s"]
