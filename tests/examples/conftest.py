"""Helpers for driving the example plugins through the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "plugins" / "examples"


def run_vally(
    args: Sequence[str], *, cwd: Path = ROOT, env: dict[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run ``python3 -m vally ARGS`` and return the finished process."""
    result = subprocess.run(
        [sys.executable, "-m", "vally", *args],
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1", **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if check:
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    """A git repository with one commit holding ``README.md`` (tag ``v1``)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for args in (
        ["init", "-q", "-b", "main"],
        ["config", "user.email", "t@example.com"],
        ["config", "user.name", "t"],
    ):
        subprocess.run(["git", "-C", str(repo), *args], check=True)
    (repo / "README.md").write_text("hello from the repository\n")
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "one"], check=True)
    subprocess.run(["git", "-C", str(repo), "tag", "v1"], check=True)
    return repo
