"""``vally eval --resume``: a run killed mid-way and resumed ends with the records and
reports of an uninterrupted run (apart from timings); a changed spec refuses to resume;
``--retry-errors`` re-runs errored trials and keeps their old lines."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .conftest import VALLY, run_vally, write_spec

DEADLINE = 60.0  # seconds; a failsafe for polling, never a timing assertion

# The agent answers at once, except for the "slow" stimulus while no gate file exists: then
# it records its pid and waits to be killed. Errors (exit 3) while the fail file exists.
AGENT = """\
import os, sys, time
prompt, gate, fail, pids = sys.argv[1:5]
if os.path.exists(fail):
    sys.exit(3)
if prompt == "slow" and not os.path.exists(gate):
    open(pids, "a").write(str(os.getpid()) + " ")
    time.sleep(600)
print("answer to " + prompt)
"""

SPEC = """\
name: resumable
defaults:
  executor:
    name: command
    config: {{command: [{py}, {agent}, "{{prompt}}", {gate}, {fail}, {pids}]}}
graders: [{{type: output-contains, config: {{substring: answer}}}}]
stimuli:
  - {{name: a, prompt: one}}
  - {{name: b, prompt: two}}
  - {{name: s, prompt: {slow}}}
"""

# What differs between any two runs of the same plan: timings, and the identities of one
# execution (run id, trajectory and session ids, the temporary workspace).
VOLATILE_KEYS = {
    "runId",
    "startedAt",
    "completedAt",
    "durationMs",
    "timestamp",
    "wallTimeMs",
    "meanWallTimeMs",
    "id",
    "sessionId",
    "workDir",
}


def _spec(project: Path, slow: str = "slow") -> Path:
    agent = project / "agent.py"
    agent.write_text(AGENT, encoding="utf-8")
    files = {name: project / name for name in ("gate", "fail", "pids")}
    text = SPEC.format(py=sys.executable, agent=agent, slow=slow, **files)
    return write_spec(project / "evals" / "resumable", text)


def _wait_for(predicate: Any, what: str) -> None:
    end = time.monotonic() + DEADLINE
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _untimed(value: Any) -> Any:
    """``value`` without the fields that differ between any two runs (VOLATILE_KEYS)."""
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in VOLATILE_KEYS}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def _by_trial(records: list[dict[str, Any]]) -> list[Any]:
    return [_untimed(r) for r in sorted(records, key=lambda r: r["trialId"])]


def _report(run_dir: Path) -> str:
    text = (run_dir / "report.md").read_text()
    text = text.replace(run_dir.name, "RUN")
    lines = [line for line in text.splitlines() if not line.startswith("_Rendered at ")]
    masked = "\n".join(lines)
    masked = re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27}", "RUN-ID", masked)  # run ids
    masked = re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+Z?", "TIME", masked)
    return re.sub(r"\b\d+(\.\d+)?\s?(ms|s)\b", "DURATION", masked)


def _args(spec: Path) -> list[str]:
    return ["-e", str(spec), "--runs", "2", "--workers", "2"]


def _kill_mid_way(project: Path, spec: Path, out: Path) -> Path:
    """Start a run, wait until the fast trials are recorded and two slow agents hang,
    SIGTERM it; returns its run folder."""
    env = {**os.environ, "NO_COLOR": "1"}
    with (project / "stderr.txt").open("w") as err:
        proc = subprocess.Popen(
            [*VALLY, "eval", *_args(spec), "--output-dir", str(out)],
            cwd=project,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
        )
        try:
            pids = project / "pids"

            def ready() -> bool:
                files = list(out.glob("*/results.jsonl"))
                done = len(_lines(files[0])) if files else 0
                hanging = pids.read_text().split() if pids.exists() else []
                return done == 4 and len(hanging) == 2

            _wait_for(ready, "four finished trials and two hanging agents")
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=DEADLINE) == 130
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    return run_dir


def test_killed_run_resumed_equals_an_uninterrupted_run(project: Path) -> None:
    spec = _spec(project)
    run_dir = _kill_mid_way(project, spec, project / "killed")
    first = _lines(run_dir / "results.jsonl")
    assert sorted(r["status"] for r in first) == ["cancelled"] * 2 + ["success"] * 4
    (project / "gate").touch()

    resumed = run_vally([*_args(spec), "--resume", str(run_dir)], project)
    assert resumed.code == 0, resumed.stderr
    assert "4 finished trial(s) kept, 2 to run" in resumed.stderr
    records = _lines(run_dir / "results.jsonl")
    assert len(records) == 6 and all(r["status"] == "success" for r in records)
    assert {r["runId"] for r in records} == {first[0]["runId"]}
    # the cancelled lines are kept aside, the reused ones unchanged
    superseded = _lines(run_dir / "results.superseded.jsonl")
    assert [r["status"] for r in superseded] == ["cancelled", "cancelled"]
    kept = [r for r in first if r["status"] == "success"]
    assert all(r in records for r in kept)

    straight = run_vally(_args(spec), project, output_dir=project / "straight")
    assert straight.code == 0, straight.stderr
    assert _by_trial(records) == _by_trial(straight.records())
    assert _untimed(_lines(run_dir / "run-summary.jsonl")) == _untimed(straight.summaries())
    assert _report(run_dir) == _report(straight.run_dir)


def test_changed_spec_refuses_to_resume(project: Path) -> None:
    spec = _spec(project)
    (project / "gate").touch()
    first = run_vally(_args(spec), project)
    assert first.code == 0, first.stderr
    before = (first.run_dir / "results.jsonl").read_bytes()
    spec = _spec(project, slow="changed")
    again = run_vally([*_args(spec), "--resume", str(first.run_dir)], project)
    assert again.code == 1
    assert "cannot resume" in again.stderr
    assert "resumable/s/default/0" in again.stderr and "changed since the run" in again.stderr
    assert (first.run_dir / "results.jsonl").read_bytes() == before


def test_changed_flags_refuse_to_resume(project: Path) -> None:
    spec = _spec(project)
    (project / "gate").touch()
    first = run_vally(_args(spec), project)
    more = run_vally([*_args(spec)[:-2], "--runs", "3", "--resume", str(first.run_dir)], project)
    assert more.code == 1
    assert "the plan changed" in more.stderr and "was not in the original run" in more.stderr


def test_retry_errors_runs_errored_trials_again(project: Path) -> None:
    spec = _spec(project)
    (project / "gate").touch()
    (project / "fail").touch()
    first = run_vally(_args(spec), project)
    assert first.code == 1
    assert {r["status"] for r in first.records()} == {"error"}
    (project / "fail").unlink()

    kept = run_vally([*_args(spec), "--resume", str(first.run_dir)], project)
    assert "6 finished trial(s) kept, 0 to run" in kept.stderr
    assert kept.code == 1  # the errored records are still the run's
    assert {r["status"] for r in first.records()} == {"error"}

    retried = run_vally([*_args(spec), "--resume", str(first.run_dir), "--retry-errors"], project)
    assert retried.code == 0, retried.stderr
    assert [r["status"] for r in first.records()] == ["success"] * 6
    superseded = _lines(first.run_dir / "results.superseded.jsonl")
    assert [r["status"] for r in superseded] == ["error"] * 6
    old_folders = list(first.run_dir.glob("resumable-*/*/*/trial-*.superseded-1"))
    assert len(old_folders) == 6


def test_retry_errors_needs_resume(project: Path) -> None:
    spec = _spec(project)
    run = run_vally([*_args(spec), "--retry-errors"], project)
    assert run.code == 1
    assert "--retry-errors needs --resume" in run.stderr


def test_a_folder_without_a_plan_cannot_be_resumed(project: Path) -> None:
    spec = _spec(project)
    folder = project / "not-a-run"
    folder.mkdir()
    run = run_vally([*_args(spec), "--resume", str(folder)], project)
    assert run.code == 1
    assert "no run-plan.json in it" in run.stderr
