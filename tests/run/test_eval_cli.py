"""``vally eval`` end to end, as a real subprocess, on small specs in temporary folders."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from vally.engine.records.run_folder import name_folder
from vally.models.records import TrialResultRecord

from .conftest import run_vally, write_spec

PY = sys.executable

MOCK_SPEC = """
name: demo
defaults:
  runs: 1
  executor:
    name: mock
    config: {output: "hello {prompt}", files: {out.txt: "data"}}
stimuli:
  - name: good
    prompt: world
    graders:
      - {type: output-contains, config: {substring: hello}}
      - {type: file-exists, config: {path: out.txt}}
  - name: bad
    prompt: there
    graders:
      - {type: output-contains, config: {substring: hello}}
      - {type: output-contains, config: {substring: missing}}
"""

RECORD_KEYS = {
    field.alias or field_name for field_name, field in TrialResultRecord.model_fields.items()
}


def test_layout_records_and_summary(project: Path) -> None:
    spec = write_spec(project / "evals" / "demo", MOCK_SPEC)
    run = run_vally(["-e", str(spec), "--junit", "--trace"], project)
    assert run.code == 0, run.stderr
    run_dir = run.run_dir
    files = ("results.jsonl", "run-summary.jsonl", "report.md", "junit.xml", "otel-spans.jsonl")
    for name in (*files, "otel-context.json"):
        assert (run_dir / name).is_file(), name
    records = run.records()
    assert sorted(r["stimulusName"] for r in records) == ["bad", "good"]
    for record in records:
        assert set(record) >= RECORD_KEYS
        assert record["trialIndex"] == 0
        assert record["status"] == "success"
        assert record["error"] is None
        assert record["model"] is None
        stimulus = name_folder(record["stimulusName"])
        trial = run_dir / name_folder("demo") / stimulus / name_folder("default") / "trial-0"
        metadata = json.loads((trial / "metadata.json").read_text())
        assert metadata["status"] == "success"
        assert metadata["trialIndex"] == 0
        assert (trial / "events.jsonl").is_file()
    by_name = {r["stimulusName"]: r for r in records}
    assert by_name["good"]["gradeResult"]["passed"] is True
    assert by_name["bad"]["gradeResult"]["passed"] is False
    assert by_name["bad"]["gradeResult"]["score"] == 0.5
    (summary,) = run.summaries()
    assert summary["evalName"] == "demo"
    assert summary["trials"] == 2 and summary["passed"] == 1
    assert summary["verdict"] == "fail"
    assert "Saved artifacts" in run.stdout


def test_threshold_and_require_pass(project: Path) -> None:
    spec = write_spec(project, MOCK_SPEC)
    failing = run_vally(["-e", str(spec), "--require-pass"], project, output_dir=project / "a")
    assert failing.code == 1
    assert "--require-pass" in failing.stderr
    lenient = run_vally(
        ["-e", str(spec), "--require-pass", "--threshold", "0.5"],
        project,
        output_dir=project / "b",
    )
    assert lenient.code == 0, lenient.stderr
    assert all(r["gradeResult"]["passed"] for r in lenient.records())
    assert all(r["gradeResult"]["threshold"] == 0.5 for r in lenient.records())


def test_model_fan_out_and_runs(project: Path) -> None:
    spec = write_spec(project, MOCK_SPEC)
    run = run_vally(["-e", str(spec), "--model", "m1,m2", "--runs", "2"], project)
    assert run.code == 0, run.stderr
    keys = sorted((r["stimulusName"], r["model"], r["trialIndex"]) for r in run.records())
    assert keys == sorted((s, m, t) for s in ("good", "bad") for m in ("m1", "m2") for t in (0, 1))
    for model in ("m1", "m2"):
        trial = run.run_dir / name_folder("demo") / name_folder("good") / name_folder(model)
        assert (trial / "trial-1" / "metadata.json").is_file()
    (summary,) = run.summaries()
    assert summary["models"] == ["m1", "m2"] or sorted(summary["models"]) == ["m1", "m2"]


def test_skip_grade_streams_jsonl_to_stdout(project: Path) -> None:
    spec = write_spec(project, MOCK_SPEC)
    run = run_vally(["-e", str(spec), "--skip-grade", "--output", "jsonl"], project)
    assert run.code == 0, run.stderr
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert sorted(r["stimulusName"] for r in lines) == ["bad", "good"]
    assert all(r["gradeResult"] is None for r in lines)
    assert all(r["trajectory"]["output"].startswith("hello") for r in lines)
    assert "━━━" in run.stderr  # the console report moved to stderr
    assert len(run.records()) == 2


def test_unknown_executor_fails_before_anything_runs(project: Path) -> None:
    spec = write_spec(project, MOCK_SPEC.replace("name: mock", "name: no-such-agent"))
    run = run_vally(["-e", str(spec)], project)
    assert run.code == 1
    assert "no-such-agent" in run.stderr
    assert "Traceback" not in run.stderr
    assert not run.output_dir.exists()


def test_files_src_outside_the_project_fails_before_anything_runs(project: Path) -> None:
    outside = project.parent / f"{project.name}-secret.txt"
    outside.write_text("not yours", encoding="utf-8")
    try:
        text = (
            "defaults: {executor: mock}\nstimuli:\n  - name: s\n    prompt: p\n"
            f"    environment: {{files: [{{src: ../{outside.name}}}]}}\n"
        )
        run = run_vally(["-e", str(write_spec(project, text))], project)
    finally:
        outside.unlink()
    assert run.code == 1
    assert "VALLY_PATH_ESCAPE" in run.stderr and outside.name in run.stderr
    assert "Traceback" not in run.stderr
    assert not run.output_dir.exists()


def test_spec_without_executor_names_the_fix(project: Path) -> None:
    text = "stimuli:\n  - {name: s, prompt: p}\n"
    spec = write_spec(project, text)
    run = run_vally(["-e", str(spec)], project)
    assert run.code == 1
    assert "defaults.executor" in run.stderr
    assert "mock" in run.stderr  # installed executors are listed


def test_multi_turn_with_single_turn_executor_fails_before_any_trial(project: Path) -> None:
    text = f"""
    defaults:
      executor: {{name: command, config: {{command: [{PY}, -c, "print('x')"]}}}}
    stimuli:
      - {{name: single, prompt: one}}
      - name: chat
        turns: [{{prompt: a}}, {{prompt: b}}]
    """
    spec = write_spec(project, text)
    run = run_vally(["-e", str(spec)], project)
    assert run.code == 1
    assert "does not support turns" in run.stderr
    assert not run.output_dir.exists()


def test_runs_zero_executes_nothing(project: Path) -> None:
    spec = write_spec(project, MOCK_SPEC.replace("runs: 1", "runs: 0"))
    run = run_vally(["-e", str(spec)], project)
    assert run.code == 0, run.stderr
    assert "runs: 0 (lint only)" in run.stderr
    assert not run.output_dir.exists()


def test_agent_that_never_exits_times_out_and_the_run_completes(project: Path) -> None:
    text = f"""
    name: slow
    defaults:
      executor:
        name: command
        config:
          command: [{PY}, -c, "import time; print('started', flush=True); time.sleep(600)"]
    stimuli:
      - {{name: hang, prompt: wait}}
      - name: quick
        prompt: go
        environment: {{}}
    """
    # 'quick' uses the same command, so give it its own fast executor through a second spec
    spec = write_spec(project / "a", text)
    fast = write_spec(
        project / "b",
        f"""
        name: fast
        defaults:
          executor: {{name: command, config: {{command: [{PY}, -c, "print('done')"]}}}}
        stimuli:
          - name: ok
            prompt: go
            graders: [{{type: output-contains, config: {{substring: done}}}}]
        """,
    )
    run = run_vally(["-e", str(spec), "-e", str(fast), "--timeout", "1s"], project, timeout=60)
    assert run.code == 1  # a timed-out agent is an operational error of its trial
    records = {r["stimulusName"]: r for r in run.records()}
    assert records["hang"]["status"] == "error"
    assert records["hang"]["error"]["phase"] == "execute"
    assert records["hang"]["error"]["code"] == "VALLY_TIMEOUT"
    assert records["ok"]["status"] == "success"
    assert records["ok"]["gradeResult"]["passed"] is True
    assert {s["evalName"] for s in run.summaries()} == {"slow", "fast"}


def test_output_dir_that_is_a_file(project: Path) -> None:
    spec = write_spec(project, MOCK_SPEC)
    blocker = project / "blocker"
    blocker.write_text("x")
    run = run_vally(["-e", str(spec), "--output-dir", str(blocker)], project)
    assert run.code == 1
    assert "is a file" in run.stderr
    assert "Traceback" not in run.stderr


def test_workspace_keeps_trial_workspaces(project: Path) -> None:
    spec = write_spec(project, MOCK_SPEC)
    ws = project / "ws"
    run = run_vally(["-e", str(spec), "--runs", "2", "--workspace", str(ws)], project)
    assert run.code == 0, run.stderr
    for stimulus in ("good", "bad"):
        for trial in (0, 1):
            assert (ws / name_folder(stimulus) / f"trial-{trial}" / "out.txt").read_text() == "data"


def test_secrets_are_scrubbed_from_everything_written(project: Path) -> None:
    secret = "sk-test-FAKE-0123456789"
    text = f"""
    name: leak
    environment:
      env: {{DEMO_API_KEY: {secret}}}
    defaults:
      executor:
        name: command
        config:
          command:
            - {PY}
            - -c
            - >-
              import os, sys; key = os.environ['DEMO_API_KEY'];
              print('key is', key); print('err', key, file=sys.stderr);
              open('leak.txt', 'w').write(key)
    stimuli:
      - name: echo
        prompt: show me
        artifacts: [leak.txt]
        graders: [{{type: output-contains, config: {{substring: key is}}}}]
    """
    spec = write_spec(project, text)
    run = run_vally(["-e", str(spec), "--verbose"], project, env={"OTHER_TOKEN": "tok-ABCDEFGH"})
    assert run.code == 0, run.stderr
    written = [p for p in run.run_dir.rglob("*") if p.is_file()]
    assert any(p.name == "leak.txt" for p in written)
    for path in written:
        assert secret not in path.read_text(errors="replace"), path
    assert secret not in run.stdout and secret not in run.stderr
    (record,) = run.records()
    assert "[REDACTED]" in record["trajectory"]["output"]
    assert record["gradeResult"]["passed"] is True


def test_flag_errors(project: Path) -> None:
    spec = write_spec(project, MOCK_SPEC)
    cases = [
        (["-e", str(spec), "--backend-args", "a=b"], "--backend"),
        (["--eval-plugin", "yaml"], "--eval-spec"),
        (["-e", str(spec), "--output", "xml"], "jsonl"),
        (["-e", str(spec), "--workers", "0"], "--workers"),
        (["-e", str(spec), "--timeout", "10"], "unit"),
        (["-e", str(project / "nope.yaml")], "does not exist"),
    ]
    for args, needle in cases:
        run = run_vally(args, project)
        assert run.code == 1, (args, run.stderr)
        assert needle in run.stderr, (args, run.stderr)
        assert "Traceback" not in run.stderr


def test_setup_failure_is_recorded_with_its_phase(project: Path) -> None:
    spec = write_spec(
        project,
        """
        name: setup
        defaults: {executor: mock}
        stimuli:
          - name: broken
            prompt: p
            environment: {commands: ["echo preparing; exit 3"]}
          - {name: fine, prompt: p}
        """,
    )
    run = run_vally(["-e", str(spec)], project)
    assert run.code == 1
    records = {r["stimulusName"]: r for r in run.records()}
    broken = records["broken"]
    assert broken["status"] == "error"
    assert broken["error"]["phase"] == "setup"
    assert "exit code 3" in broken["error"]["message"]
    assert broken["gradeResult"] is None
    assert broken["trajectory"]["endReason"] == "error"
    assert records["fine"]["status"] == "success"
    metadata = json.loads(
        (run.run_dir / name_folder("setup") / name_folder("broken") / name_folder("default"))
        .joinpath("trial-0", "metadata.json")
        .read_text()
    )
    assert metadata["status"] == "error" and metadata["error"]["phase"] == "setup"


def test_runs_zero_still_validates_plugins(project: Path) -> None:
    text = MOCK_SPEC.replace("runs: 1", "runs: 0").replace("type: file-exists", "type: file-exist")
    spec = write_spec(project, text)
    run = run_vally(["-e", str(spec)], project)
    assert run.code == 1
    assert "file-exist" in run.stderr and "stimulus 'good'" in run.stderr


def test_max_retries_reruns_failed_agents(project: Path) -> None:
    marker = project / "first-attempt-done"
    flaky = (
        "import os, sys, pathlib; m = pathlib.Path(os.environ['MARKER']); "
        "sys.exit(1) if not m.exists() and not m.touch() else print('ok')"
    )
    spec = write_spec(
        project,
        f"""
        name: flaky
        environment: {{env: {{MARKER: "{marker}"}}}}
        defaults:
          executor: {{name: command, config: {{command: [{PY}, -c, "{flaky}"]}}}}
        stimuli:
          - {{name: s, prompt: p, graders: [{{type: output-contains, config: {{substring: ok}}}}]}}
        """,
    )
    once = run_vally(["-e", str(spec)], project, output_dir=project / "once")
    assert once.code == 1
    assert once.records()[0]["error"]["phase"] == "execute"
    marker.unlink()
    retried = run_vally(["-e", str(spec), "--max-retries", "2"], project)
    assert retried.code == 0, retried.stderr
    (record,) = retried.records()
    assert record["status"] == "success" and record["gradeResult"]["passed"]
    trial = retried.run_dir / name_folder("flaky") / name_folder("s") / name_folder("default")
    assert sorted(p.name for p in trial.iterdir()) == ["trial-0", "trial-0.attempt-0"]
    assert json.loads((trial / "trial-0" / "metadata.json").read_text())["attempt"] == 1
    failed = json.loads((trial / "trial-0.attempt-0" / "metadata.json").read_text())
    assert failed["status"] == "error"


def test_shell_completion_completes_commands_and_flags(tmp_path: Path) -> None:
    import os
    import subprocess

    vally_script = str(Path(sys.executable).with_name("vally"))  # the installed script

    def complete(words: str) -> list[str]:
        env = {
            **os.environ,
            "_VALLY_COMPLETE": "complete_bash",
            "COMP_WORDS": words,
            "COMP_CWORD": str(len(words.split()) - 1),
        }
        done = subprocess.run(
            [vally_script], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert complete("vally ex") == ["export", "experiment"]
    assert {"--runs", "--runner", "--runner-args"} <= set(complete("vally eval --ru"))
    # the shell named, not detected from the parent process (none when run without one)
    named = {**os.environ, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    script = subprocess.run(
        [vally_script, "--show-completion", "bash"],
        env=named,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "_VALLY_COMPLETE" in script.stdout
