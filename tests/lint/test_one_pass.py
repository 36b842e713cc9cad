"""``vally lint`` reports every diagnostic of a file in one pass, schema errors included."""

from __future__ import annotations

import shutil
from pathlib import Path

from typer.testing import CliRunner

from tests.lint.test_lint import CATALOG, LINT, lint
from vally.cli.app import app
from vally.models.project import ProjectConfig
from vally_authoring.lint.spec_checks import lint_eval_file
from vally_authoring.lint.valid_parts import load_valid_parts

runner = CliRunner()

GOOD_STIMULUS = (
    "  - name: ok\n    prompt: p\n    graders: [{type: contains, config: {substring: x}}]\n"
)


def test_schema_errors_do_not_hide_the_other_checks() -> None:
    found = [(d.code, d.line, d.column) for d in lint("many-problems")]
    assert found == [
        ("invalid-spec", 2, 12),  # timeout: 90 (a bare number)
        ("invalid-spec", 4, 5),  # a stimulus without a prompt
        ("unknown-grader-type", 11, 15),
        ("duplicate-stimulus-name", 12, 11),
        ("path-escape", 14, 17),  # artifacts
        ("path-escape", 18, 17),  # files[].dest
    ]
    messages = [d.message for d in lint("many-problems")]
    assert messages[0].startswith("defaults.timeout: a duration needs a unit suffix")
    assert "write '90s'" in messages[0]
    assert "already used by the stimulus on line 8" in messages[3]


def test_cli_lists_every_problem_with_its_location(tmp_path: Path) -> None:
    # The installed graders: 'contains' of the fixture is spelled 'output-contains' here.
    text = (LINT / "many-problems.eval.yaml").read_text()
    spec = tmp_path / "many-problems.eval.yaml"
    spec.write_text(text.replace("type: contains", "type: output-contains"))
    shutil.copytree(LINT / "fixtures", tmp_path / "fixtures")
    result = runner.invoke(app, ["lint", str(tmp_path), "-e", str(spec)])
    assert result.exit_code == 1
    for where, code in [
        ("2:12", "invalid-spec"),
        ("4:5", "invalid-spec"),
        ("11:15", "unknown-grader-type"),
        ("12:11", "duplicate-stimulus-name"),
        ("14:17", "path-escape"),
        ("18:17", "path-escape"),
    ]:
        assert f"{spec}:{where}: error[{code}]" in result.output
    assert "6 error(s)" in result.output


def test_an_invalid_root_grader_still_lints_the_stimuli(tmp_path: Path) -> None:
    path = tmp_path / "x.eval.yaml"
    path.write_text("graders: [{config: {}}]\nstimuli:\n" + GOOD_STIMULUS + GOOD_STIMULUS)
    found = [(d.code, d.line) for d in lint_eval_file(path, CATALOG, project=ProjectConfig())]
    assert found == [("invalid-spec", 1), ("duplicate-stimulus-name", 6)]


def test_removed_list_items_keep_later_positions(tmp_path: Path) -> None:
    path = tmp_path / "x.eval.yaml"
    path.write_text("stimuli:\n  - name: no-prompt\n" + GOOD_STIMULUS)
    parts = load_valid_parts(path, cli_params={}, project=ProjectConfig())
    assert parts is not None
    loaded, positions = parts
    assert [s.name for s in loaded.spec.stimuli] == ["ok"]
    assert positions.line(("stimuli", 0, "name")) == 3
    assert ("stimuli", 1) not in positions.table


def test_nothing_to_lint_when_the_stimuli_themselves_are_invalid(tmp_path: Path) -> None:
    path = tmp_path / "x.eval.yaml"
    path.write_text("defaults: {timeout: 90}\nstimuli: 5\n")
    assert load_valid_parts(path, cli_params={}, project=ProjectConfig()) is None
    found = [(d.code, d.line) for d in lint_eval_file(path, CATALOG, project=ProjectConfig())]
    assert found == [("invalid-spec", 1), ("invalid-spec", 2)]
