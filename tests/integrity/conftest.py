"""Helpers of the integrity tests: hostile agents are shell scripts run by the real
``command`` executor on the real local backend, through the real ``vally`` CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

VALLY = [sys.executable, "-m", "vally"]


@dataclass
class Finished:
    """A finished ``vally`` subprocess."""

    code: int
    stdout: str
    stderr: str

    def run_dir(self, output_dir: Path) -> Path:
        runs = sorted(p for p in output_dir.iterdir() if p.is_dir())
        assert len(runs) == 1, runs
        return runs[0]


def vally(
    *args: str | Path,
    cwd: Path,
    stdin: bytes | Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 180,
) -> Finished:
    """Run ``python -m vally ARGS`` in ``cwd``; no traceback may reach the user."""
    full_env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", **(env or {})}
    full_env.pop("VALLY_DEBUG", None)
    if isinstance(stdin, Path):  # redirected from a file, as `vally grade < file` is
        with stdin.open("rb") as handle:
            proc = subprocess.run(
                [*VALLY, *map(str, args)],
                cwd=cwd,
                stdin=handle,
                capture_output=True,
                env=full_env,
                timeout=timeout,
            )
    else:
        proc = subprocess.run(
            [*VALLY, *map(str, args)],
            cwd=cwd,
            input=stdin,
            capture_output=True,
            env=full_env,
            timeout=timeout,
        )
    out = proc.stdout.decode("utf-8", "replace")
    err = proc.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, err
    return Finished(proc.returncode, out, err)


def agent_script(folder: Path, body: str, name: str = "agent.sh") -> Path:
    """Write an executable shell script (the hostile agent)."""
    path = folder / name
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body), encoding="utf-8")
    path.chmod(0o755)
    return path


def write_eval(folder: Path, text: str, name: str = "eval.yaml") -> Path:
    """Write an eval spec into ``folder/evals``."""
    path = folder / "evals" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def read_records(path: Path) -> list[dict[str, Any]]:
    """Every line of a results file, parsed."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An empty project folder (its own ``.vally.yaml``)."""
    (tmp_path / ".vally.yaml").write_text("paths: {evals: [evals]}\n", encoding="utf-8")
    return tmp_path
