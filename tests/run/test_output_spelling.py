"""Machine-readable output is spelled ``--output FORMAT`` on every command (as
``vally eval --output jsonl``); the older ``--format json`` and ``--json`` still work,
hidden, with a one-line deprecation notice."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

VALLY = [sys.executable, "-m", "vally"]


def _vally(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*VALLY, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def test_plugins_list_takes_output_json_and_the_old_format_flag(tmp_path: Path) -> None:
    new = _vally("plugins", "list", "--kind", "reporter", "--output", "json", cwd=tmp_path)
    assert new.returncode == 0, new.stderr
    assert "deprecated" not in new.stderr
    assert "junit" in {row["name"] for row in json.loads(new.stdout)}
    old = _vally("plugins", "list", "--kind", "reporter", "--format", "json", cwd=tmp_path)
    assert old.returncode == 0, old.stderr
    assert json.loads(old.stdout) == json.loads(new.stdout)
    notices = [line for line in old.stderr.splitlines() if "deprecated" in line]
    assert notices == ["warning: --format json is deprecated; use --output json"]
    both = _vally("plugins", "list", "--output", "json", "--format", "json", cwd=tmp_path)
    assert both.returncode == 2 and "give --output only" in both.stderr


def test_lint_takes_output_json_and_the_old_format_flag(tmp_path: Path) -> None:
    (tmp_path / "eval.yaml").write_text(
        "name: demo\nstimuli:\n  - {name: one, prompt: a}\n", encoding="utf-8"
    )
    new = _vally("lint", "-e", "eval.yaml", "--output", "json", cwd=tmp_path)
    old = _vally("lint", "-e", "eval.yaml", "--format", "json", cwd=tmp_path)
    assert json.loads(new.stdout) == json.loads(old.stdout)
    assert "deprecated" not in new.stderr
    assert "warning: --format json is deprecated; use --output json" in old.stderr


def test_help_shows_only_the_one_spelling(tmp_path: Path) -> None:
    for command in (["plugins", "list"], ["lint"], ["ingest"]):
        shown = _vally(*command, "--help", cwd=tmp_path).stdout
        assert "--output" in shown, command
        assert "--format" not in shown and "--json" not in shown, command
