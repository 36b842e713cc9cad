"""The ``harbor`` eval provider reads a hand-written Harbor task folder into an eval, and says
what is wrong with a folder that is not a task."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.export.helpers import vally, write_task
from vally import ConfigError, ExecResult, GradingError
from vally.testing import FakeSandbox, grade, make_stimulus, make_trajectory
from vally_builtin.graders.harbor import HarborVerifierGrader, _reward
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


def test_the_verifier_refuses_a_backend_whose_workspace_is_the_host(tmp_path: Path) -> None:
    write_task(tmp_path / "dataset", "t", instruction="true", test_sh="echo 1 > /tmp/x\n")
    (tmp_path / ".vally.yaml").write_text(
        "plugin_config: {eval_provider: {harbor: {defaults: {executor: "
        '{name: command, config: {command: [sh, -c, "{prompt}"]}}}}}}\n',
        encoding="utf-8",
    )
    done = vally(
        "eval", "--eval-plugin", "harbor", "-e", "dataset/t/task.toml", "--output-dir", "out",
        cwd=tmp_path,
    )  # fmt: skip
    [results] = (tmp_path / "out").rglob("results.jsonl")
    [record] = [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines()]
    [detail] = record["gradeResult"]["details"]
    assert detail["status"] == "error" and "--backend docker" in detail["evidence"], detail
    assert "fresh container" in detail["evidence"], detail
    assert done.code == 1 and "1 errored" in done.stdout + done.stderr


def test_the_verifier_runs_nothing_in_a_sandbox_that_cannot_open_a_fresh_one(
    tmp_path: Path,
) -> None:
    # A sandbox of the agent's own container, with no way to a fresh one: the tests must
    # not run there (the agent may have replaced its shell and tools).
    task = write_task(tmp_path, "t", instruction="true", test_sh="exit 0\n")
    sandbox = FakeSandbox(
        exec_handler=lambda argv: ExecResult(exit_code=0, stdout="txt\n1\n", stderr="")
    )
    trajectory = make_trajectory(stimulus=make_stimulus(prompt="true"))
    with pytest.raises(GradingError, match="fresh container") as raised:
        grade(HarborVerifierGrader, trajectory, {}, sandbox=sandbox, spec_dir=task)
    assert "--backend docker" in str(raised.value)
    assert sandbox.commands == [] and sandbox.files == {}


@pytest.mark.parametrize(
    ("kind", "text", "reward"),
    [
        ("txt", "1\n", 1.0),
        ("txt", " 0.25 ", 0.25),
        ("txt", "7", 1.0),
        ("json", '{"reward": 0.5, "other": 1}', 0.5),
        ("json", '{"a": 1, "b": 0}', 0.5),
    ],
)
def test_reward_files_are_read_as_harbor_writes_them(kind: str, text: str, reward: float) -> None:
    assert _reward(kind, text, "") == reward


@pytest.mark.parametrize(
    ("kind", "text", "message"),
    [
        ("none", "", "wrote no /logs/verifier/reward.txt"),
        ("txt", "passed", "holds no number"),
        ("txt", "nan", "NaN"),
        ("json", "[1]", "holds no number"),
        ("json", "{}", "holds no number"),
        ("json", "[" * 100_000 + "]" * 100_000, "holds no number"),  # not a RecursionError
    ],
)
def test_a_missing_or_unreadable_reward_errors_the_grader(
    kind: str, text: str, message: str
) -> None:
    with pytest.raises(GradingError, match=message):
        _reward(kind, text, "")


def test_a_linked_instruction_is_refused_and_no_host_file_becomes_the_prompt(
    tmp_path: Path,
) -> None:
    secret = tmp_path / "host-secret.txt"
    secret.write_text("TOP SECRET\n", encoding="utf-8")
    task = write_task(tmp_path / "tasks", "leak", instruction="x\n", test_sh="exit 0\n", toml=TOML)
    (task / "instruction.md").unlink()
    (task / "instruction.md").symlink_to(secret)
    with pytest.raises(ConfigError, match="is a symbolic link") as caught:
        HarborEvalProvider(HarborProviderConfig()).load(task / "task.toml", {})
    assert "TOP SECRET" not in caught.value.render()
    (task / "task.toml").rename(task / "real.toml")
    (task / "task.toml").symlink_to(task / "real.toml")
    with pytest.raises(ConfigError, match="is a symbolic link"):
        HarborEvalProvider(HarborProviderConfig()).load(task / "task.toml", {})


def test_a_non_utf8_or_huge_instruction_is_a_task_error(tmp_path: Path) -> None:
    task = write_task(tmp_path, "bad", instruction="x\n", test_sh="exit 0\n", toml=TOML)
    (task / "instruction.md").write_bytes(b"caf\xe9\n")
    with pytest.raises(ConfigError, match=r"is not UTF-8 text \(.* at byte 3\)"):
        HarborEvalProvider(HarborProviderConfig()).load(task / "task.toml", {})
    with (task / "instruction.md").open("wb") as handle:
        handle.truncate(300 * 1024 * 1024)  # a sparse 300 MB file: nothing is read past 1 MiB
    with pytest.raises(ConfigError, match="is larger than 1024 KiB"):
        HarborEvalProvider(HarborProviderConfig()).load(task / "task.toml", {})
