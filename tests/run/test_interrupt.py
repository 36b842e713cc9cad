"""Ctrl-C / SIGTERM during ``vally eval``: finished records are kept, running agents are
killed, the run ends with exit code 130."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import VALLY, write_spec

PY = sys.executable
DEADLINE = 60.0  # seconds; a failsafe for polling, never a timing assertion


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("State:") and "Z" in line.split()[1]:
                return False  # a zombie has exited already
    return True


def _wait_for(predicate, what: str) -> None:
    end = time.monotonic() + DEADLINE
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_keeps_finished_records_and_kills_agents(
    project: Path, signum: signal.Signals
) -> None:
    pid_file = project / "agent.pid"
    hang = (
        "import os, time; "
        "open(os.environ['PID_FILE'], 'a').write(str(os.getpid()) + ' '); "
        "time.sleep(600)"
    )
    spec = write_spec(
        project / "hang",
        f"""
        name: hang
        environment: {{env: {{PID_FILE: "{pid_file}"}}}}
        defaults:
          executor: {{name: command, config: {{command: [{PY}, -c, "{hang}"]}}}}
        stimuli:
          - {{name: forever, prompt: wait}}
        """,
    )
    fast = write_spec(
        project / "fast",
        f"""
        name: fast
        defaults:
          executor: {{name: command, config: {{command: [{PY}, -c, "print('done')"]}}}}
        stimuli:
          - {{name: quick, prompt: go}}
        """,
    )
    out = project / "out"
    log = (project / "stdout.txt").open("w"), (project / "stderr.txt").open("w")
    proc = subprocess.Popen(
        [
            *VALLY,
            "eval",
            "-e",
            str(fast),
            "-e",
            str(spec),
            "--workers",
            "2",
            "--runs",
            "3",
            "--output-dir",
            str(out),
        ],
        cwd=project,
        stdout=log[0],
        stderr=log[1],
        env={**os.environ, "NO_COLOR": "1"},
    )
    try:

        def results() -> list[dict]:
            files = list(out.glob("*/results.jsonl"))
            if not files:
                return []
            return [json.loads(x) for x in files[0].read_text().splitlines() if x.strip()]

        def pids() -> list[int]:
            return [int(p) for p in pid_file.read_text().split()] if pid_file.exists() else []

        # fast's three trials finish first; then both workers hold a hanging agent
        _wait_for(
            lambda: len(pids()) == 2 and sum(r["evalName"] == "fast" for r in results()) == 3,
            "the fast trials and two hanging agents",
        )
        agent_pids = pids()
        assert all(_alive(pid) for pid in agent_pids)
        proc.send_signal(signum)
        code = proc.wait(timeout=DEADLINE)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for f in log:
            f.close()
    stderr = (project / "stderr.txt").read_text()
    assert code == 130, stderr
    assert "Traceback" not in stderr
    _wait_for(lambda: not any(_alive(pid) for pid in agent_pids), "the agents to be gone")
    records = results()
    fast_records = [r for r in records if r["evalName"] == "fast"]
    assert len(fast_records) == 3
    assert all(r["status"] == "success" for r in fast_records)
    hung = [r for r in records if r["evalName"] == "hang"]
    assert len(hung) == 2  # the third hanging trial never started
    assert all(r["status"] == "cancelled" for r in hung)
    assert all(r["error"]["code"] == "VALLY_CANCELLED" for r in hung)
    # the run still wrote its summaries
    summary = next(out.glob("*/run-summary.jsonl")).read_text().splitlines()
    assert {json.loads(line)["evalName"] for line in summary} == {"hang", "fast"}
