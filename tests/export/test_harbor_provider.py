"""The ``harbor`` eval provider reads a hand-written Harbor task folder into an eval, and says
what is wrong with a folder that is not a task."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.export.helpers import write_task
from vally import ConfigError
from vally_builtin.providers.harbor import HarborEvalProvider, HarborProviderConfig

TOML = """
version = "1.0"
[metadata]
difficulty = "easy"
category = "files"
[verifier]
timeout_sec = 45.0
[agent]
timeout_sec = 300
"""


def test_a_task_becomes_one_stimulus_graded_by_its_tests(tmp_path: Path) -> None:
    task = write_task(
        tmp_path, "make-file", instruction="Create out.txt.\n", test_sh="exit 0\n", toml=TOML
    )
    config = HarborProviderConfig(defaults={"executor": "mock", "runs": 2})
    [loaded] = HarborEvalProvider(config).load(task / "task.toml", {})
    assert loaded.source == task / "task.toml"
    spec = loaded.spec
    assert spec.name == "make-file" and spec.defaults.runs == 2
    assert spec.defaults.executor is not None and spec.defaults.executor.name == "mock"
    [stimulus] = spec.stimuli
    assert stimulus.name == "make-file" and stimulus.prompt == "Create out.txt.\n"
    assert stimulus.tags == {"difficulty": "easy", "category": "files"}
    assert stimulus.constraints is not None and stimulus.constraints.max_duration == 300.0
    [grader] = stimulus.graders
    assert grader.type == "harbor-verifier" and grader.required
    assert grader.config == {"tests": "tests", "timeout": "45s"}
    # the folder itself names the task too
    [again] = HarborEvalProvider().load(task, {})
    assert again.spec.stimuli[0].prompt == "Create out.txt.\n"


def test_a_folder_that_is_not_a_task_is_refused_with_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no task\.toml"):
        HarborEvalProvider().load(tmp_path / "eval.yaml", {})
    task = write_task(tmp_path, "t", instruction="x", test_sh="exit 0\n")
    (task / "tests" / "test.sh").unlink()
    with pytest.raises(ConfigError, match=r"no tests/test\.sh"):
        HarborEvalProvider().load(task / "task.toml", {})
    (task / "tests" / "test.sh").write_text("exit 0\n", encoding="utf-8")
    (task / "instruction.md").unlink()
    with pytest.raises(ConfigError, match=r"no instruction\.md"):
        HarborEvalProvider().load(task / "task.toml", {})
    (task / "instruction.md").write_text("x", encoding="utf-8")
    (task / "task.toml").write_text("version = \n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"task\.toml: invalid TOML"):
        HarborEvalProvider().load(task / "task.toml", {})
