"""Tests of the prompt-set exporter (public vally API only)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from vally_prompt_set_exporter import PromptSetConfig, PromptSetExporter

from vally import EvalSpec, LoadedEval

SPEC = {
    "name": "math",
    "tags": {"area": "arithmetic"},
    "stimuli": [
        {"name": "add", "prompt": "What is 2 + 3?", "tags": {"level": "1"}},
        {"name": "chat", "turns": [{"prompt": "Hi"}, {"prompt": "And 4 * 4?"}]},
    ],
}


def _loaded(tmp_path: Path) -> LoadedEval:
    return LoadedEval(spec=EvalSpec.model_validate(SPEC), source=tmp_path / "eval.yaml")


def test_one_line_per_stimulus_with_its_prompts_and_tags(tmp_path: Path) -> None:
    (path,) = PromptSetExporter().export(_loaded(tmp_path), tmp_path)
    assert path == tmp_path / "math.jsonl"
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert lines == [
        {
            "name": "add",
            "prompts": ["What is 2 + 3?"],
            "tags": {"area": "arithmetic", "level": "1"},
        },
        {"name": "chat", "prompts": ["Hi", "And 4 * 4?"], "tags": {"area": "arithmetic"}},
    ]


def test_config_names_the_file_and_drops_tags(tmp_path: Path) -> None:
    exporter = PromptSetExporter(
        PromptSetConfig.model_validate({"file": "p.jsonl", "tags": "false"})
    )
    (path,) = exporter.export(_loaded(tmp_path), tmp_path)
    assert path.name == "p.jsonl"
    assert "tags" not in json.loads(path.read_text(encoding="utf-8").splitlines()[0])


def test_a_file_outside_the_output_folder_is_refused() -> None:
    with pytest.raises(ValueError, match="plain file name"):
        PromptSetConfig.model_validate({"file": "../escape.jsonl"})
