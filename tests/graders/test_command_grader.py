from __future__ import annotations

from pathlib import Path

import pytest
from graders_support import context, run
from pydantic import ValidationError

from vally.errors import GradingError
from vally_builtin.graders.command import RunCommandGrader


def rc(config: dict, sandbox, spec_dir: Path | None = None):
    return run(RunCommandGrader, context("run-command", config, sandbox=sandbox, spec_dir=spec_dir))


def test_exit_code_pass_and_fail(workspace: Path, sandbox) -> None:
    (workspace / "ok.txt").write_text("fine")
    ok = rc({"command": "test -f ok.txt"}, sandbox)
    assert ok.passed and ok.evidence == "Command 'test -f ok.txt' exited with 0 (expected 0)"
    bad = rc({"command": "echo broken >&2; exit 3"}, sandbox)
    assert not bad.passed
    assert bad.evidence == "Command 'echo broken >&2; exit 3' exited with 3 (expected 0): broken"
    assert bad.metadata["exitCode"] == 3
    expected = rc({"command": "exit 3", "expected_exit_code": 3}, sandbox)
    assert expected.passed


def test_runs_in_the_workspace_with_env_and_argv(workspace: Path, sandbox) -> None:
    result = rc(
        {"command": ["sh", "-c", 'test "$(pwd -P)" = "$1"', "x", str(workspace.resolve())]}, sandbox
    )
    assert result.passed, result.evidence
    env = rc({"command": 'test "$GREETING" = hi', "env": {"GREETING": "hi"}}, sandbox)
    assert env.passed


def test_stdout_checks(sandbox) -> None:
    assert rc({"command": "echo 5 passed", "stdout_contains": "passed"}, sandbox).passed
    miss = rc({"command": "echo 0 passed", "stdout_matches": "^[1-9]\\d* passed"}, sandbox)
    assert not miss.passed and "does not match" in miss.evidence
    no = rc({"command": "echo nope", "stdout_contains": "yes"}, sandbox)
    assert not no.passed and "does not contain 'yes'" in no.evidence


def test_timeout_fails_and_kills(sandbox) -> None:
    result = rc({"command": "sleep 30", "timeout": "300ms"}, sandbox)
    assert not result.passed
    assert result.evidence == "Command 'sleep 30' timed out after 0.3s"
    assert result.metadata["timedOut"] is True


def test_a_command_killed_by_a_signal_fails_and_says_which(sandbox) -> None:
    result = rc({"command": "kill -SEGV $$"}, sandbox)
    assert not result.passed
    assert result.evidence == "Command 'kill -SEGV $$' was killed by signal 11"


def test_files_overwrite_what_the_agent_left(workspace: Path, spec_dir: Path, sandbox) -> None:
    # The agent "fixed" the test to always pass.
    (workspace / "tests").mkdir()
    (workspace / "tests" / "check.sh").write_text("exit 0\n")
    (spec_dir / "verifier").mkdir()
    (spec_dir / "verifier" / "check.sh").write_text('grep -q "answer=42" result.txt\n')
    (spec_dir / "verifier" / "data").mkdir()
    (spec_dir / "verifier" / "data" / "expected.txt").write_text("answer=42\n")
    (workspace / "result.txt").write_text("answer=41\n")
    cfg = {
        "command": "sh tests/check.sh",
        "files": [{"src": "verifier/check.sh", "dest": "tests/check.sh"}, {"src": "verifier/data"}],
    }
    result = rc(cfg, sandbox, spec_dir)
    assert not result.passed
    assert (workspace / "tests" / "check.sh").read_text() == 'grep -q "answer=42" result.txt\n'
    assert (workspace / "data" / "expected.txt").read_text() == "answer=42\n"
    (workspace / "result.txt").write_text("answer=42\n")
    assert rc(cfg, sandbox, spec_dir).passed


def test_files_must_stay_in_the_spec_folder(spec_dir: Path, sandbox) -> None:
    (spec_dir.parent / "secret.txt").write_text("x")
    with pytest.raises(GradingError, match="outside the eval file's folder"):
        rc({"command": "true", "files": [{"src": "../secret.txt"}]}, sandbox, spec_dir)
    with pytest.raises(GradingError, match="does not exist"):
        rc({"command": "true", "files": [{"src": "missing.sh"}]}, sandbox, spec_dir)
    with pytest.raises(ValidationError):
        RunCommandGrader.Config.model_validate(
            {"command": "true", "files": [{"src": "a", "dest": "../../etc/x"}]}
        )


def test_needs_a_sandbox_and_valid_config() -> None:
    with pytest.raises(GradingError, match="needs the trial workspace"):
        run(RunCommandGrader, context("run-command", {"command": "true"}))
    for bad in ({"command": ""}, {"command": "x", "timeout": 5}, {"command": "x", "exit": 1}):
        with pytest.raises(ValidationError):
            RunCommandGrader.Config.model_validate(bad)
