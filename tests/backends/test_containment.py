"""Containment of agent processes on the ``local`` backend, attacked for real: ``vally eval``
runs shell-script agents through the ``command`` executor that leave processes behind in
every way a shell allows (``&``, ``nohup``, double fork, ``setsid``), and each must be gone
before grading and when the trial (or vally) ends."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.backends.containment_helpers import (
    ATTACKS,
    alive,
    run_vally,
    survivor_pids,
    vally_argv,
    verifier,
    wait_for,
    write_project,
)
from vally_backends import containment
from vally_backends.local import LocalBackend


@pytest.mark.slow
def test_no_agent_process_survives_into_grading_or_past_the_run(tmp_path: Path) -> None:
    piddir = tmp_path / "pids"
    piddir.mkdir()
    spec = write_project(tmp_path, ATTACKS, env={"PIDDIR": str(piddir)})
    proc, records = run_vally(tmp_path, spec)
    assert set(records) == set(ATTACKS), proc.stderr
    for name, record in records.items():
        assert record["status"] == "success", (name, record["error"], proc.stderr)
        result = verifier(record)
        stdout = result["metadata"]["stdout"]
        # The real verifier ran, nothing of the agent was alive then, the wrong answer fails.
        assert "REAL-VERIFIER alive:[]" in stdout, (name, stdout)
        assert "FAKE" not in stdout, (name, stdout)
        assert result["passed"] is False, (name, result)
    pids = survivor_pids(piddir)
    assert set(pids) == set(ATTACKS)
    assert {name: pid for name, pid in pids.items() if alive(pid)} == {}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("how", "code"), [({"HANG": "600"}, "VALLY_TIMEOUT"), ({"CRASH": "1"}, "VALLY_EXECUTION")]
)
def test_an_agent_that_times_out_or_crashes_leaves_nothing_behind(
    tmp_path: Path, how: dict[str, str], code: str
) -> None:
    piddir = tmp_path / "pids"
    piddir.mkdir()
    attacks = ["setsid", "setsid-double-fork"]
    spec = write_project(tmp_path, attacks, env={"PIDDIR": str(piddir), **how}, timeout="3s")
    proc, records = run_vally(tmp_path, spec)
    assert set(records) == set(attacks), proc.stderr
    for record in records.values():
        assert record["status"] == "error", record
        assert record["error"]["code"] == code, record["error"]
    pids = survivor_pids(piddir)
    assert set(pids) == set(attacks)
    assert [pid for pid in pids.values() if alive(pid)] == []


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_stopping_vally_stops_every_agent_process(tmp_path: Path, signum: signal.Signals) -> None:
    piddir = tmp_path / "pids"
    piddir.mkdir()
    attacks = ["setsid", "double-fork"]
    spec = write_project(tmp_path, attacks, env={"PIDDIR": str(piddir), "HANG": "600"})
    with (tmp_path / "log.txt").open("w") as log:
        proc = subprocess.Popen(
            vally_argv(spec, tmp_path / "out"), cwd=tmp_path, stdout=log, stderr=log,
            env={**os.environ, "NO_COLOR": "1"},
        )  # fmt: skip
    try:
        wait_for(lambda: len(survivor_pids(piddir)) == 2, "both survivors to start")
        proc.send_signal(signum)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    pids = survivor_pids(piddir).values()
    # SIGTERM: vally closes its sandboxes; SIGKILL: each keeper notices its parent died.
    wait_for(lambda: not any(alive(pid) for pid in pids), "the survivors to be killed")


def test_the_next_run_sweeps_marked_processes_of_a_dead_vally(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    token = f"{dead.pid}.1.deadbeef"
    assert not containment.owner_alive(token)
    orphan = subprocess.Popen(
        ["sh", "-c", "trap '' TERM HUP; while :; do sleep 1; done"],
        env={**os.environ, containment.CELL_ENV: token},
        start_new_session=True,
    )
    try:
        wait_for(lambda: orphan.pid in containment.marked(token), "the marked process")
        asyncio.run(LocalBackend().start("run-next"))
        assert orphan.wait(timeout=30) == -signal.SIGKILL
    finally:
        if orphan.poll() is None:
            orphan.kill()
            orphan.wait()


def test_a_live_vally_s_processes_are_not_swept(tmp_path: Path) -> None:
    token = containment.new_token()
    assert containment.owner_alive(token)
    marked = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"],
        stdin=subprocess.PIPE,
        env={**os.environ, containment.CELL_ENV: token},
    )
    try:
        wait_for(lambda: containment.marked(token) == [marked.pid], "the marked process")
        assert containment.sweep_dead() == 0
        assert marked.poll() is None
    finally:
        marked.kill()
        marked.wait()


@pytest.mark.slow
def test_an_agent_killed_by_a_signal_is_a_crash(tmp_path: Path) -> None:
    spec = write_project(tmp_path, ["segv"])
    proc, records = run_vally(tmp_path, spec)
    record = records["segv"]
    trajectory = record["trajectory"]
    assert trajectory["endReason"] == "error", (trajectory["endReason"], proc.stderr)
    assert "SIGSEGV" in trajectory["endDetail"]
    assert trajectory["metadata"]["extra"]["signals"] == [signal.SIGSEGV]
    errors = [e for e in trajectory["events"] if e["type"] == "error"]
    assert [e["data"]["code"] for e in errors] == ["killed_by_signal"], errors
