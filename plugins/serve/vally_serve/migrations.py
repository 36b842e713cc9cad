"""Steps that bring a store made by an older vally to the current schema, each in the
transaction that opens the store (:func:`vally_serve.store.open_store`).

Version 2 adds what the outcome filters ``?error=`` and ``?grader=`` search (two columns
of ``outcomes``, filled from the stored records) and the ``analyses`` table of answers
computed at ingest. Version 3 keeps new record lines in compressed blocks
(``record_blocks``, :mod:`vally_serve.recordblocks`): three columns of ``outcome_details``
say where each line is; the records stored before stay as they are, each compressed on
its own, and are read as before.
"""

from __future__ import annotations

import json
import zlib

from sqlalchemy import Connection, select, update

from vally_serve import schema
from vally_serve.rows import error_text, grader_verdicts

BACKFILL_BATCH = 2000
"""Outcomes read and updated at a time while filling the new columns."""


def to_version_2(connection: Connection) -> None:
    """Add ``outcomes.error_text`` and ``outcomes.grader_verdicts``, fill them from each
    outcome's stored record, and create ``analyses``."""
    for column in ("error_text", "grader_verdicts"):
        connection.exec_driver_sql(f"ALTER TABLE outcomes ADD COLUMN {column} TEXT")
    schema.metadata.create_all(connection, tables=[schema.analyses], checkfirst=True)
    o, d = schema.outcomes.c, schema.outcome_details.c
    last = -1
    while True:
        rows = connection.execute(
            select(o.seq, d.record)
            .join(schema.outcome_details, d.outcome_id == o.id)
            .where(o.seq > last)
            .order_by(o.seq)
            .limit(BACKFILL_BATCH)
        ).all()
        if not rows:
            return
        for seq, record in rows:
            data = json.loads(zlib.decompress(record))
            grade = data.get("gradeResult") if isinstance(data, dict) else None
            if not isinstance(data, dict):
                continue
            connection.execute(
                update(schema.outcomes)
                .where(o.seq == seq)
                .values(
                    error_text=error_text(data),
                    grader_verdicts=grader_verdicts(grade if isinstance(grade, dict) else None),
                )
            )
        last = rows[-1][0]


def to_version_3(connection: Connection) -> None:
    """Add ``record_blocks`` and the columns of ``outcome_details`` that point into it
    (nothing stored is rewritten)."""
    for column in ("block", "block_start", "block_length"):
        connection.exec_driver_sql(f"ALTER TABLE outcome_details ADD COLUMN {column} INTEGER")
    schema.metadata.create_all(connection, tables=[schema.record_blocks], checkfirst=True)
