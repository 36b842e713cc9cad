"""Long tables printed a part of their rows at a time, with the output of printing them
whole.

Rendering a :class:`rich.table.Table` holds a padded cell of every row and column at once
(about 2 KB a row of the console's summary table), and a table built whole holds every
row's cells until it is printed. :func:`print_rows_in_parts` builds no whole table: it
measures the rows once, keeping only each column's widest cell, then builds, renders and
prints :data:`TABLE_PART_ROWS` rows at a time at the whole table's column widths, each
part without the border lines that join it to the parts before and after.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain, islice
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.measure import Measurement
from rich.table import Table

TABLE_PART_ROWS = 256
"""Rows of a table :func:`print_rows_in_parts` renders at a time."""

STREAMED_SEGMENTS = 4096
"""Rendered pieces :func:`print_streamed` holds before it writes them."""

Rows = Callable[[], Iterable[Sequence[RenderableType]]]
"""Gives a table's rows (each a cell per column) from the first, every time it is called."""


def print_streamed(console: Console, renderable: Any) -> None:
    """Print ``renderable`` as :meth:`Console.print` does (the same output), but write its
    rendering every :data:`STREAMED_SEGMENTS` pieces instead of holding all of it: a
    summary table of 10^4 stimuli renders to about 20 MB of pieces."""
    from rich.segment import Segments

    batch: list[Any] = []
    for segment in console.render(renderable, console.options):
        batch.append(segment)
        if len(batch) >= STREAMED_SEGMENTS:
            console.print(Segments(batch), end="")
            batch = []
    console.print(Segments(batch))


def print_table_in_parts(console: Console, table: Table) -> None:
    """Print ``table`` (its rows added without styles of their own) as
    :meth:`Console.print` does (the same output), rendering :data:`TABLE_PART_ROWS` rows at
    a time (see :func:`print_rows_in_parts`)."""
    cells = [column._cells for column in table.columns]
    _print_in_parts(console, table, lambda: zip(*cells, strict=True), lambda: table)


def print_rows_in_parts(console: Console, table: Table, rows: Rows) -> None:
    """Print ``table`` (its columns and settings, no rows) holding ``rows()`` as
    :meth:`Console.print` prints such a table whole (the same output), without holding
    every row's cells at once.

    ``rows`` is called twice: once to count (and, past one part, measure) the cells,
    once to print them. The column
    widths are those of the whole table: they follow from each column's widest cell and
    its header alone, so a table of one row of those cells measures the same. A table of
    at most :data:`TABLE_PART_ROWS` rows, one that does not fit the console's width, or
    one with a title or a footer, gets the rows added to ``table`` and is printed whole
    (as :func:`print_streamed` prints it).
    """

    def whole() -> Table:
        for row in rows():
            table.add_row(*row)
        return table

    _print_in_parts(console, table, rows, whole)


def _print_in_parts(console: Console, table: Table, rows: Rows, whole: Callable[[], Table]) -> None:
    """Print ``rows()`` in ``table``'s columns a part at a time, or ``whole()`` whole
    (a table of one part is not measured first: printing it whole measures it)."""
    given = iter(rows())
    opening = list(islice(given, TABLE_PART_ROWS + 1))
    if len(opening) <= TABLE_PART_ROWS or table.title or table.show_footer:
        print_streamed(console, whole())
        return
    options = console.options.update_width(console.options.max_width - table._extra_width)
    columns = len(table.columns)
    widest, count = _widest_cells(console, options, columns, chain(opening, given))
    widths = _one_row(table, widest)._calculate_column_widths(console, options)
    if sum(widths) > options.max_width:
        print_streamed(console, whole())
        return
    from rich.segment import Segment, Segments

    new_line = Segment.line()
    remaining = iter(rows())
    for first in range(0, count, TABLE_PART_ROWS):
        last = min(first + TABLE_PART_ROWS, count)
        part = _fixed_part(table, widths, first == 0, islice(remaining, last - first))
        lines = list(Segment.split_lines(console.render(part, console.options)))
        if first:
            lines = lines[1:]  # the part's top border
        if last < count:
            lines = lines[:-1]  # its bottom border
        segments = Segments([piece for line in lines for piece in (*line, new_line)])
        if last < count:
            console.print(segments, end="")
        else:
            console.print(segments)


def _widest_cells(
    console: Console, options: ConsoleOptions, columns: int, rows: Iterable[Sequence[Any]]
) -> tuple[list[RenderableType], int]:
    """Each column's widest cell of ``rows`` (an empty text for a column without rows) and
    the number of rows. Widest is the largest maximum width measured at ``options``, the
    measure a column's width is taken from: a cell's natural width capped at the table's,
    so the cap keeps the order."""
    widest: list[RenderableType] = [""] * columns
    widths = [-1] * columns
    count = 0
    for row in rows:
        count += 1
        for index, cell in enumerate(row):
            width = Measurement.get(console, options, cell).maximum
            if width > widths[index]:
                widths[index], widest[index] = width, cell
    return widest, count


def _one_row(table: Table, cells: Sequence[RenderableType]) -> Table:
    """``table`` (its settings and columns) holding only ``cells``, one row."""
    from rich.table import Row

    measured = copy.copy(table)
    measured.columns = [
        dataclasses.replace(column, _cells=[cell])
        for column, cell in zip(table.columns, cells, strict=True)
    ]
    measured.rows = [Row()]
    return measured


def _fixed_part(
    table: Table, widths: Sequence[int], header: bool, rows: Iterator[Sequence[RenderableType]]
) -> Table:
    """A table of ``table``'s columns fixed at ``widths`` (with their padding) holding
    ``rows``, with the header only when ``header`` (the part that starts the table)."""
    part = Table(box=table.box, show_header=header)
    for index, (column, width) in enumerate(zip(table.columns, widths, strict=True)):
        part.add_column(
            column.header,
            justify=column.justify,
            width=width - table._get_padding_width(index),
        )
    for row in rows:
        part.add_row(*row)
    return part
