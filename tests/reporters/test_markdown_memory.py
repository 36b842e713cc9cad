"""The Markdown report of many stimuli is made from the rows as they are, sorted keys and
one join: no copies of the rows or of the text beside the report's lines."""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from tests.reporters.reporter_helpers import make_record, make_run
from vally import TrialFacts
from vally_builtin.reporters import markdown
from vally_builtin.reporters.aggregate import ReportAggregate


@pytest.mark.parametrize(
    "lines",
    [
        ["# t", "", "a", "", ""],
        ["# t", "b\n", "\n", ""],
        ["# t", "c\n\n"],
        ["", "", ""],
        ["only"],
        [],
    ],
)
def test_the_text_is_the_lines_joined_without_trailing_newlines(lines: list[str]) -> None:
    expected = "\n".join(lines).rstrip("\n") + "\n"
    assert markdown._text(list(lines)) == expected


def _render_peak(stimuli: int) -> tuple[int, str]:
    aggregate = ReportAggregate(compare_variants=False)
    for index in range(stimuli):
        variant = None if index % 3 else "v"
        record = make_record(f"s{index}", eval_name=f"ev{index % 2}", variant=variant)
        aggregate.add_facts(TrialFacts.of_record(record))
    run = make_run(None)
    gc.collect()
    tracemalloc.start()
    try:
        text = markdown.render_aggregate(run, aggregate, rendered_at="t")
        return tracemalloc.get_traced_memory()[1], text
    finally:
        tracemalloc.stop()


def test_a_report_of_many_stimuli_holds_its_lines_and_one_text() -> None:
    (small, _), (large, text) = _render_peak(1_000), _render_peak(5_000)
    sections = [line for line in text.splitlines() if line.startswith("## Eval")]
    assert sections == sorted(sections) and len(sections) == 4
    # about 100 characters a row: its line and the joined text, about 360 bytes a row;
    # 637 while the rows were copied twice (sorted, then by section) and the text once more
    assert (large - small) / 4_000 < 450
