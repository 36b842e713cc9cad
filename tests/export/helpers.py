"""Helpers of the export tests: the real ``vally`` CLI in a subprocess, and Harbor tasks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SHELL_AGENT = 'defaults:\n  executor: {name: command, config: {command: [sh, -c, "{prompt}"]}}\n'
"""An eval ``defaults:`` block whose agent runs the prompt as a shell command."""


@dataclass
class Finished:
    """A finished ``vally`` subprocess."""

    code: int
    stdout: str
    stderr: str


def vally(
    *args: str | Path, cwd: Path, env: dict[str, str] | None = None, timeout: float = 240
) -> Finished:
    """Run ``python -m vally ARGS`` in ``cwd``; no traceback may reach the user."""
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", **(env or {})}
    env.pop("VALLY_DEBUG", None)
    proc = subprocess.run(
        [sys.executable, "-m", "vally", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return Finished(proc.returncode, proc.stdout, proc.stderr)


def verdicts(output_dir: Path) -> dict[str, bool]:
    """Stimulus name -> passed, from every ``results.jsonl`` below ``output_dir``."""
    found: dict[str, bool] = {}
    for results in sorted(output_dir.rglob("results.jsonl")):
        for line in results.read_text(encoding="utf-8").splitlines():
            record: dict[str, Any] = json.loads(line)
            assert record["status"] == "success", record
            found[record["stimulusName"]] = bool(record["gradeResult"]["passed"])
    return found


def write_task(root: Path, name: str, *, instruction: str, test_sh: str, toml: str = "") -> Path:
    """Write a hand-made Harbor task folder (``environment/`` is left to the caller)."""
    task = root / name
    (task / "tests").mkdir(parents=True)
    (task / "environment").mkdir()
    (task / "task.toml").write_text(textwrap.dedent(toml) or 'version = "1.0"\n', "utf-8")
    (task / "instruction.md").write_text(instruction, encoding="utf-8")
    script = task / "tests" / "test.sh"
    script.write_text(textwrap.dedent(test_sh), encoding="utf-8")
    script.chmod(0o755)
    return task
