"""Fuzz the YAML loader: whatever an eval file holds, loading it gives a spec or a
:class:`~vally.errors.VallyError` (never another exception), and lint gives diagnostics."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import given, strategies as st

from vally.errors import VallyError
from vally.models.project import ProjectConfig
from vally.plugins.session import Session
from vally.specs.loading import load_eval_file, load_experiment_file
from vally_authoring.lint.catalogs import SessionGraderCatalog
from vally_authoring.lint.spec_checks import lint_eval_file

from . import FUZZ

KEYS = [
    "name", "description", "defaults", "runs", "executor", "config", "stimuli", "prompt",
    "turns", "graders", "type", "environment", "files", "src", "dest", "env", "tags",
    "params", "scoring", "weights", "threshold", "constraints", "max_turns", "timeout",
    "artifacts", "rubric", "<<", "evals", "variants", "vary", "baseline", "matrix",
]
"""Keys of eval and experiment files, so generated documents reach deep validation."""

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["mock", "command", "output-contains", "5m", "0s", "-1", "${X}", "${Y=3}",
                     "*", "..", "/abs", "a/b", "~", "!!python/object", "\t", "", " "]),
    st.text(max_size=30),
)

DOCUMENTS = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=8)), children,
                        max_size=6),
    ),
    max_leaves=40,
)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    """A YAML dump of a spec-like document, then edited by hand like a careless user would:
    characters inserted or removed, anchors and aliases spliced in, lines repeated."""
    text = yaml.safe_dump(draw(DOCUMENTS), allow_unicode=True, sort_keys=False)
    for _ in range(draw(st.integers(min_value=0, max_value=4))):
        position = draw(st.integers(min_value=0, max_value=len(text)))
        edit = draw(st.sampled_from(["insert", "delete", "anchor", "alias", "repeat"]))
        if edit == "insert":
            piece = draw(st.sampled_from([":", "-", "[", "{", "&", "*", "!", "|", ">", "'", '"',
                                          "#", "\t", "\n", " ", "? ", "%YAML 1.1\n", "---\n"]))
            text = text[:position] + piece + text[position:]
        elif edit == "delete":
            text = text[:position] + text[position + 1 :]
        elif edit == "anchor":
            text = text[:position] + "&a " + text[position:]
        elif edit == "alias":
            text = text[:position] + "*a" + text[position:]
        else:
            lines = text.splitlines(keepends=True)
            index = draw(st.integers(min_value=0, max_value=max(len(lines) - 1, 0)))
            text = "".join(lines[: index + 1] + lines[index:])
    return text


@st.composite
def hostile(draw: st.DrawFn) -> str:
    """Documents built to exhaust the loader: alias bombs, deep nesting, self-references."""
    kind = draw(st.sampled_from(["bomb", "deep-flow", "deep-block", "self", "merge"]))
    if kind == "bomb":
        width = draw(st.integers(min_value=2, max_value=12))
        levels = draw(st.integers(min_value=1, max_value=12))
        lines = [f"l0: &l0 [{', '.join(['x'] * width)}]"]
        for level in range(1, levels):
            lines.append(f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * width)}]")
        return "\n".join(lines) + "\nstimuli: [{name: s, prompt: hi}]\n"
    if kind == "deep-flow":
        depth = draw(st.integers(min_value=50, max_value=20_000))
        opener = draw(st.sampled_from(["[", "{a: "]))
        closer = "]" if opener == "[" else "}"
        return "x: " + opener * depth + "1" + closer * depth + "\n"
    if kind == "deep-block":
        depth = draw(st.integers(min_value=50, max_value=400))
        return "".join(" " * i + f"k{i}:\n" for i in range(depth)) + " " * depth + "v\n"
    if kind == "self":
        return "x: &a [1, {b: *a}]\nstimuli: [{name: s, prompt: hi}]\n"
    width = draw(st.integers(min_value=2, max_value=9))
    lines = ["m0: &m0 {k: v}"]
    for level in range(1, draw(st.integers(min_value=2, max_value=10))):
        merged = ", ".join(f"k{i}: *m{level - 1}" for i in range(width))
        lines.append(f"m{level}: &m{level} {{<<: *m{level - 1}, {merged}}}")
    return "\n".join(lines) + "\n"


YAML_TEXT = st.one_of(st.text(max_size=300), mutated(), hostile())


@pytest.fixture(scope="module")
def folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp)


@pytest.fixture(scope="module")
def catalog() -> SessionGraderCatalog:
    return SessionGraderCatalog(Session())


@FUZZ
@given(text=YAML_TEXT)
def test_loading_any_eval_file_gives_a_spec_or_a_vally_error(folder: Path, text: str) -> None:
    path = folder / "fuzz.eval.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        load_eval_file(path, project=ProjectConfig())
    except VallyError as exc:
        assert exc.render()  # a message for the user, never an empty one


@FUZZ
@given(text=YAML_TEXT)
def test_lint_reports_any_eval_file_as_diagnostics(
    folder: Path, catalog: SessionGraderCatalog, text: str
) -> None:
    path = folder / "lint.eval.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    diagnostics = lint_eval_file(path, catalog, project=ProjectConfig(), project_root=folder)
    assert all(d.message for d in diagnostics)


@FUZZ
@given(text=YAML_TEXT)
def test_loading_any_experiment_file_gives_one_or_a_vally_error(folder: Path, text: str) -> None:
    path = folder / "experiment.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        load_experiment_file(path)
    except VallyError as exc:
        assert exc.render()
