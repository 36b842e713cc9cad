"""Tests of the balanced shard strategy (public vally API only)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from vally_balanced_shards import BalancedShardsConfig, BalancedShardStrategy, assign

from vally import ConfigError, TrialKey
from vally.plugins.session import Session


def _keys(stimuli: list[str], trials: int = 1) -> list[TrialKey]:
    return [TrialKey("default", "demo", s, "m", t) for s in stimuli for t in range(trials)]


def _strategy(**config: object) -> BalancedShardStrategy:
    return BalancedShardStrategy(BalancedShardsConfig.model_validate(config))


def test_lpt_assignment_is_greedy_and_deterministic() -> None:
    assert assign([5, 4, 3, 3, 3], 2) == [0, 1, 1, 0, 1]
    assert assign([1, 1, 1, 1], 4) == [0, 1, 2, 3]
    assert assign([], 3) == []


@pytest.mark.parametrize("total", [1, 2, 3, 5])
def test_shards_partition_the_plan_in_plan_order(tmp_path: Path, total: int) -> None:
    keys = _keys(["a", "b", "c", "d"], trials=3)
    strategy = _strategy(default_duration="10s")
    slices = [strategy.select(keys, i, total) for i in range(1, total + 1)]
    flat = [k for s in slices for k in s]
    assert sorted(flat) == sorted(keys) and len(flat) == len(keys)
    for part in slices:
        assert part == [k for k in keys if k in part]
    assert slices == [strategy.select(keys, i, total) for i in range(1, total + 1)]


def test_durations_from_previous_results_balance_the_load(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    lines = [
        {"type": "trial-result", "status": "success", "evalName": "demo",
         "stimulusName": name, "variant": None, "model": None, "durationMs": ms, "tags": {}}
        for name, ms in [("slow", 90_000), ("slow", 110_000), ("mid", 50_000), ("fast", 10_000)]
    ]
    lines.append({"type": "run-summary"})
    results.write_text("".join(json.dumps(line) + "\n" for line in lines))
    keys = _keys(["fast", "mid", "slow", "fast2"])
    strategy = _strategy(results=str(results), default_duration="40s")
    # slow=100s, mid=50s, fast2=40s (default), fast=10s: LPT gives {slow} and {mid,fast2,fast}
    assert [k.stimulus for k in strategy.select(keys, 1, 2)] == ["slow"]
    assert [k.stimulus for k in strategy.select(keys, 2, 2)] == ["fast", "mid", "fast2"]
    assert strategy.loads(keys, 2) == [100.0, 100.0]


def test_duration_tags_from_eval_files(tmp_path: Path) -> None:
    spec = tmp_path / "eval.yaml"
    spec.write_text(
        "name: demo\nstimuli:\n"
        "  - {name: a, prompt: x, tags: {duration: 10m}}\n"
        "  - {name: b, prompt: x}\n"
        "  - {name: c, prompt: x, tags: {duration: 5m}}\n"
        "  - {name: d, prompt: x, tags: {duration: 5m}}\n"
    )
    keys = _keys(["a", "b", "c", "d"])
    strategy = _strategy(specs=[str(spec)], default_duration="1s")
    # a=10m alone; c and d (5m each) together; b (1s) breaks the 10m tie to shard 1
    assert [k.stimulus for k in strategy.select(keys, 1, 2)] == ["a", "b"]
    assert [k.stimulus for k in strategy.select(keys, 2, 2)] == ["c", "d"]


def test_environment_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VALLY_BALANCED_DEFAULT", "3s")
    monkeypatch.setenv("VALLY_BALANCED_SPECS", str(tmp_path / "a.yaml"))
    config = BalancedShardsConfig()
    assert config.default_duration == "3s"
    assert config.specs == [str(tmp_path / "a.yaml")]


def test_bad_input_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="out of range"):
        _strategy().select(_keys(["a"]), 3, 2)
    with pytest.raises(ConfigError, match="invalid duration"):
        _strategy(default_duration="soon").select(_keys(["a"]), 1, 1)
    with pytest.raises(ConfigError, match="cannot read results"):
        _strategy(results=str(tmp_path / "nope.jsonl")).select(_keys(["a"]), 1, 1)


def test_installed_entry_point_resolves_to_this_class() -> None:
    name = BalancedShardStrategy.metadata.name
    session = Session(environ={})
    assert session.plugin_class("shard_strategy", name) is BalancedShardStrategy
