"""Kernel pieces of experiments: shard planning properties, shard names, comparison rules."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from tests.compare.records import record
from vally.contracts.protocols import TrialKey
from vally.engine.shards.partition import ShardSpec, parse_shard, select_keys
from vally_builtin.reporters.experiment import compare_variants, comparison_table
from vally_builtin.sharding import ByStimulusStrategy, RoundRobinStrategy

STRATEGIES = [RoundRobinStrategy(), ByStimulusStrategy()]

plans = st.builds(
    lambda variants, evals, stimuli, models, trials: [
        TrialKey(v, e, s, m, t)
        for v in variants
        for e in evals
        for s in stimuli
        for m in models
        for t in range(trials)
    ],
    st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=3, unique=True),
    st.lists(st.sampled_from(["e1", "e2", "e3"]), min_size=1, max_size=3, unique=True),
    st.lists(st.sampled_from(["s1", "s2", "s3", "s4"]), min_size=0, max_size=4, unique=True),
    st.lists(st.sampled_from(["default", "m1"]), min_size=1, max_size=2, unique=True),
    st.integers(min_value=1, max_value=3),
)


@settings(max_examples=60, deadline=None)
@given(plans, st.integers(min_value=1, max_value=12), st.sampled_from([0, 1]))
def test_shards_partition_the_plan_exactly(keys: list[TrialKey], total: int, which: int) -> None:
    strategy = STRATEGIES[which]
    slices = [
        select_keys(strategy.select, keys, ShardSpec(i, total), strategy="s")
        for i in range(1, total + 1)
    ]
    flat = [k for part in slices for k in part]
    assert sorted(flat) == sorted(keys)
    assert len(set(flat)) == len(flat)
    for part in slices:  # each slice is in plan order
        assert part == [k for k in keys if k in set(part)]
    index = total // 2 + 1
    again = select_keys(strategy.select, list(keys), ShardSpec(index, total), strategy="s")
    assert again == slices[index - 1]


def test_strategy_returning_unknown_keys_is_rejected() -> None:
    import pytest

    from vally.errors import ConfigError

    keys = [TrialKey("a", "e", "s", "default", 0)]
    with pytest.raises(ConfigError, match="not in the plan"):
        select_keys(lambda k, i, n: [TrialKey("x", "e", "s", "default", 0)], keys, ShardSpec(1, 1))
    with pytest.raises(ConfigError, match="twice"):
        select_keys(lambda k, i, n: [k[0], k[0]], keys, ShardSpec(1, 1))


def test_shard_names_are_zero_padded_to_equal_width() -> None:
    assert ShardSpec(1, 3).dir_name == "shard-1-of-3"
    assert ShardSpec(3, 10).dir_name == "shard-03-of-10"
    assert ShardSpec(7, 100).dir_name == "shard-007-of-100"
    assert parse_shard(" 2/4 ") == ShardSpec(2, 4)


def recs(variant: str, outcomes: dict[str, bool]) -> list:
    out = []
    for name, passed in outcomes.items():
        r = record(name, passed=passed)
        out.append(r.model_copy(update={"variant": variant}))
    return out


def test_tie_only_when_every_variant_matches_per_stimulus() -> None:
    base = recs("base", {"x": True, "y": False})
    same = recs("t1", {"x": True, "y": False}) + recs("t2", {"x": True, "y": False})
    result = compare_variants(["base", "t1", "t2"], "base", base + same)
    assert result.headline == "Tie: every variant matches the baseline."
    # Same pooled pass rate, different stimuli: no tie, and no label without a test.
    swapped = recs("t1", {"x": True, "y": False}) + recs("t2", {"x": False, "y": True})
    result = compare_variants(["base", "t1", "t2"], "base", base + swapped)
    assert "Tie:" not in result.headline
    assert result.labels == {"t1": "no detectable difference", "t2": "no detectable difference"}
    assert result.result_text("t2") == "no detectable difference (too few stimuli to detect any)"


def test_labels_need_the_test_to_reject() -> None:
    names = [f"s{i}" for i in range(8)]
    base = recs("base", dict.fromkeys(names, True))
    worse = recs("t1", {n: i >= 7 for i, n in enumerate(names)})  # 7 of 8 stimuli flip
    result = compare_variants(["base", "t1"], "base", base + worse)
    assert result.labels == {"t1": "regression"}
    assert "Regression: t1" in result.headline
    assert result.deltas["t1"] == pytest.approx(-7 / 8)
    one_flip = recs("t1", {n: i != 0 for i, n in enumerate(names)})
    result = compare_variants(["base", "t1"], "base", base + one_flip)
    assert result.labels == {"t1": "no detectable difference"}
    assert result.result_text("t1").startswith("no detectable difference (smallest detectable: ±")
    better_base = recs("base", dict.fromkeys(names, False))
    better = recs("t1", dict.fromkeys(names, True))
    result = compare_variants(["base", "t1"], "base", better_base + better)
    assert result.labels == {"t1": "better"} and "Best: t1." in result.headline


def test_errored_trials_are_left_out_of_pass_rates() -> None:
    # Same per-stimulus pass rates; the treatment has two errored trials on a passing stimulus.
    base = recs("base", {"x": True, "y": False})
    treat = recs("t1", {"x": True, "y": False})
    for index in (1, 2):
        errored = record("x", passed=None).model_copy(
            update={"variant": "t1", "trial_index": index, "status": "error"}
        )
        treat.append(errored)
    result = compare_variants(["base", "t1"], "base", base + treat)
    assert result.deltas["t1"] == 0.0
    stats = {s.name: s for s in result.variants}
    assert stats["t1"].pass_rate == stats["base"].pass_rate == 0.5
    assert stats["t1"].errored == 2


def test_unavailable_and_partial_comparisons() -> None:
    base = recs("base", {"x": True})
    other = recs("t", {"y": True})
    result = compare_variants(["base", "t"], "base", base + other)
    assert not result.available
    assert result.headline == "Comparison unavailable: variants observed different stimuli."
    assert "Δ vs baseline" not in "\n".join(comparison_table(result))
    result = compare_variants(["base", "t", "u"], "base", recs("t", {"x": True}))
    assert result.headline.startswith("Comparison unavailable: the baseline variant 'base'")
    assert [s.name for s in result.variants] == ["t"]  # only observed variants
    result = compare_variants(["base", "t"], "base", base + recs("t", {"x": False}), shard="2/4")
    table = "\n".join(comparison_table(result))
    assert "partial: shard 2 of 4" in table and "Best" not in table and "pts" not in table


@settings(max_examples=40, deadline=None)
@given(
    st.integers(min_value=1, max_value=3),
    st.lists(st.integers(min_value=1, max_value=3), min_size=1, max_size=3),
    st.integers(min_value=1, max_value=9),
    st.sampled_from([0, 1]),
)
def test_real_plans_partition_into_shards(
    variants: int, stimuli_per_eval: list[int], total: int, which: int
) -> None:
    from pathlib import Path

    from vally.contracts.protocols import LoadedEval
    from vally.engine.planning.plan import PlanInput, PlanOptions
    from vally.engine.planning.planner import build_plan
    from vally.models.spec import EnvironmentConfig, EvalSpec

    inputs = []
    for v in range(variants):
        for e, count in enumerate(stimuli_per_eval):
            spec = EvalSpec.model_validate(
                {
                    "name": f"e{e}",
                    "defaults": {"runs": 2, "executor": {"name": "mock"}},
                    "stimuli": [{"name": f"s{i}", "prompt": "p"} for i in range(count)],
                }
            )
            inputs.append(PlanInput(LoadedEval(spec, Path(f"/x/e{e}.yaml")), f"v{v}"))
    plan = build_plan(
        inputs, PlanOptions(), resolve_environment=lambda loaded, s: EnvironmentConfig()
    )
    strategy = STRATEGIES[which]
    slices = [
        select_keys(strategy.select, plan.keys, ShardSpec(i, total)) for i in range(1, total + 1)
    ]
    assert sorted(k for part in slices for k in part) == sorted(plan.keys)
    assert sum(len(p) for p in slices) == len(plan.trials)
    rerun = select_keys(strategy.select, plan.keys, ShardSpec(total, total))
    assert rerun == slices[-1]
