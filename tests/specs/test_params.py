"""Params: precedence of the four levels, typed substitution, escapes, unresolved params."""

from __future__ import annotations

from pathlib import Path

import pytest

from vally.errors import ConfigError, ParamError
from vally.models.project import ProjectConfig
from vally.specs.loading import load_eval_file, load_project
from vally.specs.params import eval_param_files

SPEC = """\
defaults:
  runs: ${RUNS=1}
  model: ${MODEL=inline-model}
stimuli:
  - name: s
    prompt: "Use ${A=inline-a}, ${B=inline-b}, ${C=inline-c} and ${D=inline-d}."
"""


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_precedence_of_all_four_levels(tmp_path: Path) -> None:
    _write(tmp_path / ".vally.yaml", "params: { A: project-a, B: project-b, C: project-c }\n")
    spec = _write(tmp_path / "evals" / "x" / "eval.yaml", SPEC)
    _write(spec.parent / "params.yaml", "A: file-a\nB: file-b\n")
    loaded = load_eval_file(spec, cli_params={"A": "cli-a"})
    assert loaded.spec.stimuli[0].prompt == "Use cli-a, file-b, project-c and inline-d."


def test_named_param_file_beats_folder_param_file_beats_spec_params(tmp_path: Path) -> None:
    spec_params = "params: { A: spec-a, B: spec-b, C: spec-c }\n"
    spec = _write(tmp_path / "auth.eval.yaml", SPEC + spec_params)
    _write(tmp_path / "params.yaml", "A: folder-a\nB: folder-b\n")
    _write(tmp_path / "auth.eval.params.yaml", "A: named-a\n")
    assert eval_param_files(spec) == [tmp_path / "auth.eval.params.yaml", tmp_path / "params.yaml"]
    loaded = load_eval_file(spec, project=ProjectConfig(params={"C": "project-c", "D": "p-d"}))
    assert loaded.spec.stimuli[0].prompt == "Use named-a, folder-b, spec-c and p-d."


def test_whole_scalar_param_takes_yaml_type(tmp_path: Path) -> None:
    spec = _write(tmp_path / "eval.yaml", SPEC)
    loaded = load_eval_file(spec, cli_params={"RUNS": "5"}, project=ProjectConfig())
    assert loaded.spec.defaults.runs == 5
    assert loaded.raw["defaults"]["runs"] == 5
    default = load_eval_file(spec, project=ProjectConfig())
    assert default.raw["defaults"]["runs"] == 1


def test_quoted_param_stays_a_string(tmp_path: Path) -> None:
    spec = _write(
        tmp_path / "eval.yaml",
        'version: "${V=2}"\ndescription: ${V=2}\nstimuli: [{name: s, prompt: p}]\n',
    )
    loaded = load_eval_file(spec, project=ProjectConfig())
    assert loaded.raw["version"] == "2"
    assert loaded.raw["description"] == 2  # plain scalar: typed
    assert loaded.spec.version == "2"


def test_typed_value_is_validated(tmp_path: Path) -> None:
    spec = _write(tmp_path / "eval.yaml", SPEC)
    with pytest.raises(Exception) as info:
        load_eval_file(spec, cli_params={"RUNS": "many"}, project=ProjectConfig())
    assert "defaults.runs" in str(info.value)
    assert f"{spec}:2:9" in str(info.value)


def test_escape_keeps_literal(tmp_path: Path) -> None:
    spec = _write(
        tmp_path / "eval.yaml",
        "environment:\n  commands: ['echo $${HOME} ${X=1}']\n"
        "stimuli: [{name: s, prompt: '$${NOT_A_PARAM}'}]\n",
    )
    loaded = load_eval_file(spec, project=ProjectConfig())
    assert loaded.spec.stimuli[0].prompt == "${NOT_A_PARAM}"
    env = loaded.spec.environment
    assert env is not None and not isinstance(env, str)
    assert env.commands == ["echo ${HOME} 1"]


def test_unresolved_param_names_param_file_and_line(tmp_path: Path) -> None:
    spec = _write(
        tmp_path / "eval.yaml",
        "stimuli:\n  - name: s\n    prompt: Deploy to ${REGION} now\n",
    )
    with pytest.raises(ParamError) as info:
        load_eval_file(spec, project=ProjectConfig())
    text = str(info.value)
    assert "'REGION'" in text
    assert f"{spec}:3:13" in text
    assert "--param REGION=" in text


def test_params_resolve_in_project_file(tmp_path: Path) -> None:
    path = _write(
        tmp_path / ".vally.yaml",
        "params: { DIR: suites }\npaths:\n  evals: ['${DIR}/', '${EXTRA=more}/']\n",
    )
    assert load_project(path).paths.evals == ["suites/", "more/"]
    assert load_project(path, {"DIR": "cli"}).paths.evals == ["cli/", "more/"]


def test_environment_name_from_param(tmp_path: Path) -> None:
    _write(
        tmp_path / ".vally.yaml",
        "environments:\n  linux: { commands: [uname] }\n  mac: { commands: [sw_vers] }\n",
    )
    spec = _write(
        tmp_path / "eval.yaml",
        "environment: ${ENVIRONMENT=linux}\nstimuli: [{name: s, prompt: p}]\n",
    )
    env = load_eval_file(spec).spec.environment
    assert env is not None and not isinstance(env, str) and env.commands == ["uname"]
    env = load_eval_file(spec, cli_params={"ENVIRONMENT": "mac"}).spec.environment
    assert env is not None and not isinstance(env, str) and env.commands == ["sw_vers"]


def test_unresolved_param_in_block_prompt_points_at_its_line(tmp_path: Path) -> None:
    spec = _write(
        tmp_path / "eval.yaml",
        "stimuli:\n  - name: s\n    prompt: |\n      First line.\n      Use ${TOOL} here.\n",
    )
    with pytest.raises(ParamError) as info:
        load_eval_file(spec, project=ProjectConfig())
    assert info.value.location is not None
    assert info.value.location.line == 5
    resolved = load_eval_file(spec, cli_params={"TOOL": "grep"}, project=ProjectConfig())
    assert resolved.spec.stimuli[0].prompt == "First line.\nUse grep here.\n"


def test_an_eval_named_params_yaml_is_refused_with_the_reason(tmp_path: Path) -> None:
    spec = _write(tmp_path / "eval.yaml", SPEC)
    _write(tmp_path / "params.yaml", "stimuli:\n  - {name: t, prompt: hi}\n")
    with pytest.raises(ConfigError) as info:
        load_eval_file(spec)
    text = info.value.render()
    assert "params.yaml is read as a param file" in text and "has 'stimuli'" in text
    assert "rename it (e.g. params.eval.yaml)" in text
