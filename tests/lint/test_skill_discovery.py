"""Where ``vally lint`` looks for SKILL.md files: the PATH it was given, the project's
``paths.skills`` and the eval files' own folders, never the whole tree it was run from."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from vally.cli.app import app

runner = CliRunner()

SPEC = "stimuli:\n  - {name: one, prompt: hi}\n"
BROKEN_SKILL = "# no frontmatter\n"
GOOD_SKILL = "---\nname: ok\ndescription: A skill that is fine.\n---\nBody.\n"


def _skill(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(text, encoding="utf-8")
    return folder


def test_a_spec_elsewhere_does_not_lint_the_tree_lint_runs_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "shared"
    _skill(shared / "someone-elses-checkout" / "skills" / "broken", BROKEN_SKILL)
    spec_dir = tmp_path / "mine"
    spec_dir.mkdir()
    (spec_dir / "eval.yaml").write_text(SPEC, encoding="utf-8")
    monkeypatch.chdir(shared)
    result = runner.invoke(app, ["lint", "-e", str(spec_dir / "eval.yaml"), "-v"])
    assert result.exit_code == 0, result.output
    assert "skill-invalid" not in result.output
    assert "1 eval file(s) and 0 skill(s)" in result.output


def test_the_specs_own_skills_are_linted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec_dir = tmp_path / "my-skill"
    _skill(spec_dir, BROKEN_SKILL)  # a skill folder with its own eval
    _skill(spec_dir / "skills" / "helper", GOOD_SKILL)
    _skill(spec_dir / "fixtures" / "not-a-skill-of-the-spec", BROKEN_SKILL)
    (spec_dir / "eval.yaml").write_text(SPEC, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["lint", "-e", str(spec_dir / "eval.yaml"), "-v"])
    assert result.exit_code == 1
    assert result.output.count("error[skill-invalid]") == 1
    assert f"{spec_dir / 'SKILL.md'}" in result.output
    assert "1 eval file(s) and 2 skill(s)" in result.output


def test_a_project_lints_its_configured_skill_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".vally.yaml").write_text(
        "paths: {evals: [evals], skills: [agent-skills]}\n", encoding="utf-8"
    )
    (tmp_path / "evals" / "e").mkdir(parents=True)
    (tmp_path / "evals" / "e" / "eval.yaml").write_text(SPEC, encoding="utf-8")
    _skill(tmp_path / "agent-skills" / "broken", BROKEN_SKILL)
    _skill(tmp_path / "vendor" / "pkg" / "broken", BROKEN_SKILL)  # not a skill path
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["lint"])
    assert result.exit_code == 1
    assert result.output.count("error[skill-invalid]") == 1
    assert "agent-skills/broken/SKILL.md" in result.output
