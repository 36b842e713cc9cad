"""Shard strategies partition any plan exactly and reproducibly (property tests)."""

from __future__ import annotations

from hypothesis import given, strategies as st

from vally.contracts.protocols import TrialKey
from vally_builtin.sharding import ByStimulusStrategy, RoundRobinStrategy

keys_strategy = st.lists(
    st.builds(
        TrialKey,
        variant=st.sampled_from(["base", "treat", "model=a,skills=b"]),
        eval_name=st.sampled_from(["e1", "e2"]),
        stimulus=st.sampled_from(["s1", "s2", "s3", "s4"]),
        model=st.sampled_from(["m1", "default"]),
        trial=st.integers(0, 4),
    ),
    unique=True,
    max_size=60,
)


@given(keys=keys_strategy, total=st.integers(1, 12))
def test_shards_partition_the_plan(keys: list[TrialKey], total: int) -> None:
    for strategy in (RoundRobinStrategy(), ByStimulusStrategy()):
        slices = [strategy.select(keys, i, total) for i in range(1, total + 1)]
        flat = [key for part in slices for key in part]
        assert sorted(flat) == sorted(keys)
        assert len(flat) == len(set(flat))
        for part in slices:
            assert part == [k for k in keys if k in set(part)]  # plan order kept
        again = [strategy.select(list(keys), i, total) for i in range(1, total + 1)]
        assert again == slices


@given(keys=keys_strategy, total=st.integers(1, 6))
def test_by_stimulus_keeps_a_stimulus_on_one_shard(keys: list[TrialKey], total: int) -> None:
    strategy = ByStimulusStrategy()
    owner: dict[tuple[str, str], int] = {}
    for index in range(1, total + 1):
        for key in strategy.select(keys, index, total):
            assert owner.setdefault((key.eval_name, key.stimulus), index) == index


def test_round_robin_balances_counts() -> None:
    keys = [TrialKey("v", "e", f"s{i}", "m", 0) for i in range(10)]
    sizes = [len(RoundRobinStrategy().select(keys, i, 3)) for i in (1, 2, 3)]
    assert sizes == [4, 3, 3]


def test_out_of_range_shard_is_rejected() -> None:
    import pytest

    with pytest.raises(ValueError, match="out of range"):
        RoundRobinStrategy().select([], 0, 2)
    with pytest.raises(ValueError, match="out of range"):
        ByStimulusStrategy().select([], 3, 2)
