"""``vally grade`` end to end: records piped into the real CLI, exit codes 0/1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reporters"))
from reporter_helpers import make_record
from test_ingest import ATIF

from vally.models.records import TrialResultRecord

SPEC = """\
name: quickstart
stimuli:
  - name: add-test
    prompt: Write a unit test for add.js.
    graders:
      - type: output-contains
        config:
          substring: done
  - name: sub-test
    prompt: Write a unit test for sub.js.
    graders:
      - type: output-contains
        config:
          substring: PASS
  - name: make-file
    prompt: Create hello.txt
    graders:
      - type: file-exists
        config:
          path: hello.txt
"""


# The checkout under test, not whatever vally is installed (a minimal environment otherwise).
SOURCE_PATH = {k: v for k, v in os.environ.items() if k == "PYTHONPATH"}


def vally(
    args: list[str], stdin: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from vally.cli.app import main; main()", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "HOME": str(cwd), **SOURCE_PATH}
        | (env or {}),
    )


@pytest.fixture
def spec_dir(tmp_path: Path) -> Path:
    (tmp_path / "eval.yaml").write_text(SPEC, encoding="utf-8")
    return tmp_path


def _lines(*records: TrialResultRecord) -> str:
    return "".join(r.to_json_line() + "\n" for r in records)


def test_all_pass_exits_0(spec_dir: Path) -> None:
    result = vally(["grade", "-e", "eval.yaml"], _lines(make_record("add-test")), spec_dir)
    assert result.returncode == 0, result.stderr
    assert "━━━ add-test ━━━" in result.stdout
    assert "✔ output-contains" in result.stdout
    assert "All graders passed." in result.stdout
    assert "Graded 1 trial: 1 passed, 0 failed, 0 errored" in result.stdout
    assert "Traceback" not in result.stderr


def test_a_failure_exits_1(spec_dir: Path) -> None:
    stdin = _lines(make_record("add-test"), make_record("sub-test"))
    result = vally(["grade", "-e", "eval.yaml"], stdin, spec_dir)
    assert result.returncode == 1
    assert (
        "✘ quickstart/sub-test [gpt-test]: 1/1 trials failed · 1 with output-contains: "
        "'PASS' not found"
    ) in result.stdout
    assert "1 passed, 1 failed, 0 errored" in result.stdout
    assert "verdict: FAIL" in result.stdout


def test_output_jsonl_regrades_records(spec_dir: Path) -> None:
    # The saved verdict said "failed"; the spec's grader passes it now.
    stale = make_record("add-test", passed=False)
    result = vally(["grade", "-e", "eval.yaml", "--output", "jsonl"], _lines(stale), spec_dir)
    assert result.returncode == 0, result.stderr
    (line,) = result.stdout.splitlines()
    record = TrialResultRecord.model_validate_json(line)
    assert record.grade_result is not None and record.grade_result.passed
    assert [d.type for d in record.grade_result.details] == ["output-contains"]
    assert record.trial_id == stale.trial_id
    assert "━━━ add-test ━━━" in result.stderr  # the report moved to stderr


def test_file_grader_needs_a_workspace(spec_dir: Path) -> None:
    trajectory = make_record("make-file").trajectory
    assert trajectory is not None
    stdin = json.dumps(trajectory.to_json_dict()) + "\n"
    result = vally(["grade", "-e", "eval.yaml"], stdin, spec_dir)
    assert result.returncode == 1
    assert "needs the trial workspace" in result.stdout
    ws = spec_dir / "ws"
    ws.mkdir()
    (ws / "hello.txt").write_text("hi", encoding="utf-8")
    result = vally(["grade", "-e", "eval.yaml", "--workspace", "ws"], stdin, spec_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (ws / "hello.txt").read_text(encoding="utf-8") == "hi"  # the folder is kept


def test_missing_workspace_is_reported_before_grading(spec_dir: Path) -> None:
    stdin = _lines(make_record("make-file"), make_record("add-test"))
    result = vally(["grade", "-e", "eval.yaml"], stdin, spec_dir)
    assert result.returncode == 1
    (warning,) = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert "grader 'file-exists' (file-exists) of eval.yaml needs the trial workspace" in warning
    assert "(stimuli: make-file)" in warning and "--workspace" in warning
    assert "1 passed, 0 failed, 1 errored" in result.stdout
    (spec_dir / "ws").mkdir()
    with_workspace = vally(["grade", "-e", "eval.yaml", "--workspace", "ws"], stdin, spec_dir)
    assert "warning:" not in with_workspace.stderr
    only_output = vally(["grade", "-e", "eval.yaml"], _lines(make_record("add-test")), spec_dir)
    assert only_output.returncode == 0 and "warning:" not in only_output.stderr


def _atif(prompt: str, answer: str) -> str:
    doc = json.loads(json.dumps(ATIF))
    doc["steps"][1]["message"] = prompt
    doc["steps"][3]["message"] = answer
    return json.dumps(doc)


def test_atif_matched_by_prompt_or_stimulus_flag(spec_dir: Path) -> None:
    unknown = _atif("Something else entirely", "All done.")
    result = vally(["grade", "-e", "eval.yaml"], unknown, spec_dir)
    assert result.returncode == 1
    assert "error[VALLY_CONFIG]" in result.stderr and "--stimulus" in result.stderr
    result = vally(["grade", "-e", "eval.yaml", "--stimulus", "add-test"], unknown, spec_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "━━━ add-test ━━━" in result.stdout
    assert "Graders (1/1)" in result.stdout
    result = vally(["grade", "-e", "eval.yaml", "--stimulus", "nope"], unknown, spec_dir)
    assert result.returncode == 1 and "--stimulus 'nope' is not a stimulus" in result.stderr
    # Matched by prompt to make-file, whose file grader has no workspace: errored.
    by_prompt = _atif("Create  hello.txt", "All done.")
    result = vally(["grade", "-e", "eval.yaml", "--output", "jsonl"], by_prompt, spec_dir)
    assert result.returncode == 1
    record = json.loads(result.stdout)
    assert record["stimulusName"] == "make-file"
    assert record["trajectory"]["metadata"]["sessionId"] == "S1"
    assert record["gradeResult"]["errored"] is True


def test_bad_input_and_unknown_stimulus(spec_dir: Path) -> None:
    result = vally(["grade", "-e", "eval.yaml"], "{oops\n", spec_dir)
    assert result.returncode == 1
    assert "<stdin>:1: line 1 is not valid JSON" in result.stderr
    assert "Traceback" not in result.stderr
    result = vally(["grade", "-e", "eval.yaml"], _lines(make_record("nope")), spec_dir)
    assert result.returncode == 1
    assert "'nope' is not a stimulus of eval.yaml" in result.stderr
    result = vally(["grade", "-e", "eval.yaml"], "", spec_dir)
    assert result.returncode == 1 and "no trials on standard input" in result.stderr
    result = vally(["grade", "-e", "missing.yaml"], "", spec_dir)
    assert result.returncode == 1 and "no such file" in result.stderr


PIPE_SPEC = """\
name: piped
defaults:
  runs: 2
  executor:
    name: mock
    config:
      output: "Done: {prompt}"
stimuli:
  - name: greet
    prompt: Say hello
    graders:
      - type: output-contains
        config:
          substring: %s
"""


def test_eval_output_piped_into_grade(tmp_path: Path) -> None:
    (tmp_path / "eval.yaml").write_text(PIPE_SPEC % "Done", encoding="utf-8")
    (tmp_path / "strict.yaml").write_text(PIPE_SPEC % "Goodbye", encoding="utf-8")
    produced = vally(["eval", "-e", "eval.yaml", "--output", "jsonl", "--skip-grade"], "", tmp_path)
    assert produced.returncode == 0, produced.stderr
    assert len(produced.stdout.splitlines()) == 2
    passed = vally(["grade", "-e", "eval.yaml"], produced.stdout, tmp_path)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "Graded 2 trials: 2 passed, 0 failed, 0 errored" in passed.stdout
    failed = vally(["grade", "-e", "strict.yaml"], produced.stdout, tmp_path)
    assert failed.returncode == 1
    assert "Graded 2 trials: 0 passed, 2 failed, 0 errored" in failed.stdout


GRADER_PLUGIN = '''
from vally import BaseGrader, GraderMetadata, StrictConfig


class ShortOutput(BaseGrader):
    """Passes when the output has at most max_words words."""

    metadata = GraderMetadata(name="short-output", kind="grader")

    class Config(StrictConfig):
        max_words: int

    async def grade(self, context):
        words = len(context.trajectory.output.split())
        ok = words <= self.config.max_words
        return self.result(context, passed=ok, evidence=f"{words} words")


def register(registrar):
    registrar.grader(ShortOutput)
'''


def test_grader_plugin_from_a_file(tmp_path: Path) -> None:
    (tmp_path / "short.py").write_text(GRADER_PLUGIN, encoding="utf-8")
    (tmp_path / "eval.yaml").write_text(
        "name: p\nstimuli:\n  - name: add-test\n    prompt: x\n    graders:\n"
        "      - type: short-output\n        config: {max_words: 3}\n",
        encoding="utf-8",
    )
    stdin = _lines(make_record("add-test"))
    result = vally(["grade", "-e", "eval.yaml", "--grader-plugin", "short.py"], stdin, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "✔ short-output: 1 words" in result.stdout
    missing = vally(["grade", "-e", "eval.yaml"], stdin, tmp_path)
    assert missing.returncode == 1
    assert "short-output" in missing.stderr and "Traceback" not in missing.stderr


COMMAND_SPEC = """\
name: commands
environment: { env: { FROM_SPEC: spec-value } }
stimuli:
  - name: add-test
    prompt: x
    graders:
      - type: run-command
        config:
          command: %s
          timeout: 20s
"""


def _grade_with_command(
    tmp_path: Path, command: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], float]:
    (tmp_path / "eval.yaml").write_text(COMMAND_SPEC % json.dumps(command), encoding="utf-8")
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "kept.txt").write_text("kept", encoding="utf-8")
    args = ["grade", "-e", "eval.yaml", "--workspace", "ws", "--output", "jsonl"]
    started = time.monotonic()
    result = vally(args, _lines(make_record("add-test")), tmp_path, env)
    return result, time.monotonic() - started


def test_workspace_commands_do_not_see_host_secrets(tmp_path: Path) -> None:
    command = 'test -z "$VALLY_TEST_SECRET" && test "$FROM_SPEC" = spec-value && cat kept.txt'
    result, _ = _grade_with_command(tmp_path, command, {"VALLY_TEST_SECRET": "hunter2"})
    assert result.returncode == 0, result.stdout + result.stderr
    (detail,) = json.loads(result.stdout)["gradeResult"]["details"]
    assert detail["passed"] is True
    assert detail["metadata"]["stdout"] == "kept"
    assert "hunter2" not in result.stdout + result.stderr


def test_a_background_child_keeping_stdout_open_does_not_hang(tmp_path: Path) -> None:
    result, elapsed = _grade_with_command(tmp_path, "sleep 60 & echo started")
    assert result.returncode == 0, result.stdout + result.stderr
    assert elapsed < 20  # bounded by the grader timeout, not by the child's 60 s
    (detail,) = json.loads(result.stdout)["gradeResult"]["details"]
    assert detail["metadata"]["stdout"] == "started\n"


def test_the_workspace_files_are_untouched(tmp_path: Path) -> None:
    result, _ = _grade_with_command(tmp_path, "ls > /dev/null")
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(p.name for p in (tmp_path / "ws").iterdir()) == ["kept.txt"]
    assert (tmp_path / "ws" / "kept.txt").read_text(encoding="utf-8") == "kept"
