"""Run ``vally eval`` as a user would, with the project's LLM settings pointing at a
loopback chat server, and read back its one record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

KEY_ENV = "VALLY_PROJECT_LLM_TEST_KEY"


def eval_with_project_llm(folder: Path, eval_yaml: str, base_url: str) -> dict[str, Any]:
    """Write ``eval.yaml`` and a ``.vally.yaml`` whose ``llm`` is ``base_url`` into
    ``folder``, run ``vally eval --model m1`` there (no ``OPENAI_*`` of the machine) and
    return the run's only record."""
    (folder / "eval.yaml").write_text(eval_yaml)
    (folder / ".vally.yaml").write_text(
        f"llm:\n  base_url: {base_url}\n  api_key_env: {KEY_ENV}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env[KEY_ENV] = "sk-test"
    proc = subprocess.run(
        [sys.executable, "-m", "vally", "eval", "-e", "eval.yaml", "--model", "m1"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [results] = list(folder.glob("**/results.jsonl"))
    [record] = [json.loads(line) for line in results.read_text().splitlines()]
    return dict(record)
