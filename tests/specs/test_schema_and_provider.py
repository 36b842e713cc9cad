"""``vally schema`` and the ``yaml`` eval provider."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vally.cli.app import app
from vally.errors import SchemaError
from vally.plugins.session import Session

runner = CliRunner()


@pytest.mark.parametrize(
    ("kind", "field"), [("eval", "stimuli"), ("experiment", "variants"), ("project", "suites")]
)
def test_schema_prints_json_schema(kind: str, field: str) -> None:
    result = runner.invoke(app, ["schema", kind])
    assert result.exit_code == 0, result.output
    schema = json.loads(result.stdout)
    assert field in schema["properties"]
    assert schema["additionalProperties"] is False


def test_schema_durations_are_strings() -> None:
    schema = json.loads(runner.invoke(app, ["schema", "eval"]).stdout)
    timeout = schema["$defs"]["EvalConfig"]["properties"]["timeout"]
    assert any(option.get("type") == "string" for option in timeout["anyOf"])


def test_schema_output_file(tmp_path: Path) -> None:
    out = tmp_path / "schemas" / "eval.schema.json"
    result = runner.invoke(app, ["schema", "eval", "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert "stimuli" in json.loads(out.read_text())["required"]


def test_schema_unknown_kind_is_a_usage_error() -> None:
    result = runner.invoke(app, ["schema", "evals"])
    assert result.exit_code == 2


def test_yaml_provider_through_session(tmp_path: Path) -> None:
    (tmp_path / ".vally.yaml").write_text("params: { WHO: project }\n")
    spec = tmp_path / "hello" / "eval.yaml"
    spec.parent.mkdir()
    spec.write_text("stimuli: [{name: a, prompt: 'hi ${WHO} ${X=x}'}]\n")
    session = Session()
    cls = session.plugin_class("eval_provider", "yaml")
    provider = session.create("eval_provider", "yaml")
    assert cls.metadata.kind == "eval_provider"
    (loaded,) = provider.load(spec, {"X": "cli"})
    assert loaded.spec.name == "hello"
    assert loaded.source == spec
    assert loaded.spec.stimuli[0].prompt == "hi project cli"
    spec.write_text("stimuli: [{name: a, promt: hi}]\n")
    with pytest.raises(SchemaError, match="did you mean 'prompt'"):
        provider.load(spec, {})
