"""The plan is bounded (``VALLY_MAX_TRIALS``) and lazy: a million trials cost no memory
before they start, and the plan order, indexing and sharding stay what they were."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from tests.traced import traced_held
from vally.engine.planning.plan import PlanInput, PlannedTrials, PlanOptions
from vally.engine.planning.planner import build_plan
from vally.errors import ConfigError
from vally.models.project import ProjectConfig
from vally.specs.environments import resolve_environment
from vally.specs.loading import load_eval_file

from .conftest import write_spec

SPEC = """
name: many
defaults: {runs: 3, executor: mock}
stimuli:
  - {name: one, prompt: hi}
  - {name: two, prompt: there}
"""


def plan_for(tmp_path: Path, options: PlanOptions, text: str = SPEC):
    loaded = load_eval_file(write_spec(tmp_path, text), project=ProjectConfig())
    return build_plan(
        [PlanInput(loaded)],
        options,
        resolve_environment=lambda item, s: resolve_environment(item, s, ProjectConfig()),
    )


def test_a_million_planned_trials_take_no_memory_before_they_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VALLY_MAX_TRIALS", "1000000")
    loaded = load_eval_file(write_spec(tmp_path, SPEC), project=ProjectConfig())
    tracemalloc.start()
    try:
        plan = build_plan(
            [PlanInput(loaded)],
            PlanOptions(runs=250_000, models=["m1", "m2"]),
            resolve_environment=lambda item, s: resolve_environment(item, s, ProjectConfig()),
        )
        first = next(iter(plan.trials))
        last = plan.trials[-1]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(plan.trials) == 1_000_000
    assert (first.key.stimulus, first.key.model, first.key.trial) == ("one", "m1", 0)
    assert (last.key.stimulus, last.key.model, last.key.trial) == ("two", "m2", 249_999)
    assert peak < 5 * 1024 * 1024, f"planning took {peak / 1e6:.1f} MB"


def test_lazy_trials_match_the_plan_order_by_index_and_iteration(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, PlanOptions(models=["a", "b"], workspace_root=tmp_path / "ws"))
    trials = plan.trials
    assert isinstance(trials, PlannedTrials)
    listed = list(trials)
    assert [trials[i] for i in range(len(trials))] == listed
    assert trials[1:4] == listed[1:4] and trials[-2] == listed[-2]
    assert [t.key for t in listed] == plan.keys
    order = [(k.stimulus, k.model, k.trial) for k in plan.keys]
    assert order[:4] == [("one", "a", 0), ("one", "a", 1), ("one", "a", 2), ("one", "b", 0)]
    assert len(listed) == 12 and len({t.key for t in listed}) == 12
    # each trial keeps its own workspace folder
    assert len({t.keep_workspace for t in listed}) == 12
    with pytest.raises(IndexError):
        trials[12]


def test_a_plan_over_the_limit_is_refused_naming_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VALLY_MAX_TRIALS", "10")
    with pytest.raises(ConfigError) as caught:
        plan_for(tmp_path, PlanOptions(runs=4, models=["a", "b"]))
    text = caught.value.render()
    assert "the run would plan 16 trials, more than the limit of 10" in text
    assert "2 stimuli x 2 model(s) x runs 4" in text
    assert "VALLY_MAX_TRIALS" in text
    monkeypatch.setenv("VALLY_MAX_TRIALS", "16")
    assert len(plan_for(tmp_path, PlanOptions(runs=4, models=["a", "b"])).trials) == 16


def test_a_plan_holds_a_stimulus_in_under_280_bytes(tmp_path: Path) -> None:
    """A stimulus of one run holds one trial group in slots (what the stimulus has of its
    own; the settings its eval's groups share held once), its graders and fingerprint,
    and where the group starts in a packed array (about 240 bytes; 486 when each group
    held a whole first trial and its key, 612 before that with the trial's and the
    group's attribute dictionaries and an integer object for each start)."""
    stimuli = 3_000
    lines = "\n".join(
        f"  - {{name: s{i}, prompt: 'task {i}', "
        "graders: [{type: output-contains, config: {substring: task}}]}"
        for i in range(stimuli)
    )
    text = f"name: many\ndefaults: {{executor: mock}}\nstimuli:\n{lines}\n"
    loaded = load_eval_file(write_spec(tmp_path, text), project=ProjectConfig())
    environment = resolve_environment(loaded, loaded.spec.stimuli[0], ProjectConfig())
    plan, held = traced_held(
        lambda: build_plan(
            [PlanInput(loaded)], PlanOptions(), resolve_environment=lambda item, s: environment
        )
    )
    assert len(plan.trials) == stimuli
    assert held / stimuli < 280, f"{held / stimuli:.0f} bytes a stimulus"
