"""The planner: fan-out order, overrides, graders, constraints, timeouts, filters."""

from __future__ import annotations

from pathlib import Path

import pytest

from vally.engine.planning.plan import DEFAULT_TIMEOUT, PlanInput, PlanOptions
from vally.engine.planning.planner import build_plan, merge_constraints, parse_models
from vally.engine.records.run_folder import name_folder
from vally.errors import ConfigError
from vally.models.project import ProjectConfig
from vally.specs.environments import resolve_environment
from vally.specs.loading import load_eval_file

from .conftest import write_spec

SPEC = """
name: plan-me
tags: {area: auth}
defaults:
  runs: 2
  timeout: 30s
  model: spec-model
  executor: mock
constraints: {max_turns: 5, expect_tools: [read]}
graders:
  - {type: completed}
stimuli:
  - name: one
    prompt: hi
    tags: {priority: p0}
    constraints: {max_turns: 3, expect_tools: [write]}
    graders:
      - {type: output-contains, config: {substring: hi}}
  - name: two
    prompt: there
    tags: {priority: p1}
"""


def plan_for(tmp_path: Path, options: PlanOptions, text: str = SPEC):
    loaded = load_eval_file(write_spec(tmp_path, text), project=ProjectConfig())
    return build_plan(
        [PlanInput(loaded)],
        options,
        resolve_environment=lambda item, s: resolve_environment(item, s, ProjectConfig()),
    )


def test_trials_in_plan_order_with_spec_defaults(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, PlanOptions())
    keys = [(k.variant, k.eval_name, k.stimulus, k.model, k.trial) for k in plan.keys]
    assert keys == [
        ("", "plan-me", "one", "spec-model", 0),
        ("", "plan-me", "one", "spec-model", 1),
        ("", "plan-me", "two", "spec-model", 0),
        ("", "plan-me", "two", "spec-model", 1),
    ]
    first = plan.trials[0]
    assert first.timeout == 30.0
    assert first.model == "spec-model"
    assert [g.type for g in first.graders] == ["completed", "output-contains"]
    assert [g.type for g in plan.trials[2].graders] == ["completed"]
    assert first.constraints.max_turns == 3
    assert first.constraints.expect_tools == ["read", "write"]
    assert plan.trials[2].constraints.max_turns == 5
    assert first.tags == {"area": "auth", "priority": "p0"}


def test_model_fan_out_runs_and_timeout_flags_win(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, PlanOptions(models=["a", "b"], runs=1, timeout=7.0))
    assert [(k.stimulus, k.model, k.trial) for k in plan.keys] == [
        ("one", "a", 0),
        ("one", "b", 0),
        ("two", "a", 0),
        ("two", "b", 0),
    ]
    assert {t.timeout for t in plan.trials} == {7.0}
    assert plan.evals[0].models == ("a", "b")


def test_no_model_anywhere_is_labelled_default(tmp_path: Path) -> None:
    text = SPEC.replace("  model: spec-model\n", "").replace("  timeout: 30s\n", "")
    plan = plan_for(tmp_path, PlanOptions(runs=1))
    plan = plan_for(tmp_path, PlanOptions(runs=1), text)
    assert {k.model for k in plan.keys} == {"default"}
    assert {t.model for t in plan.trials} == {None}
    assert {t.timeout for t in plan.trials} == {DEFAULT_TIMEOUT}


def test_runs_zero_is_lint_only(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, PlanOptions(runs=0))
    assert plan.lint_only
    assert plan.evals[0].runs == 0


def test_tag_filter_selects_stimuli(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, PlanOptions(runs=1, tag_filter={"priority": ["p1"]}))
    assert [k.stimulus for k in plan.keys] == ["two"]
    plan = plan_for(tmp_path, PlanOptions(runs=1, tag_filter={"priority": ["p0", "p1"]}))
    assert [k.stimulus for k in plan.keys] == ["one", "two"]


def test_threshold_flag_overrides_spec(tmp_path: Path) -> None:
    text = SPEC + "scoring: {threshold: 0.5}\n"
    assert {t.threshold for t in plan_for(tmp_path, PlanOptions(), text).trials} == {0.5}
    plan = plan_for(tmp_path, PlanOptions(threshold=0.9), text)
    assert {t.threshold for t in plan.trials} == {0.9}


def test_missing_executor_is_a_plan_error(tmp_path: Path) -> None:
    text = SPEC.replace("  executor: mock\n", "")
    with pytest.raises(ConfigError, match=r"defaults\.executor"):
        plan_for(tmp_path, PlanOptions(), text)


def test_workspace_paths_are_keyed_by_stimulus_and_trial(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, PlanOptions(workspace_root=tmp_path / "ws"))
    assert [t.keep_workspace for t in plan.trials] == [
        tmp_path / "ws" / name_folder("one") / "trial-0",
        tmp_path / "ws" / name_folder("one") / "trial-1",
        tmp_path / "ws" / name_folder("two") / "trial-0",
        tmp_path / "ws" / name_folder("two") / "trial-1",
    ]
    plan = plan_for(tmp_path, PlanOptions(runs=1, models=["a", "b"], workspace_root=tmp_path))
    folder = tmp_path / name_folder("one") / name_folder("b")
    assert plan.trials[1].keep_workspace == folder / "trial-0"


def test_extra_skills_reach_every_trial(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, PlanOptions(runs=1, extra_skills=["/skills/a"]))
    assert all(t.environment.skills == ["/skills/a"] for t in plan.trials)


def test_parse_models() -> None:
    assert parse_models(None) is None
    assert parse_models(" a , b ") == ["a", "b"]
    with pytest.raises(ConfigError):
        parse_models("a,,b")
    with pytest.raises(ConfigError):
        parse_models("a,a")


def test_merge_constraints_without_either_side() -> None:
    assert merge_constraints(None, None).is_empty()


def test_judge_settings_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVAL_JUDGE_MODEL", "env-judge")
    text = SPEC.replace("  executor: mock\n", "  executor: mock\n  judge_timeout: 30s\n")
    plan = plan_for(tmp_path, PlanOptions(runs=1), text)
    assert plan.trials[0].judge.model == "env-judge"
    assert plan.trials[0].judge.timeout == 30.0
    spec_judge = text.replace("  executor: mock\n", "  executor: mock\n  judge_model: spec-j\n")
    assert plan_for(tmp_path, PlanOptions(runs=1), spec_judge).trials[0].judge.model == "spec-j"
    flagged = plan_for(tmp_path, PlanOptions(runs=1, judge_model="cli-j"), spec_judge)
    assert flagged.trials[0].judge.model == "cli-j"


def test_stimuli_without_graders_tags_or_constraints_of_their_own_share_the_eval_s(
    tmp_path: Path,
) -> None:
    text = SPEC + "  - {name: three, prompt: a}\n  - {name: four, prompt: b}\n"
    plan = plan_for(tmp_path, PlanOptions(runs=1), text)
    one, two, three, four = (group.first for group in plan.trials.groups)
    assert three.graders is four.graders and [g.type for g in three.graders] == ["completed"]
    assert three.tags is four.tags and three.tags == {"area": "auth"}
    assert three.constraints is four.constraints
    assert [g.type for g in one.graders] == ["completed", "output-contains"]
    assert two.graders is three.graders and two.tags == {"area": "auth", "priority": "p1"}


def test_groups_of_one_eval_and_model_share_its_settings_and_keep_their_own(
    tmp_path: Path,
) -> None:
    plan = plan_for(tmp_path, PlanOptions(models=["m1", "m2"]))
    groups = plan.trials.groups
    assert [(g.stimulus.name, g.shared.model) for g in groups] == [
        ("one", "m1"),
        ("one", "m2"),
        ("two", "m1"),
        ("two", "m2"),
    ]
    assert groups[0].shared is groups[2].shared and groups[1].shared is groups[3].shared
    assert groups[0].shared is not groups[1].shared
    trials = list(plan.trials)
    assert [(t.key.stimulus, t.key.model, t.key.trial, t.model) for t in trials[4:6]] == [
        ("two", "m1", 0, "m1"),
        ("two", "m1", 1, "m1"),
    ]
    two = trials[4]
    assert (two.stimulus.name, two.tags) == ("two", {"area": "auth", "priority": "p1"})
    assert [g.type for g in two.graders] == ["completed"] and two.constraints.max_turns == 5
    assert two.case_hash == groups[2].case_hash != groups[0].case_hash
    assert two.fingerprint() == two.case_hash
    assert [t.key for t in plan.distinct_trials] == [g.key(0) for g in groups]
    assert plan.distinct_trials[1:3] == [groups[1].first, groups[2].first]
