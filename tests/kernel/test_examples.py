"""Each example plugin under plugins/examples/ is installed and passes its own tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "plugins" / "examples"
WITH_TESTS = sorted(p for p in EXAMPLES.iterdir() if (p / "tests").is_dir())


def test_there_is_an_example_plugin() -> None:
    assert any(p.name == "vally-word-count-grader" for p in WITH_TESTS)


@pytest.mark.parametrize("example", WITH_TESTS, ids=[p.name for p in WITH_TESTS])
def test_example_plugin_tests_pass(example: Path, tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(example / "tests")],
        capture_output=True,
        text=True,
        cwd=example,
        env=env,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout
