"""Workspaces of a killed run do not pile up: the local backend names each workspace after
its vally process, and the next run deletes those whose process is gone, never those of a
running vally nor folders it did not name."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vally_backends.containment import can_tell_owners, owner_mark
from vally_backends.local import sweep_dead_workspaces

pytestmark = pytest.mark.skipif(not can_tell_owners(), reason="needs /proc (Linux)")


def test_only_workspaces_of_dead_owners_are_swept(tmp_path: Path) -> None:
    mine = tmp_path / f"vally-eval-{owner_mark()}-abc"
    pid = os.getpid()
    reused_pid = tmp_path / f"vally-eval-{pid}.1-abc"  # this pid, another start time
    gone = tmp_path / "vally-eval-999999999.12345-abc"
    legacy = tmp_path / "vally-eval-k3j4h5"
    other = tmp_path / "unrelated-999999999.12345-abc"
    for folder in (mine, reused_pid, gone, legacy, other):
        (folder / "sub").mkdir(parents=True)
        (folder / "sub" / "f.txt").write_text("x")
    link = tmp_path / "vally-eval-999999998.1-link"
    link.symlink_to(other, target_is_directory=True)
    assert sweep_dead_workspaces(str(tmp_path)) == 2
    assert mine.is_dir() and legacy.is_dir() and other.is_dir() and link.is_symlink()
    assert not reused_pid.exists() and not gone.exists()


SLOW = """\
name: slow
defaults:
  runs: 1
  timeout: 120s
  executor: {name: command, config: {command: [sleep, "100"]}}
stimuli:
  - {name: s1, prompt: hi, graders: [{type: completed}]}
"""

QUICK = """\
name: quick
defaults:
  runs: 1
  executor: {name: mock, config: {output: done}}
stimuli:
  - {name: s1, prompt: hi, graders: [{type: completed}]}
"""


def test_the_next_run_deletes_the_workspace_of_a_killed_run(tmp_path: Path) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    (tmp_path / "slow.yaml").write_text(SLOW)
    (tmp_path / "quick.yaml").write_text(QUICK)
    env = {**os.environ, "TMPDIR": str(temp)}
    command = [sys.executable, "-m", "vally", "eval", "--output-dir", "out", "-e"]
    killed = subprocess.Popen(
        [*command, "slow.yaml"], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not list(temp.glob("vally-eval-*")):  # the trial's workspace appears
            assert killed.poll() is None and time.monotonic() < deadline, "no workspace made"
            time.sleep(0.05)
        [workspace] = list(temp.glob("vally-eval-*"))
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
    assert workspace.is_dir()  # a SIGKILLed run cannot clean up
    done = subprocess.run(
        [*command, "quick.yaml"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert not workspace.exists()
    assert "deleted 1 workspace(s) left by a dead vally run" in done.stderr
