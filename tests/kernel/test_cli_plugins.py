"""``vally plugins list`` through the real typer app, and the CLI's import weight."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from kernel_helpers import MakeDist, grader_source
from typer.testing import CliRunner

from vally.cli.app import app


def test_plugins_list_json_shows_sources_and_broken_rows(make_dist: MakeDist, unique: str) -> None:
    make_dist(
        f"cli-{unique}",
        "3.1",
        entry_points={
            "vally.graders": {
                f"cli-ok-{unique}": f"vally_t_cli_{unique}:Ok",
                f"cli-broken-{unique}": f"vally_t_cli_missing_{unique}:Gone",
            }
        },
        modules={f"vally_t_cli_{unique}.py": grader_source("Ok", f"cli-ok-{unique}", "works")},
    )
    result = CliRunner().invoke(app, ["plugins", "list", "--kind", "grader", "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert rows[f"cli-ok-{unique}"]["status"] == "ok"
    assert rows[f"cli-ok-{unique}"]["source"] == f"cli-{unique} 3.1"
    assert rows[f"cli-ok-{unique}"]["kind"] == "grader"
    assert rows["word-count"]["source"] == "vally-word-count-grader 0.1.0"
    broken = rows[f"cli-broken-{unique}"]
    assert broken["status"] == "error"
    assert f"vally_t_cli_missing_{unique}" in broken["error"]
    assert f"warning: grader plugin 'cli-broken-{unique}' is broken" in result.stderr
    assert {row["kind"] for row in rows.values()} == {"grader"}


def test_plugins_list_table(make_dist: MakeDist, unique: str) -> None:
    make_dist(
        f"tbl-{unique}",
        entry_points={"vally.graders": {f"tbl-broken-{unique}": f"vally_t_tbl_{unique}:X"}},
    )
    result = CliRunner().invoke(app, ["plugins", "list"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NAME", "KIND", "SOURCE", "STATUS", "DESCRIPTION"]
    (row,) = [line for line in lines if line.startswith("word-count ")]
    assert "grader" in row and "vally-word-count-grader 0.1.0" in row and " ok " in row
    (bad,) = [line for line in lines if line.startswith(f"tbl-broken-{unique} ")]
    assert " error " in bad
    assert any(line.split()[1] == "backend" for line in lines[1:])


def test_plugins_list_with_a_file_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "extra.py").write_text(
        grader_source("Extra", "extra-grader", "from a file")
        + "\ndef register(registrar):\n    registrar.grader(Extra)\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        app, ["plugins", "list", "-k", "graders", "--plugin", "extra.py", "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    (row,) = [r for r in json.loads(result.stdout) if r["name"] == "extra-grader"]
    assert row["source"].startswith(str(tmp_path / "extra.py"))
    assert row["description"] == "from a file"


def test_plugins_list_rejects_unknown_kind() -> None:
    result = CliRunner().invoke(app, ["plugins", "list", "--kind", "gizmo"])
    assert result.exit_code == 2
    assert "unknown kind 'gizmo'" in result.output


def test_plugin_machinery_is_not_imported_at_cli_start() -> None:
    code = (
        "import sys, vally_authoring.cli.plugins, vally.plugins.registry;"
        "print(sorted(m for m in ('stevedore', 'pluggy', 'vally.plugins.session',"
        " 'vally.plugins.loader')"
        " if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_cli_start_mounts_extensions_without_heavy_imports() -> None:
    code = (
        "import sys, vally.cli.app;"
        "print(sorted(m for m in ('stevedore', 'pydantic', 'vally.plugins.session',"
        " 'vally.plugins.loader') if m in sys.modules));"
        "print('vally_backends.docker.cli' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.split("\n")[:2] == ["[]", "True"]
