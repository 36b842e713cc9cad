"""Incremental summaries: the same summary as summarising every record at once, in
memory that does not grow with the number of trials."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Sequence

from tests.scoring.test_scoring import BARE, record
from vally.engine.records.scoring import summarize_stimulus
from vally.engine.records.tally import EvalTally, summarize_eval
from vally.models.records import TrialResultRecord


def group_by_stimulus(records: Sequence[TrialResultRecord]) -> list[list[TrialResultRecord]]:
    """Records grouped by (stimulus, model) in order of first appearance, each group in
    trial order."""
    groups: dict[tuple[str, str | None], list[TrialResultRecord]] = {}
    for one in records:
        groups.setdefault((one.stimulus_name, one.model), []).append(one)
    return [sorted(group, key=lambda r: r.trial_index) for group in groups.values()]


def mixed_records() -> list[TrialResultRecord]:
    return [
        record(2, True, model="m2"),
        record(0, True),
        record(1, False, score=0.25),
        record(3, None, status="error"),
        record(4, False, errored=True, tokens=7),
        record(1, True, stim=BARE, model=None),
        record(0, False, model="m2", tokens=40),
    ]


def test_tally_matches_summarize_eval_field_for_field() -> None:
    records = mixed_records()
    tally = EvalTally()
    for item in records:
        tally.add(item)
    got = tally.summary(run_id="r", eval_name="ev", threshold=0.5)
    # The per-stimulus aggregation over whole lists is the independent reference.
    expected = [summarize_stimulus(group).model_dump() for group in group_by_stimulus(records)]
    assert [s.model_dump() for s in got.stimuli] == expected
    assert [s.stimulus_name for s in got.stimuli] == ["s1", "s1", "bare"]
    assert got.models == ["m2", "m1", None]
    assert (got.trials, got.passed, got.failed, got.errored) == (7, 2, 2, 2)
    assert got.verdict == "fail" and got.pass_rate == 0.5
    assert got.started_at == min(r.started_at for r in records)
    assert got.completed_at == max(r.completed_at for r in records)
    whole = summarize_eval(records, run_id="r", eval_name="ev", threshold=0.5)
    assert whole.model_dump(exclude={"completed_at"}) == got.model_dump(exclude={"completed_at"})


def test_tally_orders_by_rank_not_arrival() -> None:
    records = mixed_records()
    ranks = {id(r): i for i, r in enumerate(records)}
    tally = EvalTally()
    for item in reversed(records):
        tally.add(item, ranks[id(item)])
    got = tally.summary(run_id="r", eval_name="ev")
    expected = summarize_eval(records, run_id="r", eval_name="ev")
    assert [(s.stimulus_name, s.model) for s in got.stimuli] == [
        (s.stimulus_name, s.model) for s in expected.stimuli
    ]
    assert got.models == expected.models
    first = got.stimuli[1]
    assert first.has_graders and first.trials == 4 and first.errored == 2


def test_tally_of_nothing_has_no_verdict() -> None:
    got = EvalTally().summary(run_id="r", eval_name="ev")
    assert got.verdict == "none" and got.trials == 0 and got.stimuli == []


def _peak_tallying(count: int) -> int:
    pool = [record(i, i % 2 == 0, model=f"m{i % 3}") for i in range(6)]
    gc.collect()
    tracemalloc.start()
    try:
        tally = EvalTally()
        for index in range(count):
            tally.add(pool[index % len(pool)])
        tally.summary(run_id="r", eval_name="ev")
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_tally_memory_is_flat_in_the_number_of_records() -> None:
    small = _peak_tallying(10_000)
    large = _peak_tallying(100_000)
    assert large <= 1.5 * small, (small, large)
