"""Every row of a history store in one canonical form, to compare two stores row for row
(``bench/same_store.py``) or a store with the rows written down for it (``test_store_rows``).

Rows come table by table, in the order of their primary keys (bytewise on either backend).
What says how a row was stored rather than what it holds is made plain: compressed bytes
(``record_blocks.data``, ``outcome_details.record`` and ``events``) are decompressed, and
each outcome's record line is read back from its block. ``runs.ingested_at`` (the time of
the ingest) is left out.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

from sqlalchemy import Connection, String, Table, Text, select

from vally_serve import schema
from vally_serve.recordblocks import LineReader

LEFT_OUT = {"runs": ("ingested_at",)}
"""Columns whose values differ from one ingest of the same files to the next."""


def tables() -> list[Table]:
    """The tables of the store, parents first."""
    return list(schema.metadata.sorted_tables)


def table_rows(connection: Connection, table: Table) -> Iterator[tuple[Any, ...]]:
    """The rows of ``table`` in their canonical form, in primary key order (bytewise)."""
    columns = [c for c in table.columns if c.name not in LEFT_OUT.get(table.name, ())]
    postgres = connection.dialect.name == "postgresql"
    order = [
        c.collate("C") if postgres and isinstance(c.type, String | Text) else c
        for c in table.primary_key.columns
    ]
    names = [c.name for c in columns]
    lines = LineReader(connection) if table is schema.outcome_details else None
    result = connection.execution_options(yield_per=500).execute(select(*columns).order_by(*order))
    for row in result:
        values = dict(zip(names, row, strict=True))
        if table is schema.record_blocks:
            values["data"] = zlib.decompress(values["data"])
        elif lines is not None:
            values["record"] = lines.line(row)
            events = values["events"]
            values["events"] = None if events is None else zlib.decompress(events).decode()
        yield tuple(values.values())
