"""The experiment report counts its records in one pass (any order): the comparison follows
the plan's order, and each row lists its first failed or errored trials, then how many more."""

from __future__ import annotations

import random
from collections.abc import Iterator

from tests.reporters.reporter_helpers import make_record
from vally import order_records
from vally.models.records import RunSummaryRecord, TrialError, TrialResultRecord
from vally_builtin.reporters.aggregate import FAILURES_KEPT
from vally_builtin.reporters.experiment import compare_variants
from vally_builtin.reporters.experiment_aggregate import ExperimentAggregate, PlanPlaces
from vally_builtin.reporters.experiment_report import render_report

VARIANTS = ["base", "new"]


def _plan(stimuli: int, runs: int) -> list[str]:
    return [
        f"{v}/ev/s{s}/default/{t}" for v in VARIANTS for s in range(stimuli) for t in range(runs)
    ]


def _records(stimuli: int, runs: int, seed: int = 3) -> list[TrialResultRecord]:
    rng = random.Random(seed)
    error = TrialError(phase="execute", code="VALLY_TIMEOUT", message="timed out")
    records = [
        make_record(
            f"s{s}",
            eval_name="ev",
            trial=t,
            model=None,
            variant=v,
            passed=rng.random() < (0.4 if v == "base" else 0.8),
            error=error if rng.random() < 0.1 else None,
        )
        for v in VARIANTS
        for s in range(stimuli)
        for t in range(runs)
    ]
    rng.shuffle(records)
    return records


def _summaries() -> dict[str, list[RunSummaryRecord]]:
    return {
        v: [
            RunSummaryRecord.model_construct(
                eval_name="ev",
                verdict="pass",
                eval_file="ev.yaml",
                config_hash="c",
                eval_hash="e",
                threshold=None,
                stimuli=[],
            )
        ]
        for v in VARIANTS
    }


def _render(planned: list[str], records: list[TrialResultRecord]) -> str:
    snapshot = {"experiment": "x", "baseline": "base", "variants": VARIANTS, "trials": planned}
    return render_report(snapshot, _summaries(), iter(records), run_id="r", rendered_at="t")


class Once:
    """Records that may be read once only."""

    def __init__(self, records: list[TrialResultRecord]) -> None:
        self.records = records
        self.passes = 0

    def __iter__(self) -> Iterator[TrialResultRecord]:
        self.passes += 1
        assert self.passes == 1, "the report read the records twice"
        return iter(self.records)


def test_comparison_follows_the_plan_whatever_order_the_records_come_in() -> None:
    planned, records = _plan(12, 3), _records(12, 3)
    aggregate = ExperimentAggregate.of(VARIANTS, planned, Once(records))
    counted = {s.name: s for s in aggregate.variant_stats()}
    expected = compare_variants(VARIANTS, "base", order_records(records, planned))
    for item in expected.variants:
        assert list(counted[item.name].rates.items()) == list(item.rates.items())
    # Counting in arrival order pairs the stimuli differently (what the report did not do).
    shuffled = compare_variants(VARIANTS, "base", records)
    assert [list(s.rates) for s in shuffled.variants] != [list(s.rates) for s in expected.variants]


def test_report_is_the_same_for_any_order_of_the_records() -> None:
    planned, records = _plan(6, 4), _records(6, 4)
    text = _render(planned, records)
    assert "sign-flip over stimuli" in text
    for seed in range(3):
        random.Random(seed).shuffle(records)
        assert _render(planned, records) == text


def test_small_rows_list_every_failure_in_plan_order() -> None:
    planned, records = _plan(3, 5), _records(3, 5)
    text = _render(planned, records)
    section = text.split("## Variant `base`")[1].split("## Variant `new`")[0]
    listed = [line for line in section.splitlines() if line.startswith("- `")]
    ordered = [r for r in order_records(records, planned) if r.variant == "base"]
    expected = [
        f"- `{r.stimulus_name}` trial {r.trial_index}:"
        for r in ordered
        if r.error is not None or not r.grade_result or not r.grade_result.passed
    ]
    assert [line.split(" ", 4)[:4] for line in listed] == [e.split(" ") for e in expected]
    assert "more trial(s)" not in text


def test_a_row_lists_its_first_failures_then_how_many_more() -> None:
    extra = 7
    runs = FAILURES_KEPT + extra
    planned = _plan(1, runs)
    records = [
        make_record("s0", eval_name="ev", trial=t, model=None, variant=v, passed=False)
        for v in VARIANTS
        for t in range(runs)
    ]
    random.Random(1).shuffle(records)
    text = _render(planned, records)
    section = text.split("## Variant `base`")[1].split("## Variant `new`")[0]
    listed = [line for line in section.splitlines() if "output-contains failed" in line]
    assert len(listed) == FAILURES_KEPT
    assert [int(line.split()[3].rstrip(":")) for line in listed] == list(range(FAILURES_KEPT))
    assert f"- `s0`: {extra} more trial(s) with failed graders or errors not listed" in section


def test_plan_places_are_held_per_row() -> None:
    planned = _plan(50, 40)
    places = PlanPlaces(planned)
    # nothing is mapped until a record is placed (a report of sealed shards places none)
    assert places.keys is None and not places.rows and places.size == len(planned)
    record = make_record("s7", eval_name="ev", trial=3, model=None, variant="new")
    assert places.place(record) == planned.index("new/ev/s7/default/3")
    assert places.keys is None and len(places.rows) == 100
    beyond = make_record("s7", eval_name="ev", trial=40, model=None, variant="new")
    assert places.place(beyond) is None
    # A plan that interleaves its rows at even steps is held per row too.
    interleaved = [f"base/ev/s{s}/default/{t}" for t in range(3) for s in range(2)]
    strided = PlanPlaces(interleaved)
    second = make_record("s1", eval_name="ev", trial=2, model=None, variant="base")
    assert strided.place(second) == interleaved.index("base/ev/s1/default/2")
    assert strided.keys is None and len(strided.rows) == 2
    # One laid out otherwise is mapped key by key, with the same places.
    uneven = [*interleaved[:4], interleaved[5], interleaved[4]]
    mixed = PlanPlaces(uneven)
    assert mixed.place(second) == uneven.index("base/ev/s1/default/2")
    assert mixed.keys is not None
