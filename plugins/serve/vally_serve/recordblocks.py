"""The record lines of the store, kept verbatim in compressed blocks.

Each outcome's ``results.jsonl`` line is stored as read (its bytes, never decoded and
encoded again). The lines of the outcomes one transaction inserts are compressed
:data:`BLOCK_RECORDS` at a time into one ``record_blocks`` row, and each outcome's
``outcome_details`` row says where its line is: the block, and the line's start and
length in the block's uncompressed bytes. Compressing a block of similar records costs a
quarter of compressing them one by one and takes a fifth of the space; reading one
record back decompresses one block (about 100 KB).

A block is a zlib stream, read back with :func:`zlib.decompress`. It is written by
ISA-L's deflate (the ``isal`` package of the ``serve`` extra) when it is installed: the
same format, about a sixth of zlib's instructions at its fastest level and as small. Without
it, :mod:`zlib` writes the blocks.

Stores written before schema version 3 hold each record compressed on its own in
``outcome_details.record`` (and no block): :func:`record_line` and :class:`LineReader`
read both.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, select

from vally_serve.schema import record_blocks

try:
    from isal.isal_zlib import compress as _deflate
except ImportError:  # pragma: no cover - the serve extra installs isal
    from zlib import compress as _deflate

BLOCK_RECORDS = 32
"""Record lines per compressed block."""
LEVEL = 1
"""Compression level of the blocks: ISA-L's and zlib's level 1 are their fastest that find
repeated strings (a block of similar records compresses well)."""

Place = tuple[int, int, int]
"""Where a line is: its block id, and its start and length in the block's bytes."""


def write_lines(connection: Connection, lines: Sequence[bytes]) -> list[Place]:
    """Store ``lines`` in compressed blocks; returns where each one is, in order."""
    blocks: list[bytes] = []
    spans: list[tuple[int, int, int]] = []  # block index in this call, start, length
    for first in range(0, len(lines), BLOCK_RECORDS):
        group = lines[first : first + BLOCK_RECORDS]
        start = 0
        for line in group:
            spans.append((len(blocks), start, len(line)))
            start += len(line)
        blocks.append(_deflate(b"".join(group), LEVEL))
    if not blocks:
        return []
    ids = _insert_blocks(connection, blocks)
    return [(ids[index], start, length) for index, start, length in spans]


def _insert_blocks(connection: Connection, blocks: list[bytes]) -> list[int]:
    """Insert ``blocks`` into ``record_blocks``; returns their ids, in order.

    On SQLite the transaction holds the database's write lock from its start, so the ids
    are the next ones after the largest (what SQLite would give them) and the blocks go in
    by the driver's executemany; elsewhere the database returns the ids it gave.
    """
    if connection.dialect.name == "sqlite":
        last = connection.exec_driver_sql("SELECT max(id) FROM record_blocks").scalar() or 0
        ids = list(range(last + 1, last + 1 + len(blocks)))
        rows = list(zip(ids, blocks, strict=True))
        connection.exec_driver_sql("INSERT INTO record_blocks (id, data) VALUES (?, ?)", rows)
        return ids
    statement = record_blocks.insert().returning(record_blocks.c.id, sort_by_parameter_order=True)
    return list(connection.execute(statement, [{"data": block} for block in blocks]).scalars())


def record_line(connection: Connection, row: Any) -> bytes:
    """The record line of an ``outcome_details`` row (``record``, ``block``,
    ``block_start`` and ``block_length`` selected)."""
    if row.block is None:  # stored before version 3: compressed on its own
        return zlib.decompress(row.record)
    data = connection.execute(
        select(record_blocks.c.data).where(record_blocks.c.id == row.block)
    ).scalar_one()
    return _slice(zlib.decompress(data), row.block_start, row.block_length)


def _slice(block: bytes, start: int, length: int) -> bytes:
    return block[start : start + length]


class LineReader:
    """Reads the record lines of many outcomes in the order they were stored, keeping the
    last block read, so a run's records cost one decompression per block."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._block_id: int | None = None
        self._block = b""

    def line(self, row: Any) -> bytes:
        """The record line of an ``outcome_details`` row (as for :func:`record_line`)."""
        if row.block is None:
            return zlib.decompress(row.record)
        if row.block != self._block_id:
            data = self._connection.execute(
                select(record_blocks.c.data).where(record_blocks.c.id == row.block)
            ).scalar_one()
            self._block_id, self._block = row.block, zlib.decompress(data)
        return _slice(self._block, row.block_start, row.block_length)
