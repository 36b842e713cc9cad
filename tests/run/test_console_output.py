"""What ``vally eval`` prints: a line per trial as it finishes when the output is not a
terminal (CI logs), stimuli in the spec's order, and a closing line saying how it went."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from .conftest import VALLY, run_vally, write_spec

SLOW = """
name: slow
defaults:
  executor: {name: mock, config: {output: "ok {prompt}", delay: 1500ms}}
stimuli:
  - {name: first, prompt: a}
  - {name: second, prompt: b}
  - {name: third, prompt: c}
"""

MIXED = """
name: mixed
defaults:
  executor: {name: mock, config: {output: "ok {prompt}"}}
graders:
  - {type: output-contains, config: {substring: ok}}
stimuli:
  - {name: zeta, prompt: a}
  - {name: alpha, prompt: b, graders: [{type: output-contains, config: {substring: nope}}]}
  - {name: mid, prompt: c}
"""

CLOSING = re.compile(
    r"^3 trials: 2 passed, 1 failed, 0 errored in \d+(\.\d)?s · verdict: FAIL$", re.M
)


def test_piped_eval_prints_each_trial_as_it_finishes(project: Path) -> None:
    spec = write_spec(project, SLOW)
    proc = subprocess.Popen(
        [*VALLY, "eval", "-e", str(spec), "--workers", "1", "--output-dir", "out"],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        still_running = proc.poll() is None
        rest = proc.stdout.read()
    finally:
        proc.wait(timeout=120)
    assert "slow/first #0" in first, first
    assert still_running, "the first trial's line only arrived when the run had ended"
    assert proc.returncode == 0
    assert "slow/second #0" in rest and "slow/third #0" in rest
    assert rest.index("slow/third #0") < rest.index("Summary")


def test_report_follows_the_spec_order_and_ends_with_how_it_went(project: Path) -> None:
    spec = write_spec(project, MIXED)
    run = run_vally(["-e", str(spec), "-v"], project)
    assert run.code == 0, run.stderr
    blocks = [run.stdout.index(f"━━━ {name} ━━━") for name in ("zeta", "alpha", "mid")]
    assert blocks == sorted(blocks), run.stdout
    rows = [m.group(1) for m in re.finditer(r"│ mixed\s+│ (\w+)", run.stdout)]
    assert rows == ["zeta", "alpha", "mid"], run.stdout
    last = run.stdout.rstrip().splitlines()
    assert CLOSING.match(last[-2]), last[-2:]
    assert "--require-pass was not given" in last[-1] and "exits 1" in last[-1]


def test_require_pass_drops_the_exit_code_hint(project: Path) -> None:
    spec = write_spec(project, MIXED)
    run = run_vally(["-e", str(spec), "--require-pass"], project)
    assert run.code == 1
    last = run.stdout.rstrip().splitlines()[-1]
    assert CLOSING.match(last), last
    assert "--require-pass" not in run.stdout


def test_passing_run_ends_with_a_pass_verdict(project: Path) -> None:
    spec = write_spec(project, MIXED.replace("substring: nope", "substring: ok"))
    run = run_vally(["-e", str(spec)], project)
    assert run.code == 0, run.stderr
    last = run.stdout.rstrip().splitlines()[-1]
    assert re.match(r"3 trials: 3 passed, 0 failed, 0 errored in .* · verdict: PASS$", last)
