"""``vally experiment run`` writes what CI reads: ``--junit`` (a case per trial, or per
stimulus with ``--junit-cases stimulus``), ``--junit-file FILE`` and ``--output jsonl``
(every trial record on standard output, the report on standard error)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from .conftest import only_run_dir, vally


def test_junit_per_trial_by_default(project: Path) -> None:
    res = vally("experiment", "run", "experiment.yaml", "--output-dir", "out", "--junit",
                cwd=project)
    assert res.code == 0, res.text
    root = ET.parse(only_run_dir(project / "out") / "junit.xml").getroot()
    suites = sorted(str(s.get("name")) for s in root.iter("testsuite"))
    assert suites == ["one (base)", "one (quiet)"]
    names = sorted(str(c.get("name")) for c in root.iter("testcase"))
    assert names == ["alpha[default]#0", "alpha[default]#0", "beta[default]#0", "beta[default]#0"]
    assert root.get("failures") == "2"  # every trial of 'quiet' fails


def test_junit_per_stimulus_to_a_chosen_file(project: Path) -> None:
    res = vally("experiment", "run", "experiment.yaml", "--output-dir", "out",
                "--junit-file", "ci/junit.xml", "--junit-cases", "stimulus", cwd=project)
    assert res.code == 0, res.text
    assert not (only_run_dir(project / "out") / "junit.xml").exists()
    root = ET.parse(project / "ci" / "junit.xml").getroot()
    cases = sorted(str(c.get("name")) for c in root.iter("testcase"))
    assert cases == ["alpha[default]", "alpha[default]", "beta[default]", "beta[default]"]
    assert root.get("failures") == "2"


def test_unknown_junit_cases_are_refused(project: Path) -> None:
    res = vally("experiment", "run", "experiment.yaml", "--junit", "--junit-cases", "epoch",
                cwd=project)
    assert res.code == 1
    assert "--junit-cases 'epoch' is not one of trial, stimulus" in res.stderr


def test_output_jsonl_streams_every_record_to_stdout(project: Path) -> None:
    res = vally("experiment", "run", "experiment.yaml", "--output-dir", "out",
                "--output", "jsonl", cwd=project)
    assert res.code == 0, res.text
    records = [json.loads(line) for line in res.stdout.splitlines()]  # nothing but records
    assert len(records) == 4
    assert {(r["variant"], r["stimulusName"]) for r in records} == {
        ("base", "alpha"), ("base", "beta"), ("quiet", "alpha"), ("quiet", "beta"),
    }
    assert all(r["experiment"]["experiment"] == "greet" for r in records)
    assert "verdict:" in res.stderr  # the report went to stderr


def test_the_project_file_can_choose_stimulus_cases(project: Path) -> None:
    config = project / ".vally.yaml"
    config.write_text(
        config.read_text() + "plugin_config: {reporter: {junit: {cases: stimulus}}}\n"
        if config.exists()
        else "plugin_config: {reporter: {junit: {cases: stimulus}}}\n"
    )
    res = vally("experiment", "run", "experiment.yaml", "--output-dir", "out", "--junit",
                cwd=project)
    assert res.code == 0, res.text
    root = ET.parse(only_run_dir(project / "out") / "junit.xml").getroot()
    assert sorted(str(c.get("name")) for c in root.iter("testcase"))[0] == "alpha[default]"
