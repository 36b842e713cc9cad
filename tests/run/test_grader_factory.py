"""A run's grader factory: one instance per distinct grader (type and config), and a
bounded memory of the entries it handed out, so a plan of many stimuli keeps it small."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from vally.engine.planning import plan as plan_module
from vally.engine.trials import components
from vally.models.spec import GraderConfig


class _Session:
    """Creates a fresh object per call and counts the calls."""

    def __init__(self) -> None:
        self.created: list[tuple[str, dict[str, Any]]] = []

    def create(self, kind: str, name: str, config: dict[str, Any], **_: Any) -> object:
        self.created.append((name, dict(config)))
        return object()


def _trials(count: int, *, distinct: int) -> list[Any]:
    """``count`` trials of one stimulus each, whose grader entries (each its own object)
    have ``distinct`` configs between them."""
    return [
        SimpleNamespace(
            stimulus=SimpleNamespace(name=f"s{i}"),
            loaded=None,
            graders=(
                GraderConfig.model_validate(
                    {"type": "output-contains", "config": {"substring": f"t{i % distinct}"}}
                ),
            ),
        )
        for i in range(count)
    ]


def _counted_refs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the grader references looked up from now on (each a canonical JSON)."""
    refs: list[str] = []
    made = plan_module.PluginRef.of

    def counted(name: str, config: Any) -> plan_module.PluginRef:
        refs.append(name)
        return made(name, config)

    monkeypatch.setattr(plan_module.PluginRef, "of", counted)
    return refs


def test_equal_grader_entries_share_one_instance_created_once() -> None:
    session = _Session()
    trials = _trials(10, distinct=3)
    create = components.build_grader_factory(session, trials)  # type: ignore[arg-type]
    assert len(session.created) == 3
    handed = [create(trial.graders[0]) for trial in trials]
    assert len({id(g) for g in handed}) == 3
    assert handed[0] is handed[3] is handed[6] and handed[1] is not handed[0]
    assert len(session.created) == 3  # no instance made after validation


def test_an_entry_not_validated_is_created_on_first_use() -> None:
    session = _Session()
    create = components.build_grader_factory(session, [], validate=False)  # type: ignore[arg-type]
    [trial] = _trials(1, distinct=1)
    first = create(trial.graders[0])
    assert create(trial.graders[0]) is first and len(session.created) == 1


def test_the_factory_remembers_only_the_most_recent_entries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    limit = components.KNOWN_GRADER_ENTRIES
    trials = _trials(limit * 3, distinct=5)
    create = components.build_grader_factory(_Session(), trials)  # type: ignore[arg-type]
    refs = _counted_refs(monkeypatch)
    latest, oldest = trials[-1].graders[0], trials[0].graders[0]
    create(latest)
    assert refs == []  # remembered: no canonical JSON
    found = create(oldest)
    assert refs == ["output-contains"]  # forgotten: looked up by its reference again
    assert found is create(trials[5].graders[0])  # the same config, the same instance


def test_an_entry_met_again_keeps_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stimulus's further trials hand the factory the same grader entry again: that
    forgets nothing else, however full the factory is."""
    limit = components.KNOWN_GRADER_ENTRIES
    trials = _trials(limit, distinct=5)
    again = [trials[-1]] * 3  # the runs of the last stimulus
    create = components.build_grader_factory(_Session(), [*trials, *again])  # type: ignore[arg-type]
    refs = _counted_refs(monkeypatch)
    create(trials[0].graders[0])
    assert refs == []  # the oldest entry is still remembered
