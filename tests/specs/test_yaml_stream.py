"""A spec's stimuli are loaded one at a time: the same data and positions as composing the
whole document, the same errors, and a loading peak that does not hold every stimulus's
YAML nodes."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from vally.errors import ConfigError
from vally.specs import yamlio
from vally.specs.loading import load_eval_file, load_eval_with_positions
from vally.specs.params import ParamLayer, ParamResolver
from vally.specs.yaml_stream import streamed_document

DOCUMENT = """\
name: streamed
defaults:
  executor: {name: mock, config: {output: 'done: {prompt}'}}
stimuli:
  - name: s1
    prompt: |
      first line
      second ${WHO}
    graders: [{type: output-contains, config: {substring: done}}]
  - {name: s2, prompt: "task 2", tags: {area: a}}
  - name: s3
    turns:
      - one
      - "${COUNT=2}"
    timeout: ${COUNT=3}
params:
  WHO: you
"""


def _hook(root: object) -> yamlio.ScalarHook:
    layers = [ParamLayer("spec params", {"WHO": "you"})]
    return ParamResolver(layers).scalar_hook("streamed.yaml")


def test_streamed_loading_gives_the_data_and_positions_of_the_whole_document() -> None:
    path = Path("streamed.yaml")
    whole = yamlio.load_yaml(path, text=DOCUMENT, scalar_hook=_hook(None))
    streamed = streamed_document(DOCUMENT, path, _hook)
    assert streamed is not None
    assert streamed.data == whole.data
    assert streamed.data["stimuli"][0]["prompt"] == "first line\nsecond you\n"
    assert streamed.data["stimuli"][2]["timeout"] == 3  # a whole param keeps its YAML type
    for where in [("stimuli", 2, "turns", 1), ("stimuli", 1, "tags", "area"), ("name",)]:
        assert streamed.positions.location(where) == whole.positions.location(where)
    assert streamed.positions.table == whole.positions.table


@pytest.mark.parametrize(
    "text",
    [
        "stimuli: &s [{name: a, prompt: x}]\nother: *s\n",  # anchors: not streamed
        "stimuli:\n  - {name: a, name: b}\n",  # a duplicate key: the usual path reports it
        "stimuli:\n  - {name: a, prompt: [unclosed\n",  # invalid YAML
        "- one\n- two\n",  # not a mapping
    ],
)
def test_what_cannot_be_streamed_is_left_to_the_usual_path(text: str) -> None:
    assert streamed_document(text, Path("x.yaml"), lambda root: None) is None


def test_errors_in_a_stimulus_point_where_they_did(tmp_path: Path) -> None:
    spec = tmp_path / "eval.yaml"
    spec.write_text(
        "name: e\nstimuli:\n  - {name: a, prompt: x}\n  - name: b\n    prompt: y\n"
        "    timeout: soon\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as raised:
        load_eval_file(spec)
    assert f"{spec}:6:" in raised.value.render()
    spec.write_text("name: e\nstimuli:\n  - {name: a, prompt: x, prompt: z}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="duplicate key 'prompt'"):
        load_eval_file(spec)


def test_positions_inside_stimuli_are_built_on_demand(tmp_path: Path) -> None:
    spec = tmp_path / "eval.yaml"
    spec.write_text(
        "name: e\nstimuli:\n  - {name: a, prompt: x}\n  - name: b\n    prompt: ${P=y}\n"
        "    tags: {area: a}\n",
        encoding="utf-8",
    )
    _, positions = load_eval_with_positions(spec)
    assert positions.location(("stimuli", 1, "tags", "area")).line == 6
    assert positions.location(("stimuli", 1, "prompt"), key=True).column == 5
    assert positions.location(("stimuli", 0, "prompt")).column == 23


def _load_peak(folder: Path, stimuli: int) -> int:
    spec = folder / f"eval-{stimuli}.yaml"
    items = "\n".join(
        f"  - {{name: s{i}, prompt: 'task {i}', "
        "graders: [{type: output-contains, config: {substring: task}}]}"
        for i in range(stimuli)
    )
    spec.write_text(f"name: m\nstimuli:\n{items}\n", encoding="utf-8")
    tracemalloc.start()
    try:
        loaded = load_eval_file(spec)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(loaded.spec.stimuli) == stimuli
    return peak


def test_loading_does_not_hold_every_stimulus_node_at_once(tmp_path: Path) -> None:
    small, large = _load_peak(tmp_path, 500), _load_peak(tmp_path, 2_500)
    # Composing the whole tree peaked about 8 KB a stimulus (nodes, their marks, every
    # node's position, the data and the validated spec at once); now about 3 KB.
    assert (large - small) / 2_000 < 4_500, (small, large)
