"""``vally experiment run --resume``: a sharded experiment killed mid-way and resumed keeps
its run id, finishes its shard and merges into what an uninterrupted run merges into."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .conftest import VALLY, write

DEADLINE = 60.0  # seconds; a failsafe for polling, never a timing assertion

AGENT = """
import os, sys, time
prompt = sys.stdin.read().strip()
if prompt == "slow" and not os.path.exists(os.environ["GATE"]):
    open(os.environ["PIDS"], "a").write(str(os.getpid()) + " ")
    time.sleep(600)
print("answer to " + prompt)
"""

VOLATILE = {"runId", "startedAt", "completedAt", "durationMs", "timestamp", "wallTimeMs",
            "meanWallTimeMs", "id", "sessionId", "workDir", "sourceRunIds", "mergedAt"}


def _untimed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def _project(tmp_path: Path) -> None:
    agent = write(tmp_path / "agent.py", AGENT)
    write(tmp_path / ".vally.yaml", "{}\n")
    write(tmp_path / "evals/w/eval.yaml", f"""
        name: w
        environment: {{env: {{GATE: "{tmp_path / 'gate'}", PIDS: "{tmp_path / 'pids'}"}}}}
        defaults:
          executor:
            name: command
            config: {{command: ["{sys.executable}", "{agent}"], prompt_via: stdin}}
        graders: [{{type: output-contains, config: {{substring: answer}}}}]
        stimuli:
          - {{name: f, prompt: fast}}
          - {{name: s, prompt: slow}}
        """)
    write(tmp_path / "experiment.yaml", """
        name: res
        evals: [evals/*/eval.yaml]
        vary: [/defaults/model]
        baseline: a
        variants: {a: {}, b: {}}
        """)


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*VALLY, "experiment", *args], cwd=tmp_path, capture_output=True, text=True,
        env={**os.environ, "NO_COLOR": "1"}, timeout=120,
    )


def _records(folder: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for variant in ("a", "b"):
        lines = (folder / variant / "results.jsonl").read_text().splitlines()
        out.extend(json.loads(x) for x in lines if x.strip())
    return sorted((_untimed(r) for r in out), key=lambda r: r["trialId"])


def test_killed_shard_resumes_and_merges_like_an_uninterrupted_run(tmp_path: Path) -> None:
    _project(tmp_path)
    shard_args = ["experiment.yaml", "--shard", "1/1", "--workers", "2"]
    proc = subprocess.Popen(
        [*VALLY, "experiment", "run", *shard_args, "--run-id", "r", "--output-dir", "out"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "NO_COLOR": "1"},
    )
    shard = tmp_path / "out" / "r" / "shard-1-of-1"
    try:

        def ready() -> bool:
            pids = tmp_path / "pids"
            hanging = pids.read_text().split() if pids.exists() else []
            done = sum(
                len((shard / v / "results.jsonl").read_text().splitlines())
                for v in ("a", "b")
                if (shard / v / "results.jsonl").exists()
            )
            return len(hanging) == 2 and done == 2

        end = time.monotonic() + DEADLINE
        while not ready():
            assert proc.poll() is None and time.monotonic() < end
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=DEADLINE) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    (tmp_path / "gate").touch()

    resumed = _run(tmp_path, "run", *shard_args, "--output-dir", "out", "--resume", str(shard))
    assert resumed.returncode == 0, resumed.stderr
    assert "2 finished trial(s) kept, 2 to run" in resumed.stdout + resumed.stderr
    manifest = json.loads((shard / "shard-manifest.json").read_text())
    assert manifest["finished"] is True and len(manifest["completedKeys"]) == 4
    records = _records(shard)
    assert [r["status"] for r in records] == ["success"] * 4
    assert {r["experiment"]["runId"] for r in _raw(shard)} == {"r"}
    merged = _run(tmp_path, "merge", str(shard), "-o", "merged-resumed")
    assert merged.returncode == 0, merged.stderr

    straight = _run(tmp_path, "run", *shard_args, "--run-id", "r2", "--output-dir", "out2")
    assert straight.returncode == 0, straight.stderr
    other = tmp_path / "out2" / "r2" / "shard-1-of-1"
    assert records == _records(other)
    merged2 = _run(tmp_path, "merge", str(other), "-o", "merged-straight")
    assert merged2.returncode == 0, merged2.stderr
    assert _records(tmp_path / "merged-resumed") == _records(tmp_path / "merged-straight")


def _raw(folder: Path) -> list[dict[str, Any]]:
    lines = [
        x
        for v in ("a", "b")
        for x in (folder / v / "results.jsonl").read_text().splitlines()
        if x.strip()
    ]
    return [json.loads(x) for x in lines]


def test_resume_refuses_another_experiment_variant_set(tmp_path: Path) -> None:
    _project(tmp_path)
    (tmp_path / "gate").touch()
    first = _run(tmp_path, "run", "experiment.yaml", "--output-dir", "out")
    assert first.returncode == 0, first.stderr
    (run_dir,) = [p for p in (tmp_path / "out").iterdir() if p.is_dir()]
    write(tmp_path / "experiment.yaml", """
        name: res
        evals: [evals/*/eval.yaml]
        vary: [/defaults/model]
        baseline: a
        variants: {a: {}, b: {}, c: {}}
        """)
    again = _run(tmp_path, "run", "experiment.yaml", "--resume", str(run_dir))
    assert again.returncode == 1
    assert "cannot resume" in again.stderr and "was not in the original run" in again.stderr
