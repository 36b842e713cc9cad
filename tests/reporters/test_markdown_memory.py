"""The Markdown report of many stimuli is made from the rows as they are and sorted keys,
and written a line at a time: no copies of the rows, and no text of the whole report."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from tests.reporters.reporter_helpers import make_record, make_run
from tests.traced import traced_peak
from vally import TrialFacts
from vally_builtin.reporters import atomic_write_pieces, markdown, text_pieces
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
    pieces = list(text_pieces(iter(lines)))
    assert "".join(pieces) == expected
    assert all(piece.strip("\n") for piece in pieces[:-1])  # newlines only with a line


def _aggregate(stimuli: int) -> ReportAggregate:
    aggregate = ReportAggregate(compare_variants=False)
    for index in range(stimuli):
        variant = None if index % 3 else "v"
        record = make_record(f"s{index}", eval_name=f"ev{index % 2}", variant=variant)
        aggregate.add_facts(TrialFacts.of_record(record))
    return aggregate


def _render_peak(stimuli: int) -> tuple[int, str]:
    aggregate = _aggregate(stimuli)
    run = make_run(None)
    texts: list[str] = []
    gc.collect()
    peak = traced_peak(
        lambda: texts.append(markdown.render_aggregate(run, aggregate, rendered_at="t"))
    )
    return peak, texts[0]


def test_a_report_of_many_stimuli_holds_its_lines_and_one_text() -> None:
    (small, _), (large, text) = _render_peak(1_000), _render_peak(5_000)
    sections = [line for line in text.splitlines() if line.startswith("## Eval")]
    assert sections == sorted(sections) and len(sections) == 4
    # about 100 characters a row: its line and the joined text, about 360 bytes a row;
    # 637 while the rows were copied twice (sorted, then by section) and the text once more
    assert (large - small) / 4_000 < 450


def _write_peak(stimuli: int, path: Path) -> int:
    aggregate = _aggregate(stimuli)
    run = make_run(None)
    gc.collect()
    return traced_peak(
        lambda: atomic_write_pieces(
            path, text_pieces(markdown.aggregate_lines(run, aggregate, rendered_at="t"))
        )
    )


def test_a_report_of_many_stimuli_is_written_without_its_whole_text(tmp_path: Path) -> None:
    small = _write_peak(1_000, tmp_path / "small.md")
    large = _write_peak(5_000, tmp_path / "large.md")
    run = make_run(None)
    expected = markdown.render_aggregate(run, _aggregate(5_000), rendered_at="t")
    assert (tmp_path / "large.md").read_text(encoding="utf-8") == expected
    # the sorted keys (8 bytes a row) and one row at a time; about 360 bytes a row while
    # the report's lines and its text were held whole
    assert (large - small) / 4_000 < 60
