"""The JSON Schema editors use: descriptions everywhere, plugin configs selected by
``type``/``name``, params where the loader takes them, and ``vally schema --write``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator, ValidationError
from typer.testing import CliRunner

from vally.cli.app import app
from vally_authoring.schema import SCHEMA_KINDS, PluginConfigs, json_schema

runner = CliRunner()


@pytest.fixture(scope="module")
def plugins() -> PluginConfigs:
    return PluginConfigs.from_project(Path(__file__).parent)


def _errors(schema: dict[str, Any], text: str) -> list[str]:
    """Every leaf error (inside anyOf branches too) as ``path: message``."""
    validator = Draft202012Validator(schema)

    def leaves(error: ValidationError) -> list[ValidationError]:
        return [leaf for sub in error.context for leaf in leaves(sub)] if error.context else [error]

    found = {
        f"{'/'.join(str(p) for p in leaf.absolute_path)}: {leaf.message}"
        for error in validator.iter_errors(yaml.safe_load(text))
        for leaf in leaves(error)
    }
    return sorted(e for e in found if "is not of type 'null'" not in e)


@pytest.mark.parametrize("kind", SCHEMA_KINDS)
def test_every_property_has_a_description(kind: str, plugins: PluginConfigs) -> None:
    schema = json_schema(kind, plugins)
    Draft202012Validator.check_schema(schema)
    bodies = {"(root)": schema, **schema["$defs"]}
    missing = [
        f"{where}.{name}"
        for where, body in bodies.items()
        for name, prop in body.get("properties", {}).items()
        if not prop.get("description") and not where.startswith(("grader.", "executor."))
    ]
    assert missing == []


def test_grader_config_is_checked_against_the_grader_named_by_type(
    plugins: PluginConfigs,
) -> None:
    schema = json_schema("eval", plugins)
    good = """
stimuli:
  - name: s
    prompt: p
    graders:
      - {type: output-contains, config: {substring: ok}}
      - {type: my-own-grader, config: {anything: 1}}
"""
    assert _errors(schema, good) == []
    typo = good.replace("substring: ok", "substrng: ok")
    errors = _errors(schema, typo)
    assert errors == [
        "stimuli/0/graders/0/config: 'substring' is a required property",
        "stimuli/0/graders/0/config: Additional properties are not allowed "
        "('substrng' was unexpected)",
    ]
    described = schema["$defs"]["grader.output-contains"]["properties"]["substring"]
    assert described["description"]
    assert "output-contains" in schema["$defs"]["GraderConfig"]["properties"]["type"]["examples"]


def test_executor_config_is_checked_against_the_executor_named(plugins: PluginConfigs) -> None:
    schema = json_schema("eval", plugins)
    spec = """
defaults:
  executor: {name: mock, config: {output: hi, delay: 50ms}}
stimuli: [{name: s, prompt: p}]
"""
    assert _errors(schema, spec) == []
    assert _errors(schema, "defaults: {executor: mock}\nstimuli: [{name: s, prompt: p}]\n") == []
    errors = _errors(schema, spec.replace("delay: 50ms", "dealy: 50ms"))
    typo = (
        "defaults/executor/config: Additional properties are not allowed "
        "('dealy' was unexpected)"
    )
    # the other branches (a plain name, nothing) fail too, on the executor itself
    assert typo in errors and all(e.startswith("defaults/executor") for e in errors)


def test_params_are_accepted_where_the_loader_takes_them(plugins: PluginConfigs) -> None:
    schema = json_schema("eval", plugins)
    spec = """
type: ${KIND=capability}
defaults:
  runs: ${RUNS}
  timeout: ${TIMEOUT=5m}
  model: "${MODEL}"
stimuli: [{name: s, prompt: "Deploy to ${REGION}"}]
"""
    assert _errors(schema, spec) == []
    errors = _errors(schema, spec.replace("${RUNS}", "lots"))
    assert len(errors) == 2 and all(e.startswith("defaults/runs: 'lots'") for e in errors)
    assert "is not of type 'integer'" in errors[1]


def test_project_plugin_config_is_checked_per_reporter(plugins: PluginConfigs) -> None:
    schema = json_schema("project", plugins)
    project = "plugin_config: {reporter: {console: {heartbeat: 10s}}}\n"
    assert _errors(schema, project) == []
    errors = _errors(schema, project.replace("heartbeat", "heartbeet"))
    assert errors == [
        "plugin_config/reporter/console: Additional properties are not allowed "
        "('heartbeet' was unexpected)"
    ]


def test_write_puts_every_schema_in_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".vally.yaml").write_text("paths: {evals: [evals]}\n", encoding="utf-8")
    (tmp_path / "evals").mkdir()
    monkeypatch.chdir(tmp_path / "evals")
    result = runner.invoke(app, ["schema", "--write"])
    assert result.exit_code == 0, result.output
    folder = tmp_path / ".vally" / "schemas"
    assert sorted(p.name for p in folder.iterdir()) == [
        "eval.schema.json",
        "experiment.schema.json",
        "project.schema.json",
        "promotion.schema.json",
    ]
    eval_schema = json.loads((folder / "eval.schema.json").read_text())
    assert eval_schema["title"] == "vally eval spec (eval.yaml)"
    assert "grader.file-exists" in eval_schema["$defs"]
    assert "# yaml-language-server: $schema=" in result.output
    assert "eval.schema.json" in result.output


def test_kind_is_needed_without_write() -> None:
    result = runner.invoke(app, ["schema"])
    assert result.exit_code == 2
    assert "--write" in result.output


PROJECT_PLUGINS = """\
from collections.abc import Callable

from vally import BaseGrader, GraderMetadata, StrictConfig


class WordsConfig(StrictConfig):
    minimum: int = 1


class Words(BaseGrader[WordsConfig]):
    metadata = GraderMetadata(name="words", description="Counts words.")

    async def grade(self, context):
        return self.result(context, passed=True)


class OddConfig(StrictConfig):
    hook: Callable[[], int] | None = None


class Odd(BaseGrader[OddConfig]):
    metadata = GraderMetadata(name="odd", description="A config no schema can describe.")

    async def grade(self, context):
        return self.result(context, passed=True)


def register(registrar):
    registrar.grader(Words)
    registrar.grader(Odd)
"""


def test_project_plugins_are_described_and_undescribable_ones_left_free(tmp_path: Path) -> None:
    (tmp_path / ".vally.yaml").write_text("plugins: {grader: [graders.py]}\n", encoding="utf-8")
    (tmp_path / "graders.py").write_text(PROJECT_PLUGINS, encoding="utf-8")
    configs = PluginConfigs.from_project(tmp_path)
    assert "words" in configs.by_kind["grader"] and "odd" not in configs.by_kind["grader"]
    schema = json_schema("eval", configs)
    spec = "stimuli:\n  - {name: s, prompt: p, graders: [{type: words, config: {minimum: 2}}]}\n"
    assert _errors(schema, spec) == []
    assert _errors(schema, spec.replace("minimum", "minimun")) == [
        "stimuli/0/graders/0/config: Additional properties are not allowed "
        "('minimun' was unexpected)"
    ]
    odd = spec.replace("type: words, config: {minimum: 2}", "type: odd, config: {hook: 1}")
    assert _errors(schema, odd) == []
