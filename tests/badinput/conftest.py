"""Helpers for the bad-input tests: run the real CLI in a subprocess and check its answer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EVAL_YAML = """\
name: demo
defaults:
  runs: 1
  executor:
    name: mock
    config:
      output: "Done: {prompt}"
stimuli:
  - name: s1
    prompt: hello
    graders:
      - { type: output-contains, config: { substring: Done } }
"""

EXPERIMENT_YAML = """\
name: exp1
evals: ["*.eval.yaml"]
vary:
  - /defaults/executor/config/output
baseline: a
variants:
  a:
    defaults: {executor: {config: {output: "Done A"}}}
  b:
    defaults: {executor: {config: {output: "Done B"}}}
"""


def vally(
    *args: str | Path, cwd: Path, stdin: str | bytes | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m vally ARGS`` in ``cwd``; assert that no traceback reached the user."""
    env = {**os.environ}
    env.pop("VALLY_DEBUG", None)
    data = stdin.encode() if isinstance(stdin, str) else stdin
    proc = subprocess.run(
        [sys.executable, "-m", "vally", *map(str, args)],
        cwd=cwd,
        env=env,
        input=data if data is not None else b"",
        capture_output=True,
        timeout=120,
        check=False,
    )
    result = subprocess.CompletedProcess(
        proc.args,
        proc.returncode,
        proc.stdout.decode("utf-8", "replace"),
        proc.stderr.decode("utf-8", "replace"),
    )
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    return result


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder with a one-stimulus mock eval (``eval.yaml``) and a file named ``afile``."""
    (tmp_path / "eval.yaml").write_text(EVAL_YAML, encoding="utf-8")
    (tmp_path / "afile").write_text("not a folder\n", encoding="utf-8")
    return tmp_path
