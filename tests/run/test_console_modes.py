"""How ``vally eval`` reads on a terminal (a live display with counts and ETA, checked in a
real pseudo-terminal), in a log (a progress line on standard error between trials, read
from the pipe while the run goes), with ``--quiet`` (still with progress lines), and when
a ``--tag`` filter matches nothing."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pexpect

from .conftest import VALLY, run_vally, write_spec

SLOW = """
name: {name}
defaults:
  executor: {{name: mock, config: {{output: "ok {{prompt}}", delay: {delay}}}}}
graders:
  - {{type: output-contains, config: {{substring: ok}}}}
stimuli:
  - {{name: first, prompt: a, tags: {{area: auth}}}}
  - {{name: second, prompt: b, tags: {{area: db}}}}
  - {{name: third, prompt: c, graders: [{{type: output-contains, config: {{substring: nope}}}}]}}
"""


def _slow(project: Path, name: str = "slow", delay: str = "700ms") -> Path:
    return write_spec(project / "evals" / name, SLOW.format(name=name, delay=delay))


def test_terminal_shows_a_live_display_with_counts_and_eta(project: Path) -> None:
    first, second = _slow(project, "alpha"), _slow(project, "beta")
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS")}
    child = pexpect.spawn(
        VALLY[0],
        [*VALLY[1:], "eval", "-e", str(first), "-e", str(second), "--workers", "1"],
        cwd=str(project),
        env={**env, "TERM": "xterm"},
        dimensions=(40, 220),
        encoding="utf-8",
        timeout=60,
    )
    try:
        child.expect(r"vally eval")
        child.expect(r"1/6")
        child.expect(r"alpha: 1 passed, 0 failed")
        child.expect(r"ETA")
        child.expect(r"alpha: 2 passed, 1 failed · beta: 1 passed, 0 failed")
        child.expect(r"✘ alpha/third: 1/1 trials failed · 1 with output-contains: ")
        child.expect(r"  alpha: 2/3 passed · FAIL")
        child.expect(r"  beta: 2/3 passed · FAIL")
        child.expect(r"6 trials: 4 passed, 2 failed, 0 errored in [\d.]+s · verdict: FAIL")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0


def test_log_gets_a_heartbeat_between_trials(project: Path) -> None:
    (project / ".vally.yaml").write_text(
        "paths: {evals: [evals]}\nplugin_config: {reporter: {console: {heartbeat: 100ms}}}\n",
        encoding="utf-8",
    )
    spec = _slow(project, delay="1500ms")
    proc = subprocess.Popen(
        [*VALLY, "eval", "-e", str(spec), "--workers", "1", "--output-dir", "out"],
        cwd=project,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        running = proc.poll() is None
        seen = [first]
        while "progress: 1/3" not in seen[-1]:
            seen.append(proc.stderr.readline())
            assert seen[-1], f"the output ended before the first trial's progress: {seen}"
        rest = proc.stderr.read()
    finally:
        proc.wait(timeout=120)
    assert running, "the first progress line only arrived when the run had ended"
    pattern = r"progress: 0/3 trials \(0%\), 0 failed, 0 errored, [01] running, elapsed [\d.]+s$"
    assert re.match(pattern, first), first
    pattern = (
        r"progress: 1/3 trials \(33%\), 0 failed, 0 errored, [01] running, elapsed [\d.]+s, ETA "
    )
    assert re.match(pattern, seen[-1]), seen[-1]
    assert proc.returncode == 0
    assert "progress: 3/3 trials (100%), 1 failed, 0 errored" in rest


def test_quiet_prints_only_failures_and_the_verdict(project: Path) -> None:
    spec = _slow(project, delay="1ms")
    run = run_vally(["-e", str(spec), "--quiet"], project)
    assert run.code == 0, run.stderr
    lines = [line for line in run.stdout.splitlines() if line]
    assert lines[0].startswith("Failures (1 of 3 trials; details in report.md")
    assert lines[1] == (
        "  ✘ slow/third: 1/1 trials failed · "
        "1 with output-contains: 'nope' not found in output: ok c"
    )
    assert lines[2].startswith("3 trials: 2 passed, 1 failed, 0 errored in ")
    assert "--require-pass was not given" in lines[3]
    assert len(lines) == 4, lines
    progress = [line for line in run.stderr.splitlines() if line.startswith("progress: ")]
    assert progress[-1].startswith("progress: 3/3 trials (100%), 1 failed, 0 errored, "), progress


def test_quiet_and_verbose_cannot_be_combined(project: Path) -> None:
    spec = _slow(project, delay="1ms")
    run = run_vally(["-e", str(spec), "-q", "-v"], project)
    assert run.code == 1
    assert "--quiet and --verbose cannot be combined" in run.stderr
    assert not (project / "out").exists()


def test_a_tag_matching_nothing_lists_the_tags_that_exist(project: Path) -> None:
    spec = _slow(project, delay="1ms")
    run = run_vally(["-e", str(spec), "--tag", "area=payments"], project)
    assert run.code == 0, run.stderr
    assert "slow: nothing to run, no stimulus matched the filters." in run.stderr
    assert "  tags in slow: area=auth, area=db" in run.stderr
