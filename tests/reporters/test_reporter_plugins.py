"""The built-in reporters are found through their entry points and satisfy the contract."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest

from vally.contracts.bases import BaseReporter

NAMES = ["console", "jsonl", "markdown", "junit", "otel"]


@pytest.mark.parametrize("name", NAMES)
def test_entry_point_loads(name: str) -> None:
    (ep,) = [ep for ep in entry_points(group="vally.reporters") if ep.name == name]
    cls = ep.load()
    assert issubclass(cls, BaseReporter)
    assert cls.metadata.name == name and cls.metadata.kind == "reporter"
    cls(cls.Config())  # default config is valid
    with pytest.raises(ValueError):
        cls.Config.model_validate({"no-such-option": True})
