"""Helpers for the run-engine tests: write eval specs, run ``vally eval`` for real."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

VALLY = [sys.executable, "-c", "from vally.cli.app import main; main()"]


@dataclass
class Run:
    """A finished ``vally eval`` subprocess."""

    code: int
    stdout: str
    stderr: str
    output_dir: Path

    @property
    def run_dir(self) -> Path:
        runs = sorted(p for p in self.output_dir.iterdir() if p.is_dir())
        assert len(runs) == 1, runs
        return runs[0]

    def records(self) -> list[dict]:
        lines = (self.run_dir / "results.jsonl").read_text().splitlines()
        return [json.loads(line) for line in lines]

    def summaries(self) -> list[dict]:
        lines = (self.run_dir / "run-summary.jsonl").read_text().splitlines()
        return [json.loads(line) for line in lines]


def write_spec(folder: Path, text: str, name: str = "eval.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def run_vally(
    args: list[str],
    cwd: Path,
    *,
    output_dir: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 120,
) -> Run:
    out = output_dir or (cwd / "out")
    cmd = [*VALLY, "eval", *args]
    if "--output-dir" not in args:
        cmd += ["--output-dir", str(out)]
    full_env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", **(env or {})}
    proc = subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, env=full_env, timeout=timeout
    )
    return Run(proc.returncode, proc.stdout, proc.stderr, out)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An empty folder with a ``.vally.yaml`` so no outer project file is picked up."""
    (tmp_path / ".vally.yaml").write_text("paths: {evals: [evals]}\n", encoding="utf-8")
    return tmp_path
