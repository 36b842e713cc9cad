"""Tests of the dataset eval provider (public vally API only)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from vally_jsonl_provider import DatasetEvalProvider

from vally import ConfigError
from vally.plugins.session import Session


def _write_jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_jsonl_rows_become_stimuli_with_expected_answers(tmp_path: Path) -> None:
    data = _write_jsonl(
        tmp_path / "math.jsonl",
        [
            {"name": "add", "prompt": "What is 2 + 3?", "expected": "5", "tags": {"level": "1"}},
            {"prompt": "Say hi"},
        ],
    )
    (loaded,) = DatasetEvalProvider().load(data, {})
    spec = loaded.spec
    assert spec.name == "math"
    assert [s.name for s in spec.stimuli] == ["add", "row-2"]
    grader = spec.stimuli[0].graders[0]
    assert grader.type == "output-contains"
    assert grader.config == {"substring": "5", "case_sensitive": False}
    assert spec.stimuli[0].tags == {"level": "1"}
    assert spec.stimuli[1].graders == []
    assert spec.defaults.executor is not None and spec.defaults.executor.name == "script"
    assert loaded.source == data.resolve()


def test_csv_with_renamed_columns_from_params(tmp_path: Path) -> None:
    data = tmp_path / "qa.csv"
    data.write_text("id,question,answer,tags\nq1,What is 1 + 1?,2,kind=sum;level=2\n")
    params = {
        "dataset.name_column": "id",
        "dataset.prompt_column": "question",
        "dataset.expected_column": "answer",
        "dataset.runs": "3",
        "dataset.command": "python3 {dataset_dir}/agent.py --fast",
        "dataset.files": "agent.py,fixtures/",
    }
    (loaded,) = DatasetEvalProvider().load(data, params)
    (stimulus,) = loaded.spec.stimuli
    assert stimulus.name == "q1"
    assert stimulus.prompt == "What is 1 + 1?"
    assert stimulus.tags == {"kind": "sum", "level": "2"}
    assert loaded.spec.defaults.runs == 3
    executor = loaded.spec.defaults.executor
    assert executor is not None
    assert executor.config["command"] == ["python3", f"{tmp_path.resolve()}/agent.py", "--fast"]
    environment = loaded.spec.environment
    assert environment is not None and not isinstance(environment, str)
    assert [f.src for f in environment.files] == ["agent.py", "fixtures/"]


def test_errors_name_the_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"name": "a", "prompt": "x"}\n{oops\n')
    with pytest.raises(ConfigError, match=r"bad.jsonl:2: not valid JSON"):
        DatasetEvalProvider().load(bad, {})
    missing = _write_jsonl(tmp_path / "missing.jsonl", [{"name": "a", "question": "x"}])
    with pytest.raises(ConfigError, match=r"missing.jsonl:1: no prompt in column 'prompt'"):
        DatasetEvalProvider().load(missing, {})
    twice = _write_jsonl(tmp_path / "twice.jsonl", [{"name": "a", "prompt": "x"}] * 2)
    with pytest.raises(ConfigError, match="appears twice"):
        DatasetEvalProvider().load(twice, {})
    with pytest.raises(ConfigError, match=r"expected \.jsonl or \.csv"):
        (tmp_path / "x.txt").write_text("a")
        DatasetEvalProvider().load(tmp_path / "x.txt", {})
    with pytest.raises(ConfigError, match="known fields"):
        DatasetEvalProvider().load(twice, {"dataset.colour": "red"})


def test_installed_entry_point_resolves_to_this_class() -> None:
    name = DatasetEvalProvider.metadata.name
    assert Session(environ={}).plugin_class("eval_provider", name) is DatasetEvalProvider
