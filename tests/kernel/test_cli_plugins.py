"""``vally plugins list`` through the real typer app, and the CLI's import weight."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from kernel_helpers import MakeDist, grader_source
from typer.testing import CliRunner

from tests.cli_probe import run_vally_then
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


def test_a_command_line_naming_a_command_builds_that_command_alone() -> None:
    """typer builds every command the application holds before parsing: a command line that
    names one gets an application holding that one (and the root's options) alone."""
    from vally.cli.app import invoked_app

    for args in (["eval", "-e", "x.yaml"], ["--debug", "eval"]):
        alone = invoked_app(args, {})
        assert [c.name for c in alone.registered_commands] == ["eval"]
        assert alone.registered_groups == []
        assert alone.registered_callback is app.registered_callback
    experiment = invoked_app(["experiment", "run", "x.yaml"], {})
    assert [g.name for g in experiment.registered_groups] == ["experiment"]
    assert experiment.registered_commands == []
    for args in ([], ["--help"], ["--version"], ["evl"]):
        assert invoked_app(args, {}) is app
    assert invoked_app(["eval"], {"_VALLY_COMPLETE": "complete_bash"}) is app
    assert len(app.registered_commands) > 1  # the whole application is left as it was


def test_only_given_options_build_a_coercion(monkeypatch: pytest.MonkeyPatch) -> None:
    """typer builds a pydantic adapter per parameter it coerces; an option left out has
    nothing to coerce and builds none (``vally eval`` has about 40 options)."""
    adapters = pytest.importorskip("typer._adapters")
    built: list[object] = []
    original = adapters.try_build_adapter

    def counted(annotation: object, parameter_info: object) -> object:
        built.append(annotation)
        return original(annotation, parameter_info)

    monkeypatch.setattr(adapters, "try_build_adapter", counted)
    result = CliRunner().invoke(app, ["eval", "-e", "missing.yaml", "--workers", "2"])
    assert result.exit_code == 1, result.output
    assert 2 <= len(built) <= 4, built  # -e, --workers and the options with a default
    bad = CliRunner().invoke(app, ["eval", "--workers", "two"])
    assert bad.exit_code == 2
    assert "Invalid value for '--workers'" in bad.output


def test_eval_imports_the_run_engine_without_collecting(tmp_path: Path) -> None:
    """The run engine's modules live to the end of the command: ``vally eval`` imports them
    with collection off (a hundred collections scanned them again and again) and frozen."""
    watch = (
        "import gc, sys\n"
        "seen = []\n"
        "def during_import(phase, info):\n"
        "    module = sys.modules.get('vally.engine.evals')\n"
        "    spec = getattr(module, '__spec__', None)\n"
        "    if phase == 'start' and getattr(spec, '_initializing', False):\n"
        "        seen.append(info['generation'])\n"
        "gc.callbacks.append(during_import)\n"
    )
    result = run_vally_then(
        ["eval", "-e", "missing.yaml"],
        "print(len(seen), gc.isenabled(), gc.get_freeze_count() > 0, file=sys.stderr)\n",
        cwd=tmp_path,
        before=watch,
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines()[-1] == "0 True True"


def test_a_run_off_a_terminal_imports_no_live_display_nor_experiment_report(
    tmp_path: Path,
) -> None:
    """What ``vally eval`` imports before its first trial is paid by every run: off a
    terminal it needs no live progress display, and an eval no experiment report (nor the
    comparison statistics that report imports)."""
    (tmp_path / "eval.yaml").write_text(
        "name: one\n"
        "defaults: {runs: 1, executor: {name: command, config: {command: ['true']}}}\n"
        "stimuli:\n"
        "  - {name: s0, prompt: p, graders: [{type: completed}]}\n",
        encoding="utf-8",
    )
    result = run_vally_then(
        ["eval", "-e", "eval.yaml", "--output-dir", "out"],
        "heavy = ('rich.progress', 'rich.live', 'vally_builtin.reporters.experiment_report',"
        " 'vally_compare.statistics')\n"
        "print(sorted(m for m in heavy if m in sys.modules), file=sys.stderr)\n",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines()[-1] == "[]"
    assert (next((tmp_path / "out").iterdir()) / "report.md").is_file()
