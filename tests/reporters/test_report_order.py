"""The console's report rows come in the run's order (evals as planned, variants as the
experiment lists them, stimuli as the spec lists them, anything unknown after), and finding
that order reads each eval's stimuli once, not once a row."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import overload

from reporter_helpers import make_run

from vally_builtin.reporters.aggregate import GroupKey
from vally_builtin.reporters.console import report_order


class CountedNames(Sequence[str]):
    """A spec's stimulus names that count how often they are read whole."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.reads = 0

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return self.names[index]

    def __len__(self) -> int:
        return len(self.names)

    def __iter__(self) -> Iterator[str]:
        self.reads += 1
        return iter(self.names)


def _key(eval_name: str, stimulus: str, variant: str = "") -> GroupKey:
    return GroupKey(eval_name=eval_name, variant=variant, stimulus=stimulus, model="m")


def test_rows_follow_the_plan_the_experiment_and_the_spec() -> None:
    run = replace(
        make_run(None),
        evals=["second", "first"],
        variants=["base", "other"],
        stimuli={"first": ["b", "a", "b"], "second": ["z", "y"]},
    )
    keys = [
        _key("first", "a", "other"),
        _key("first", "unknown"),
        _key("first", "b", "base"),
        _key("second", "y", "base"),
        _key("first", "a", "base"),
        _key("second", "z", "base"),
        _key("unplanned", "a", "base"),
    ]
    order = report_order(dict.fromkeys(keys), run)
    assert [(k.eval_name, k.variant, k.stimulus) for k in order] == [
        ("second", "base", "z"),
        ("second", "base", "y"),
        ("first", "base", "b"),  # a name listed twice takes its first place
        ("first", "base", "a"),
        ("first", "other", "a"),
        ("first", "", "unknown"),  # a variant the experiment does not list comes after
        ("unplanned", "base", "a"),
    ]


def test_each_eval_s_stimuli_are_read_once_whatever_the_number_of_rows() -> None:
    names = CountedNames([f"s{i}" for i in range(2_000)])
    run = replace(make_run(None), evals=["e"], stimuli={"e": names})
    keys = [_key("e", name) for name in reversed(names.names)]
    order = report_order(dict.fromkeys(keys), run)
    assert [key.stimulus for key in order] == names.names
    assert names.reads == 1


def test_the_order_found_from_the_spec_is_the_order_of_sorting_every_row() -> None:
    import random

    from vally_builtin.reporters.console import _sorted_order

    chooser = random.Random(7)
    found = 0  # cases ordered from the spec, not by sorting
    for _ in range(600):
        evals = chooser.sample(["e1", "e2", "e3"], chooser.randint(1, 3))
        variants = chooser.sample(["base", "other", "third"], chooser.randint(0, 3))
        stimuli = {
            name: [f"s{chooser.randint(0, 6)}" for _ in range(chooser.randint(0, 6))]
            for name in evals
        }
        unknown = chooser.randint(0, 1)
        keys = {
            GroupKey(
                eval_name=(evaluated := chooser.choice(evals + ["unplanned"] * unknown)),
                variant=chooser.choice([*variants, "", "late"]),
                stimulus=chooser.choice([*(stimuli.get(evaluated) or ["s0"]), *["s7"] * unknown]),
                model=chooser.choice(["m", "a", ""]),
            )
            for _ in range(chooser.randint(0, 25))
        }
        run = replace(make_run(None), evals=evals, variants=variants, stimuli=stimuli)
        groups = dict.fromkeys(keys)
        positions = {name: i for i, name in enumerate(evals)}
        places = {name: i for i, name in enumerate(variants)}
        assert report_order(groups, run) == _sorted_order(groups, run, positions, places)
        found += not unknown and all(k.stimulus in stimuli[k.eval_name] for k in keys)
    assert found > 200


def test_going_through_the_rows_of_a_known_spec_in_order_holds_nothing_a_row() -> None:
    from tests.traced import traced_peak
    from vally_builtin.reporters.console import iter_report_order

    names = [f"stimulus-{i}" for i in range(10_000)]
    run = replace(make_run(None), evals=["e"], stimuli={"e": names})
    groups = dict.fromkeys(_key("e", name) for name in reversed(names))
    seen: list[str] = []  # the stimuli's own names: no new object a row
    peak = traced_peak(lambda: seen.extend(key.stimulus for key in iter_report_order(groups, run)))
    assert seen == names
    # a dictionary of the spec's names for the while (about 30 bytes a row) and the list of
    # names seen; sorting every row on its places held about 136 bytes a row at once
    assert peak / len(names) < 60
