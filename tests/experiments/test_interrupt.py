"""Ctrl-C during an experiment: exit 130, finished trials kept, the shard left unfinished."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from .conftest import VALLY, write

AGENT = '''
import os, pathlib, sys, time
pathlib.Path(os.environ["STARTED"]).joinpath(str(os.getpid())).write_text("x")
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    time.sleep(0.05)
print("never interrupted")
'''


def test_sigint_exits_130_and_leaves_the_shard_unfinished(tmp_path: Path) -> None:
    agent = write(tmp_path / "agent.py", AGENT)
    started = tmp_path / "started"
    started.mkdir()
    write(tmp_path / ".vally.yaml", "{}\n")
    write(tmp_path / "evals/w/eval.yaml", f"""
        name: w
        environment: {{env: {{STARTED: "{started}"}}}}
        defaults:
          timeout: 90s
          executor:
            name: command
            config: {{command: ["{sys.executable}", "{agent}"], prompt_via: stdin}}
        stimuli:
          - {{name: s, prompt: go}}
        """)
    write(tmp_path / "experiment.yaml", """
        name: intr
        evals: [evals/*/eval.yaml]
        vary: [/defaults/model]
        baseline: a
        variants: {a: {}, b: {}}
        """)
    proc = subprocess.Popen(
        [*VALLY, "experiment", "run", "experiment.yaml", "--shard", "1/1", "--run-id", "r",
         "--output-dir", "out"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    try:
        deadline = time.monotonic() + 60
        while len(list(started.iterdir())) < 2 and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stdout + stderr
    assert "Interrupted" in stderr
    shard = tmp_path / "out" / "r" / "shard-1-of-1"
    manifest = json.loads((shard / "shard-manifest.json").read_text())
    assert manifest["finished"] is False and manifest["completedKeys"] == []
    records = [json.loads(ln) for ln in (shard / "a" / "results.jsonl").read_text().splitlines()]
    assert [r["status"] for r in records] == ["cancelled"]
