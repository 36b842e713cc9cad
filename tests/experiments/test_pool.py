"""One shared worker pool: a slow variant does not hold back the other variant."""

from __future__ import annotations

import sys
from pathlib import Path

from .conftest import only_run_dir, read_jsonl, vally, write

AGENT = '''
import os, pathlib, sys, time
marks = pathlib.Path(os.environ["MARKS"])
if os.environ["MODE"] == "slow":
    # Blocks until every trial of the fast variant has run (or gives up after a minute).
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if marks.exists() and len(marks.read_text().splitlines()) >= 2:
            print("released")
            sys.exit(0)
        time.sleep(0.02)
    print("gave up waiting")
else:
    with marks.open("a") as f:
        f.write("fast trial ran\\n")
    print("fast")
'''


def test_slow_variant_does_not_block_the_other(tmp_path: Path) -> None:
    agent = write(tmp_path / "agent.py", AGENT)
    marks = tmp_path / "marks.txt"
    write(tmp_path / ".vally.yaml", "{}\n")
    write(tmp_path / "evals/wait/eval.yaml", f"""
        name: wait
        environment:
          env: {{MODE: fast, MARKS: "{marks}"}}
        defaults:
          runs: 2
          timeout: 90s
          executor:
            name: command
            config: {{command: ["{sys.executable}", "{agent}"], prompt_via: stdin}}
        stimuli:
          - name: s
            prompt: go
            graders: [{{type: output-contains, config: {{substring: s}}}}]
        """)
    write(tmp_path / "experiment.yaml", """
        name: pool
        evals: [evals/wait/eval.yaml]
        vary: [/environment/env/MODE]
        baseline: slow
        variants:
          slow: {environment: {env: {MODE: slow}}}
          fast: {}
        """)
    res = vally("experiment", "run", "experiment.yaml", "--workers", "3", "--output-dir", "out",
                cwd=tmp_path)
    assert res.code == 0, res.text
    run_dir = only_run_dir(tmp_path / "out")
    slow = read_jsonl(run_dir / "slow" / "results.jsonl")
    fast = read_jsonl(run_dir / "fast" / "results.jsonl")
    assert len(slow) == 2 and len(fast) == 2
    # Both slow trials (planned first) were still running while the fast variant's trials
    # ran to completion, and were released only by them.
    assert all("released" in r["trajectory"]["output"] for r in slow), slow
    # With 3 workers and both slow trials blocked, the first fast trial must finish before
    # the second can start: the first completed trial is a fast one.
    progress = [ln.split()[1] for ln in res.stdout.splitlines() if ln.startswith("  ✔")]
    assert sorted(progress) == ["fast", "fast", "slow", "slow"]
    assert progress[0] == "fast"
