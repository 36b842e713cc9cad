"""Loading eval, project and experiment files: errors point at file:line:column."""

from __future__ import annotations

from pathlib import Path

import pytest

from vally.errors import ConfigError, SchemaError, YamlSyntaxError
from vally.models.project import ProjectConfig
from vally.models.spec import EnvironmentConfig
from vally.specs.loading import find_project, load_eval_file, load_experiment_file, load_project
from vally.specs.schema_errors import SpecSchemaError

NO_PROJECT = ProjectConfig()


def _spec(tmp_path: Path, text: str, name: str = "eval.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_yaml_syntax_error_location(tmp_path: Path) -> None:
    path = _spec(tmp_path, "stimuli:\n  - name: a\n    prompt: [unclosed\n")
    with pytest.raises(YamlSyntaxError) as info:
        load_eval_file(path, project=NO_PROJECT)
    loc = info.value.location
    assert loc is not None and loc.file == str(path)
    assert (loc.line, loc.column) == (4, 1)
    assert "invalid YAML" in info.value.message


def test_tab_indentation_is_a_located_syntax_error(tmp_path: Path) -> None:
    path = _spec(tmp_path, "stimuli:\n\t- name: a\n")
    with pytest.raises(YamlSyntaxError) as info:
        load_eval_file(path, project=NO_PROJECT)
    assert str(info.value).startswith(f"{path}:2:1: invalid YAML")


def test_duplicate_key_is_an_error(tmp_path: Path) -> None:
    path = _spec(tmp_path, "stimuli: []\nname: a\nname: b\n")
    with pytest.raises(YamlSyntaxError) as info:
        load_eval_file(path, project=NO_PROJECT)
    assert str(info.value).startswith(f"{path}:3:1: duplicate key 'name' (first defined on line 2)")


def test_unknown_key_location_path_and_suggestion(tmp_path: Path) -> None:
    path = _spec(
        tmp_path,
        "stimuli:\n"
        "  - name: a\n"
        "    prompt: p\n"
        "  - name: b\n"
        "    prompt: p\n"
        "    graders:\n"
        "      - type: file-exists\n"
        "        confg: {path: x}\n",
    )
    with pytest.raises(SchemaError) as info:
        load_eval_file(path, project=NO_PROJECT)
    err = info.value
    assert err.location is not None
    assert (err.location.line, err.location.column) == (8, 9)
    assert err.message == (
        "unknown key 'confg' in stimuli[1].graders[0]; did you mean 'config'?"
    )


def test_unknown_key_in_stimulus(tmp_path: Path) -> None:
    path = _spec(tmp_path, "stimuli:\n  - name: a\n    prompt: p\n    graderz: []\n")
    with pytest.raises(SchemaError) as info:
        load_eval_file(path, project=NO_PROJECT)
    assert str(info.value).startswith(
        f"{path}:4:5: unknown key 'graderz' in stimuli[0]; did you mean 'graders'?"
    )


def test_wrong_type_location_and_field_path(tmp_path: Path) -> None:
    path = _spec(
        tmp_path,
        "stimuli:\n  - name: a\n    prompt: p\n    graders:\n      - type: x\n"
        "        config: [1, 2]\n",
    )
    with pytest.raises(SpecSchemaError) as info:
        load_eval_file(path, project=NO_PROJECT)
    (issue,) = info.value.issues
    assert issue.path == "stimuli[0].graders[0].config"
    assert (issue.location.line, issue.location.column) == (6, 17)
    assert "valid dictionary" in issue.message


def test_several_problems_are_all_reported(tmp_path: Path) -> None:
    path = _spec(
        tmp_path,
        "defaults:\n  runz: 2\nstimuli:\n  - name: a\n    promt: p\n",
    )
    with pytest.raises(SpecSchemaError) as info:
        load_eval_file(path, project=NO_PROJECT)
    messages = [i.message for i in info.value.issues]
    assert "unknown key 'runz' in defaults; did you mean 'runs'?" in messages
    assert "unknown key 'promt' in stimuli[0]; did you mean 'prompt'?" in messages
    assert "1 more problem" in str(info.value)


def test_bare_number_duration_error_keeps_location(tmp_path: Path) -> None:
    path = _spec(tmp_path, "defaults:\n  timeout: 120\nstimuli: [{name: a, prompt: p}]\n")
    with pytest.raises(SchemaError) as info:
        load_eval_file(path, project=NO_PROJECT)
    text = str(info.value)
    assert text.startswith(f"{path}:2:12: defaults.timeout: a duration needs a unit suffix")
    assert "'120s'" in text


def test_missing_stimuli_and_prompt_or_turns(tmp_path: Path) -> None:
    path = _spec(tmp_path, "name: x\n")
    with pytest.raises(SchemaError, match="required field 'stimuli' is missing"):
        load_eval_file(path, project=NO_PROJECT)
    path = _spec(tmp_path, "stimuli:\n  - name: a\n")
    with pytest.raises(SchemaError) as info:
        load_eval_file(path, project=NO_PROJECT)
    assert "needs exactly one of 'prompt' or 'turns'" in str(info.value)
    assert info.value.location is not None and info.value.location.line == 2


def test_empty_and_non_mapping_files(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match="empty"):
        load_eval_file(_spec(tmp_path, ""), project=NO_PROJECT)
    with pytest.raises(SchemaError, match="must be a YAML mapping"):
        load_eval_file(_spec(tmp_path, "- a\n- b\n"), project=NO_PROJECT)
    with pytest.raises(ConfigError, match="file not found"):
        load_eval_file(tmp_path / "nope.yaml", project=NO_PROJECT)


@pytest.mark.parametrize(
    ("config_key", "env_key"),
    [("config", "environment"), ("defaults", "agent_environment")],
)
def test_both_spellings(tmp_path: Path, config_key: str, env_key: str) -> None:
    path = _spec(
        tmp_path,
        f"{config_key}: {{runs: 2, timeout: 5m}}\n"
        f"{env_key}: {{commands: [ls]}}\n"
        f"stimuli:\n  - name: a\n    prompt: p\n    {env_key}: {{commands: [pwd]}}\n",
    )
    loaded = load_eval_file(path, project=NO_PROJECT)
    assert loaded.spec.defaults.runs == 2
    assert loaded.spec.defaults.timeout == 300
    assert isinstance(loaded.spec.environment, EnvironmentConfig)
    assert loaded.spec.environment.commands == ["ls"]
    stim_env = loaded.spec.stimuli[0].environment
    assert stim_env is not None and stim_env.commands == ["pwd"]
    # raw uses the newer spellings
    assert loaded.raw["defaults"] == {"runs": 2, "timeout": "5m"}
    assert loaded.raw["environment"] == {"commands": ["ls"]}
    assert loaded.raw["stimuli"][0]["environment"] == {"commands": ["pwd"]}


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("config: {runs: 1}\ndefaults: {runs: 2}\nstimuli: [{name: a, prompt: p}]\n", 1),
        (
            "environment: {}\nagent_environment: {}\nstimuli: [{name: a, prompt: p}]\n",
            2,
        ),
        (
            "stimuli:\n  - name: a\n    prompt: p\n    environment: {}\n"
            "    agent_environment: {}\n",
            5,
        ),
    ],
)
def test_both_spellings_at_once_is_an_error(tmp_path: Path, text: str, line: int) -> None:
    with pytest.raises(SchemaError) as info:
        load_eval_file(_spec(tmp_path, text), project=NO_PROJECT)
    assert "two names for one field" in str(info.value)
    assert info.value.location is not None and info.value.location.line == line


def test_default_names(tmp_path: Path) -> None:
    folder = tmp_path / "auth-flow"
    folder.mkdir()
    body = "stimuli: [{name: a, prompt: p}]\n"
    assert load_eval_file(_spec(folder, body), project=NO_PROJECT).spec.name == "auth-flow"
    assert load_eval_file(_spec(folder, body, "eval.yml"), project=NO_PROJECT).spec.name == (
        "auth-flow"
    )
    named = load_eval_file(_spec(folder, body, "login.eval.yaml"), project=NO_PROJECT)
    assert named.spec.name == "login"
    assert named.raw["name"] == "login"
    assert load_eval_file(_spec(folder, body, "smoke.yaml"), project=NO_PROJECT).spec.name == (
        "smoke"
    )
    explicit = load_eval_file(_spec(folder, "name: mine\n" + body), project=NO_PROJECT)
    assert explicit.spec.name == "mine"


def test_named_environment(tmp_path: Path) -> None:
    (tmp_path / ".vally.yaml").write_text(
        "environments:\n  linux:\n    skills: [skills/a]\n    files: [{src: data/x.txt}]\n"
    )
    sub = tmp_path / "evals" / "e"
    sub.mkdir(parents=True)
    path = _spec(sub, "environment: linux\nstimuli: [{name: a, prompt: p}]\n")
    loaded = load_eval_file(path)
    env = loaded.spec.environment
    assert isinstance(env, EnvironmentConfig)
    # paths of a named environment are relative to .vally.yaml
    assert env.skills == [str(tmp_path / "skills" / "a")]
    assert env.files[0].src == str(tmp_path / "data" / "x.txt")
    assert env.files[0].dest == "x.txt"
    assert loaded.raw["environment"]["skills"] == [str(tmp_path / "skills" / "a")]


def test_unknown_named_environment_lists_known(tmp_path: Path) -> None:
    project = ProjectConfig.model_validate({"environments": {"linux": {}, "windows": {}}})
    path = _spec(tmp_path, "stimuli: [{name: a, prompt: p}]\nenvironment: linx\n")
    with pytest.raises(ConfigError) as info:
        load_eval_file(path, project=project)
    text = str(info.value)
    assert f"{path}:2:14: unknown environment 'linx'" in text
    assert "linux, windows" in text
    assert "did you mean 'linux'?" in text
    with pytest.raises(ConfigError, match="no environments are defined"):
        load_eval_file(path, project=NO_PROJECT)


def test_find_project_walks_up(tmp_path: Path) -> None:
    (tmp_path / ".vally.yaml").write_text("paths: {evals: suites}\n")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    project, root = find_project(deep)
    assert root == tmp_path
    assert project.paths.evals == ["suites"]
    none_project, none_root = find_project(Path("/"))
    assert none_root is None
    assert none_project == ProjectConfig()


def test_project_schema_error(tmp_path: Path) -> None:
    path = tmp_path / ".vally.yaml"
    path.write_text("paths:\n  eval: [x]\n")
    with pytest.raises(SchemaError) as info:
        load_project(path)
    assert str(info.value).startswith(
        f"{path}:2:3: unknown key 'eval' in paths; did you mean 'evals'?"
    )
    path.write_text("")
    assert load_project(path) == ProjectConfig()


EXPERIMENT = """\
name: models
evals: [evals/*/eval.yaml]
vary: [/defaults/model]
baseline: a
variants:
  a: { overrides: { model: "${MODEL_A=gpt-a}" } }
  b: { overrides: { model: gpt-b } }
"""


def test_experiment_file(tmp_path: Path) -> None:
    path = _spec(tmp_path, EXPERIMENT, "exp.yaml")
    exp = load_experiment_file(path)
    assert exp.variants is not None
    assert exp.variants["a"].overrides == {"model": "gpt-a"}
    exp = load_experiment_file(path, cli_params={"MODEL_A": "other"})
    assert exp.variants is not None and exp.variants["a"].overrides == {"model": "other"}
    bad = _spec(tmp_path, EXPERIMENT.replace("baseline: a", "baseline: c"), "bad.yaml")
    with pytest.raises(SchemaError, match="baseline 'c' is not a variant"):
        load_experiment_file(bad)
    typo = _spec(tmp_path, EXPERIMENT.replace("variants:", "variant:"), "typo.yaml")
    with pytest.raises(SchemaError) as info:
        load_experiment_file(typo)
    assert "unknown top-level key 'variant'; did you mean 'variants'?" in str(info.value)
    assert f"{typo}:5:1" in str(info.value)


def test_union_branches_do_not_add_noise(tmp_path: Path) -> None:
    path = _spec(
        tmp_path,
        "environment:\n  mcpServers:\n    db: { comand: x }\nstimuli: [{name: a, prompt: p}]\n",
    )
    with pytest.raises(SpecSchemaError) as info:
        load_eval_file(path, project=NO_PROJECT)
    assert [(i.message, i.location.line) for i in info.value.issues] == [
        ("unknown key 'comand' in environment.mcpServers.db; did you mean 'command'?", 3)
    ]
    path = _spec(tmp_path, "environment: [a]\nstimuli: [{name: a, prompt: p}]\n")
    with pytest.raises(SpecSchemaError) as info:
        load_eval_file(path, project=NO_PROJECT)
    (issue,) = info.value.issues
    assert issue.path == "environment"
    assert "valid dictionary" in issue.message


def test_anchors_merge_keys_and_extension_keys(tmp_path: Path) -> None:
    path = _spec(
        tmp_path,
        "x-common: &common\n"
        "  graders:\n"
        "    - { type: completed }\n"
        "stimuli:\n"
        "  - { name: a, prompt: p, <<: *common }\n"
        "  - name: b\n"
        "    prompt: q\n"
        "    <<: *common\n",
    )
    loaded = load_eval_file(path, project=NO_PROJECT)
    assert [g.type for s in loaded.spec.stimuli for g in s.graders] == ["completed", "completed"]
    assert "x-common" not in loaded.raw


def test_param_in_flow_mapping_gets_a_quoting_hint(tmp_path: Path) -> None:
    path = _spec(tmp_path, "defaults: { model: ${MODEL=x} }\nstimuli: [{name: a, prompt: p}]\n")
    with pytest.raises(YamlSyntaxError) as info:
        load_eval_file(path, project=NO_PROJECT)
    assert info.value.location is not None and info.value.location.line == 1
    assert info.value.hint is not None and 'quote a value holding a param' in info.value.hint
