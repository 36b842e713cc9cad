from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from graders_support import call, context, run, say, trajectory

from vally.errors import GradingError
from vally_builtin.graders.program import ProgramGrader

JSON_GRADER = """\
import json, os, sys
data = json.load(open(os.environ["EVALUATE_GRADER_INPUT"]))
ws = os.environ["EVALUATE_WORKSPACE"]
ok = os.path.exists(os.path.join(ws, "answer.txt")) and data["trajectory"]["output"] == "done"
print("diagnostics go to stderr", file=sys.stderr)
print(json.dumps({
    "name": "ignored", "kind": "code", "passed": ok, "score": 0.75 if ok else 0.25,
    "evidence": "tools=" + ",".join(e["data"]["toolName"] for e in data["trajectory"]["events"]
                                   if e["type"] == "tool_call")
                + " threshold=" + str(data["config"]["args"][-1])
                + " stimulus=" + data["stimulus"]["name"],
    "details": [{"passed": ok, "score": 1.0 if ok else 0.0, "evidence": "answer file"}],
    "metadata": {"checked": 1},
}))
"""


def program(config: dict, sandbox, spec_dir: Path | None = None, events=None):
    traj = trajectory(events or [call("write_file", {"path": "answer.txt"}), say("done")])
    return run(
        ProgramGrader, context("program", config, traj=traj, sandbox=sandbox, spec_dir=spec_dir)
    )


@pytest.fixture
def json_script(spec_dir: Path) -> Path:
    path = spec_dir / "grade.py"
    path.write_text(JSON_GRADER)
    return path


def test_json_mode_reads_input_and_returns_result(
    workspace: Path, spec_dir: Path, sandbox, json_script: Path
) -> None:
    (workspace / "answer.txt").write_text("42")
    cfg = {
        "program": sys.executable,
        "args": ["grade.py", "0.5"],
        "files": [{"src": "grade.py"}],
    }
    result = program(cfg, sandbox, spec_dir)
    assert result.passed and result.score == 0.75
    assert result.name == "program" and result.type == "program"
    assert result.evidence == "tools=write_file threshold=0.5 stimulus=s1"
    assert result.details[0].passed and result.details[0].evidence == "answer file"
    assert result.metadata["checked"] == 1 and result.metadata["kind"] == "code"
    assert result.metadata["exitCode"] == 0
    # The grader input file was removed afterwards; nothing else is left in .vally.
    assert not (workspace / ".vally").exists()

    (workspace / "answer.txt").unlink()
    failed = program(cfg, sandbox, spec_dir)
    assert not failed.passed and failed.score == 0.25


def test_exit_code_mode(spec_dir: Path, sandbox) -> None:
    script = spec_dir / "check.sh"
    script.write_text('#!/bin/sh\necho "checking $EVALUATE_WORKSPACE" >&2\ntest -f "$1"\n')
    script.chmod(0o755)
    # program names a file next to the eval file: it is staged into the sandbox.
    miss = program({"program": "./check.sh", "args": ["answer.txt"]}, sandbox, spec_dir)
    assert not miss.passed
    assert miss.evidence.startswith("Program './check.sh answer.txt' exited with 1: checking ")
    Path(sandbox.workdir, "answer.txt").write_text("x")
    ok = program({"program": "./check.sh", "args": ["answer.txt"]}, sandbox, spec_dir)
    assert ok.passed and ok.evidence == "Program './check.sh answer.txt' exited with 0"


def test_crash_is_a_failed_result(sandbox) -> None:
    code = "import sys; sys.stderr.write('Traceback: boom\\n'); sys.exit(2)"
    result = program({"program": sys.executable, "args": ["-c", code]}, sandbox)
    assert not result.passed and result.status == "success"
    assert result.evidence.endswith("exited with 2: Traceback: boom")


def test_timeout_is_a_failed_result(sandbox) -> None:
    result = program({"program": "sleep", "args": ["30"], "timeout": "300ms"}, sandbox)
    assert not result.passed
    assert result.evidence == "Program 'sleep 30' timed out after 0.3s"


def test_env_is_passed(sandbox) -> None:
    code = "import os, json; print(json.dumps({'passed': os.environ['MODE'] == 'strict'}))"
    result = program(
        {"program": sys.executable, "args": ["-c", code], "env": {"MODE": "strict"}}, sandbox
    )
    assert result.passed and result.score == 1.0


@pytest.mark.parametrize(
    "stdout",
    ["not json at all", json.dumps({"score": 1}), json.dumps({"passed": True, "score": 7})],
)
def test_unparsable_output_is_a_grading_error(sandbox, stdout: str) -> None:
    with pytest.raises(GradingError, match="program grader 'program'"):
        program({"program": "printf", "args": ["%s", stdout]}, sandbox)


def test_last_json_line_wins(sandbox) -> None:
    out = 'progress...\n{"passed": false, "evidence": "2 of 3 checks"}\n'
    result = program({"program": "printf", "args": ["%s", out]}, sandbox)
    assert not result.passed and result.evidence == "2 of 3 checks" and result.score == 0.0


def test_missing_program_raises(sandbox) -> None:
    with pytest.raises(Exception, match="no-such-program-xyz"):
        program({"program": "no-such-program-xyz"}, sandbox)


def test_needs_the_workspace() -> None:
    with pytest.raises(GradingError, match="needs the trial workspace"):
        run(ProgramGrader, context("program", {"program": "true"}))
