"""The console's summary table is rendered a part of its rows at a time: the same output
as rendering it whole, without holding a rendered cell of every row."""

from __future__ import annotations

import io
import os
import random
import tracemalloc
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from rich.console import Console
from rich.table import Table

from vally_builtin.reporters import console as reporter, table_parts
from vally_builtin.reporters.aggregate import GroupKey, RowAggregate


def _console(file: io.TextIOBase | io.StringIO, width: int, color: bool) -> Console:
    return Console(
        file=file,
        width=width,
        no_color=not color,
        color_system="truecolor" if color else None,
        force_terminal=color,
        highlight=False,
        emoji=False,
    )


def _table(rows: int, variant: bool, long_names: bool) -> Table:
    chance = random.Random(rows)
    table = Table()
    if variant:
        table.add_column("variant")
    for name in ("eval", "stimulus", "model"):
        table.add_column(name)
    for name in ("trials", "passed", "pass rate", "mean score"):
        table.add_column(name, justify="right")
    for index in range(rows):
        name = f"stimulus-{index}" + "-a-long-name" * (chance.randint(0, 4) if long_names else 0)
        row = ["ev", name, "default", str(chance.randint(1, 500)), f"{index % 7}/9", "5.0%", "0.50"]
        table.add_row(*([f"v{index % 3}", *row] if variant else row))
    return table


@pytest.mark.parametrize("width", [40, 80, 200])
@pytest.mark.parametrize(
    ("rows", "variant", "long_names", "color"),
    [(10, False, False, False), (257, True, False, True), (700, True, True, False)],
)
def test_a_table_in_parts_prints_what_the_whole_table_prints(
    width: int, rows: int, variant: bool, long_names: bool, color: bool
) -> None:
    whole, parts = io.StringIO(), io.StringIO()
    table_parts.print_streamed(_console(whole, width, color), _table(rows, variant, long_names))
    table = _table(rows, variant, long_names)
    table_parts.print_table_in_parts(_console(parts, width, color), table)
    assert parts.getvalue() == whole.getvalue()


@pytest.mark.parametrize("width", [40, 80, 200])
@pytest.mark.parametrize(
    ("rows", "variant", "long_names", "color"),
    [(10, False, False, True), (257, True, False, True), (700, True, True, False)],
)
def test_rows_given_a_part_at_a_time_print_what_the_whole_table_prints(
    width: int, rows: int, variant: bool, long_names: bool, color: bool
) -> None:
    full = _table(rows, variant, long_names)
    # a cell whose markup is not its width: measured as the table measures it
    full.columns[-3]._cells[rows // 2] = "[bold]" + "9" * 12 + "[/bold]"
    cells = list(zip(*(column._cells for column in full.columns), strict=True))
    given: list[int] = []

    def rows_again() -> Iterator[Sequence[str]]:
        given.append(len(given))
        return iter(cells)

    whole, parts = io.StringIO(), io.StringIO()
    table_parts.print_streamed(_console(whole, width, color), full)
    empty = _table(0, variant, long_names)
    table_parts.print_rows_in_parts(_console(parts, width, color), empty, rows_again)
    assert parts.getvalue() == whole.getvalue()
    assert len(given) == 2  # measured, then printed


def _summary_peak(rows: int) -> int:
    aggregates = {GroupKey("ev", "", f"s{i}", ""): RowAggregate() for i in range(rows)}
    with open(os.devnull, "w", encoding="utf-8") as sink:
        console = _console(sink, 120, color=False)
        tracemalloc.start()
        try:
            reporter.render_summary(console, aggregates)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()


def test_the_summary_table_does_not_hold_a_rendered_cell_of_every_row() -> None:
    small, large = _summary_peak(500), _summary_peak(4_500)
    # Rendered whole, the table held about 2.2 KB a row (a padded cell of every row and
    # column); in parts, the rows' text and the measuring of one column at a time.
    assert (large - small) / 4_000 < 1_000, (small, large)


def test_a_table_of_one_part_is_printed_whole_without_being_measured_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Printing a table whole measures its cells: measuring them before as well would do
    that work twice for every table of up to one part (most runs' summary tables)."""
    measured: list[int] = []
    real = table_parts._widest_cells

    def widest(*args: Any, **kwargs: Any) -> Any:
        measured.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(table_parts, "_widest_cells", widest)
    small, large = io.StringIO(), io.StringIO()
    table_parts.print_table_in_parts(_console(small, 80, False), _table(256, True, False))
    assert measured == [] and small.getvalue().count("\n") > 256
    table_parts.print_table_in_parts(_console(large, 80, False), _table(257, True, False))
    assert measured == [1]
