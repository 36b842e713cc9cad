"""Helpers for the experiment tests: write experiment projects, run the CLI for real."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

VALLY = [sys.executable, "-m", "vally"]

EVAL_SPEC = """
name: {name}
defaults:
  runs: {runs}
  executor:
    name: mock
    config: {{output: "hello {{prompt}}"}}
stimuli:
  - name: alpha
    prompt: a
    graders:
      - {{type: output-contains, config: {{substring: hello}}}}
  - name: beta
    prompt: b
    graders:
      - {{type: output-contains, config: {{substring: hello}}}}
"""

EXPERIMENT = """
name: greet
evals: ["evals/*/eval.yaml"]
vary: [/defaults/executor/config/output]
baseline: base
variants:
  base: {}
  quiet:
    defaults:
      executor:
        config: {output: "bye {prompt}"}
"""


@dataclass
class Result:
    """A finished ``vally experiment`` subprocess."""

    code: int
    stdout: str
    stderr: str

    @property
    def text(self) -> str:
        return self.stdout + self.stderr


def vally(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> Result:
    full_env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", **(env or {})}
    proc = subprocess.run(
        [*VALLY, *args], cwd=cwd, capture_output=True, text=True, env=full_env, timeout=timeout
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def make_project(root: Path, *, evals: tuple[str, ...] = ("one",), runs: int = 1,
                 experiment: str = EXPERIMENT) -> Path:
    """A project with mock-executor evals and an experiment file; returns the file."""
    write(root / ".vally.yaml", "paths: {evals: [evals]}\n")
    for name in evals:
        write(root / "evals" / name / "eval.yaml", EVAL_SPEC.format(name=name, runs=runs))
    return write(root / "experiment.yaml", experiment)


def run_dirs(output: Path) -> list[Path]:
    return sorted(p for p in output.iterdir() if p.is_dir())


def only_run_dir(output: Path) -> Path:
    dirs = run_dirs(output)
    assert len(dirs) == 1, dirs
    return dirs[0]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder holding the default experiment project."""
    make_project(tmp_path)
    return tmp_path
