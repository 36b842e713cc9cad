"""Every built-in grader declared in pyproject.toml loads by name and honours the contract."""

from __future__ import annotations

import importlib.metadata

import pytest

from vally.contracts.bases import StrictConfig
from vally.plugins.validation import validate_plugin_class

EXPECTED = {
    # name: (cost, determinism, portability, needs_workspace)
    "completed": ("free", "static", "t1-universal", False),
    "error-count": ("free", "static", "t1-universal", False),
    "exit-success": ("free", "static", "t1-universal", False),
    "file-contains": ("low", "static", "t1-universal", True),
    "file-exists": ("low", "static", "t1-universal", True),
    "file-matches": ("low", "static", "t1-universal", True),
    "file-not-contains": ("low", "static", "t1-universal", True),
    "file-not-exists": ("low", "static", "t1-universal", True),
    "file-not-matches": ("low", "static", "t1-universal", True),
    "output-contains": ("low", "static", "t1-universal", False),
    "output-matches": ("free", "static", "t1-universal", False),
    "output-not-contains": ("low", "static", "t1-universal", False),
    "output-not-matches": ("free", "static", "t1-universal", False),
    "program": ("low", "static", "t3a-scenario", True),
    "run-command": ("low", "complex-static", "t2-domain", True),
    "skill-invocation": ("free", "static", "t1-universal", False),
    "token-budget": ("free", "static", "t1-universal", False),
    "tool-call-count": ("free", "static", "t1-universal", False),
    "tool-calls": ("low", "static", "t1-universal", False),
    "turn-count": ("free", "static", "t1-universal", False),
    "wall-time": ("free", "static", "t1-universal", False),
}


def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    eps = importlib.metadata.entry_points(group="vally.graders")
    return {ep.name: ep for ep in eps if ep.value.startswith("vally_builtin.graders.")}


def test_every_catalogue_grader_is_declared() -> None:
    assert set(EXPECTED) <= set(_entry_points())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_grader_contract(name: str) -> None:
    cls = _entry_points()[name].load()
    assert validate_plugin_class("grader", cls, expected_name=name, specifier=name) == name
    meta = cls.metadata
    cost, determinism, portability, workspace = EXPECTED[name]
    assert (meta.cost_profile, meta.determinism, meta.portability) == (
        cost,
        determinism,
        portability,
    )
    assert meta.needs_workspace is workspace
    assert not meta.needs_llm and not meta.pairwise
    assert meta.description
    assert issubclass(cls.Config, StrictConfig)
    assert cls.Config.model_config.get("extra") == "forbid"
