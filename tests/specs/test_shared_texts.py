"""A spec's repeated short texts are held once: its keys, grader types and config values
repeat in every stimulus."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from vally.specs.loading import load_eval_file
from vally.specs.yamlio import SHARED_TEXT_CHARS, load_yaml


def _spec(tmp_path: Path, anchors: bool) -> Path:
    long = "x" * (SHARED_TEXT_CHARS + 1)
    lines = "\n".join(
        f"  - {{name: s{i}, prompt: '{long}', tags: {{area: 'auth'}}, "
        "graders: [{type: output-contains, config: {substring: task}}]}"
        for i in range(40)
    )
    path = tmp_path / "eval.yaml"
    anchor = "defaults: &base {runs: 1}\nconfig2: *base\n" if anchors else ""
    path.write_text(f"name: ev\n{anchor}stimuli:\n{lines}\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("anchors", [False, True], ids=["streamed", "whole"])
def test_repeated_short_texts_are_one_object_and_the_data_is_the_same(
    tmp_path: Path, anchors: bool
) -> None:
    path = _spec(tmp_path, anchors)
    data = load_yaml(path).data
    assert data == yaml.safe_load(path.read_text(encoding="utf-8"))
    graders = [item["graders"][0] for item in data["stimuli"]]
    assert len({id(g["type"]) for g in graders}) == 1
    assert len({id(g["config"]["substring"]) for g in graders}) == 1
    assert len({id(key) for item in data["stimuli"] for key in item if key == "tags"}) == 1
    # longer texts are held as they come (prompts are seldom repeated)
    assert len({id(item["prompt"]) for item in data["stimuli"]}) == len(data["stimuli"])


def test_a_loaded_spec_shares_its_stimuli_s_repeated_texts(tmp_path: Path) -> None:
    spec = load_eval_file(_spec(tmp_path, anchors=False)).spec
    types = {id(s.graders[0].type) for s in spec.stimuli}
    values = {id(s.graders[0].config["substring"]) for s in spec.stimuli}
    assert (len(types), len(values)) == (1, 1)
