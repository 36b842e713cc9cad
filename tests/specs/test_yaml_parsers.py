"""Spec files parse the same with libyaml's parser as with PyYAML's own: the same data and
the same position of every node (which lint and every spec error point at)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from vally.specs import yamlio

DOCUMENT = """\
name: parsers
defaults:
  executor: {name: mock, config: {output: 'done: {prompt}'}}
  timeout: 30s
base: &base {type: output-contains, config: {substring: done}}
stimuli:
  - name: s1
    prompt: |
      first line
      second line
    graders: [*base, {type: output-matches, config: {pattern: "d.ne"}}]
  - {name: s2, prompt: "task 2", tags: {area: [a, b]}}
  - name: s3
    turns:
      - one
      - "two"
"""


@pytest.mark.skipif(not hasattr(yaml, "CSafeLoader"), reason="PyYAML built without libyaml")
def test_libyaml_and_pure_python_give_the_same_data_and_positions() -> None:
    path = Path("parsers.eval.yaml")
    fast = yamlio.load_yaml(path, text=DOCUMENT)
    loader = yaml.SafeLoader(DOCUMENT)  # PyYAML's own parser and composer
    try:
        slow = yamlio.document_from_node(loader.get_single_node(), path)
    finally:
        loader.dispose()
    assert fast.data == slow.data
    assert fast.positions.table == slow.positions.table
    assert len(fast.positions.table) > 20


def test_a_document_nested_past_the_limit_is_refused_not_composed() -> None:
    with pytest.raises(yamlio.YamlLimitError, match="nested deeper than 100 levels"):
        yamlio.compose("[" * 100_000 + "]" * 100_000, "deep.yaml")


def test_a_syntax_error_is_placed_where_pure_python_parsing_places_it() -> None:
    text = "name: x\nstimuli:\n  - {name: a, prompt: [unclosed\n  - name: b\n"
    with pytest.raises(yamlio.YamlSyntaxError) as raised:
        yamlio.compose(text, "broken.yaml")
    loader = yaml.SafeLoader(text)
    try:
        with pytest.raises(yaml.MarkedYAMLError) as pure:
            loader.get_single_node()
    finally:
        loader.dispose()
    mark = pure.value.problem_mark
    assert mark is not None
    location = raised.value.location
    assert location is not None
    assert (location.line, location.column) == (mark.line + 1, mark.column + 1)
