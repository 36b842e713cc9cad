"""Writing outcomes into the store: each batch is one transaction that inserts every
outcome exactly once, however many ingests write the same run at the same moment, and a
record the store refuses is set aside without losing the rest of its batch.

* **Exactly once.** Outcomes are inserted with "insert unless present" on their id
  (``ON CONFLICT DO NOTHING ... RETURNING id``), in the order of the file (the order the
  store keeps): an outcome another ingest inserted first, committed or not, is waited for
  and then left alone, and only the outcomes this transaction inserted get their details
  and add to the running sums, in the same transaction. When the database picks a
  deadlock victim (two ingests of copies that list the same trials in different orders)
  or a SQLite writer gives up waiting for the lock, the whole transaction is rolled back
  and tried again (:func:`in_transaction`).
* **One record never sinks a batch.** :mod:`.storable` keeps out what the columns cannot
  hold, so the store refuses a record only for a reason no check foresaw (PostgreSQL's
  limit on the size of an index entry, say). Then the batch is written record by record
  and each refused record is returned with the database's reason, to be reported with
  its ``file:line``. An error of the store itself (it is down, full, read-only) is not a
  record's fault and is raised.
"""

from __future__ import annotations

import random
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from sqlalchemy import Connection, select
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, SQLAlchemyError

from vally_serve import schema
from vally_serve.recordblocks import Place, write_lines
from vally_serve.rows import OutcomeRow, OutcomeRows, Row, Sums, sums_of
from vally_serve.store import Store

RETRIES = 12
"""Attempts of one transaction that a concurrent writer made fail (a deadlock victim)."""
BACKOFF_S = 0.02
"""The first pause before trying again; it doubles (with jitter) up to a second."""

_CONFLICT_STATES = frozenset({"40001", "40P01", "55P03", "23505"})
"""PostgreSQL errors caused by another transaction: serialization failure, deadlock, lock
not available, unique violation (a race the statements are built to avoid)."""
_RECORD_STATES = frozenset({"23502", "23514", "54000"})
"""PostgreSQL errors caused by one record's values (besides every data exception, class
22): a null or check violation, a value too large for an index entry."""

T = TypeVar("T")


@dataclass(frozen=True)
class Refusal:
    """A record the store refused, and the database's reason."""

    rows: OutcomeRows
    reason: str


def dialect_insert(store: Store) -> Any:
    """The ``insert`` of the store's dialect (it has ``on_conflict_do_*``)."""
    if store.dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert


def in_transaction(store: Store, work: Callable[[Connection], T]) -> T:
    """``work`` in one write transaction, rolled back and run again (up to
    :data:`RETRIES` times) when a concurrent writer made it fail.

    Raises:
        SQLAlchemyError: Any other failure, or the last conflict.
    """
    for attempt in range(RETRIES):
        try:
            with store.engine.begin() as connection:
                return work(connection)
        except DBAPIError as exc:
            if not is_conflict(exc) or attempt == RETRIES - 1:
                raise
        pause = min(BACKOFF_S * 2**attempt, 1.0)
        time.sleep(pause * random.uniform(0.5, 1.5))
    raise AssertionError("unreachable")  # pragma: no cover


def is_conflict(exc: DBAPIError) -> bool:
    """True when ``exc`` came from another transaction (trying again can succeed)."""
    original = exc.orig
    state = getattr(original, "sqlstate", None)
    if state is not None:
        return state in _CONFLICT_STATES
    text = str(original).lower()
    return "database is locked" in text or "database is busy" in text


def is_record_fault(exc: BaseException) -> bool:
    """True when ``exc`` came from the values of the records written (another record
    could be written), not from the store or the connection."""
    if isinstance(exc, OverflowError | UnicodeError):  # a value the driver cannot send
        return True
    if not isinstance(exc, DBAPIError):
        return False
    original = exc.orig
    state = getattr(original, "sqlstate", None)
    if state is not None:
        return state.startswith("22") or state in _RECORD_STATES
    if isinstance(exc, DataError):  # the driver refused a value (a NUL for PostgreSQL)
        return True
    text = str(original)
    if isinstance(exc, IntegrityError):  # SQLite: NOT NULL or CHECK failed
        return "NOT NULL" in text or "CHECK" in text
    return text.startswith(("Error binding parameter", "cannot adapt type"))


def reason_of(exc: BaseException) -> str:
    """The first line of the database's message for ``exc`` (without the statement)."""
    original = getattr(exc, "orig", None) or exc
    lines = str(original).strip().splitlines()
    return lines[0] if lines else type(original).__name__


@dataclass(frozen=True)
class Written:
    """What :func:`write_outcomes` did with a batch.

    Attributes:
        added: Outcomes inserted (new to the store).
        refused: The records the store refused, with its reasons.
        outcomes: Distinct outcomes in the batch (a trial read twice counts once).
    """

    added: int
    refused: list[Refusal]
    outcomes: int


def write_outcomes(
    store: Store,
    batch: Sequence[OutcomeRows],
    runs: Mapping[str, Row],
    prepare: Callable[[OutcomeRows], None] | None,
    *,
    look_first: bool = True,
) -> Written:
    """Insert the outcomes of ``batch`` that the store does not hold yet.

    Args:
        store: The open store.
        batch: The records' rows (a trial read more than once is written once: the rows
            of its last record, in the place of its first).
        runs: The ``runs`` row of every run of the batch, by run id (inserted when
            missing, so the outcomes' run exists).
        prepare: Completes the rows of an outcome about to be inserted (its trial
            folder); called once per outcome not yet in the store (with ``look_first``
            False, once per outcome of the batch). None when there is nothing to add.
        look_first: Ask the store which outcomes it holds before preparing the others;
            without it every outcome is prepared and the insert alone leaves out those
            present (cheaper when the store is not expected to hold any).

    Returns:
        How many outcomes were added and of how many, and the records the store refused.

    Raises:
        SQLAlchemyError: The store failed (not because of a record's values).
    """
    unique = list({b.outcome.id: b for b in batch}.values())
    if not unique:
        return Written(0, [], 0)
    present: set[str] = set()
    if look_first:
        with store.read() as connection:
            present = set(
                connection.execute(
                    select(schema.outcomes.c.id).where(
                        schema.outcomes.c.id.in_([b.outcome.id for b in unique])
                    )
                ).scalars()
            )
    fresh = [b for b in unique if b.outcome.id not in present] if present else unique
    if not fresh:
        return Written(0, [], len(unique))
    if prepare is not None:
        for rows in fresh:
            prepare(rows)
    try:
        added = in_transaction(store, partial(_insert, store, fresh, runs))
        return Written(added, [], len(unique))
    except (SQLAlchemyError, OverflowError, UnicodeError) as exc:
        if not is_record_fault(exc):
            raise
    added, refused = 0, []
    for rows in fresh:  # find the records the store refuses; write the others
        run_id = rows.outcome.run_id
        try:
            added += in_transaction(store, partial(_insert, store, [rows], {run_id: runs[run_id]}))
        except (SQLAlchemyError, OverflowError, UnicodeError) as exc:
            if not is_record_fault(exc):
                raise
            refused.append(Refusal(rows, reason_of(exc)))
    return Written(added, refused, len(unique))


EVENTS_LEVEL = 1
"""zlib level of a trial folder's events."""


def _insert(
    store: Store,
    batch: list[OutcomeRows],
    runs: Mapping[str, Row],
    connection: Connection,
) -> int:
    """Insert ``batch`` unless present (and the ``runs`` rows of its runs, unless present);
    the details and sums of the outcomes this transaction inserted. Returns how many it
    inserted."""
    insert = dialect_insert(store)
    connection.execute(
        insert(schema.runs).on_conflict_do_nothing(), [runs[r] for r in sorted(runs)]
    )
    fresh = _insert_outcomes(connection, store, batch)
    if not fresh:
        return 0
    places = write_lines(connection, [b.record for b in fresh])
    _insert_details(connection, store, fresh, places)
    for sums in sums_of(fresh):
        _add_sums(connection, store, sums)
    return len(fresh)


def _insert_details(
    connection: Connection, store: Store, batch: list[OutcomeRows], places: list[Place]
) -> None:
    """Insert the ``outcome_details`` rows of ``batch``, whose record lines are at
    ``places``, by the driver's executemany.

    Values the same for every row are written into the statement rather than bound to
    each row: ``record`` is always empty (the line is in its block), and the trial
    folder's columns are NULL for every row of a batch without trial folders. (SQLite's
    driver binds a NULL or a bytes value through its adapter lookup, which costs about
    as much as building the rest of the row.)
    """
    sqlite = store.dialect == "sqlite"
    mark = "?" if sqlite else "%s"
    rows: list[tuple[Any, ...]]
    if any(b.trial_dir is not None or b.events is not None for b in batch):
        folder_values = f"{mark}, {mark}, {mark}"  # events, artifacts, trial_dir
        rows = [
            (
                b.outcome.id,
                None if b.events is None else zlib.compress(b.events.encode(), EVENTS_LEVEL),
                b.artifacts,
                b.trial_dir,
                *place,
            )
            for b, place in zip(batch, places, strict=True)
        ]
    else:
        folder_values = f"NULL, {mark}, NULL"
        rows = [(b.outcome.id, b.artifacts, *place) for b, place in zip(batch, places, strict=True)]
    empty = "X''" if sqlite else "''::bytea"
    connection.exec_driver_sql(
        "INSERT INTO outcome_details (outcome_id, record, events, artifacts, trial_dir, "
        f"block, block_start, block_length) VALUES ({mark}, {empty}, {folder_values}, "
        f"{mark}, {mark}, {mark})",
        rows,
    )


OUTCOME_COLUMNS = OutcomeRow._fields
"""The columns of ``outcomes`` an outcome row sets, in its order (``seq`` is the
database's)."""
_MOSTLY_EMPTY = ("error_code", "error_text")
"""Text columns of ``outcomes`` that most outcomes leave NULL (those without an error)."""
_SQLITE_OUTCOMES = (
    f"INSERT INTO outcomes ({', '.join(OUTCOME_COLUMNS)}) VALUES ("
    + ", ".join("NULLIF(?, 0)" if name in _MOSTLY_EMPTY else "?" for name in OUTCOME_COLUMNS)
    + ") ON CONFLICT DO NOTHING"
)
"""The outcomes insert of SQLite: a column of :data:`_MOSTLY_EMPTY` is sent as the number 0
when NULL (SQLite's driver binds a number directly, and None through its adapter lookup,
about 3k instructions), and ``NULLIF(?, 0)`` stores NULL for it: a text never equals a
number in SQLite, so a text value is stored as sent."""
_ERROR_CODE = OUTCOME_COLUMNS.index("error_code")
assert OUTCOME_COLUMNS[_ERROR_CODE:] == ("error_code", "tags", "error_text", "grader_verdicts")


def _sqlite_values(o: OutcomeRow) -> tuple[Any, ...]:
    """The values :data:`_SQLITE_OUTCOMES` binds for the outcome ``o``, as a plain tuple
    (the driver reads a tuple subclass's items one call at a time)."""
    code, text = o.error_code, o.error_text
    return (
        *o[:_ERROR_CODE],
        0 if code is None else code,
        o.tags,
        0 if text is None else text,
        o.grader_verdicts,
    )


def _insert_outcomes(
    connection: Connection, store: Store, batch: list[OutcomeRows]
) -> list[OutcomeRows]:
    """Insert the outcomes of ``batch`` that are not in the store; returns those inserted.

    On PostgreSQL, "insert unless present" returns the ids it inserted (an outcome another
    transaction is inserting is waited for, then left alone). A SQLite write transaction
    holds the database's write lock from its start, so no other writer can insert between
    reading which ids are present and inserting the others by the driver's executemany.
    """
    table = schema.outcomes
    if store.dialect != "sqlite":
        statement = dialect_insert(store)(table).on_conflict_do_nothing().returning(table.c.id)
        inserted = set(
            connection.execute(statement, [b.outcome._asdict() for b in batch]).scalars()
        )
        return [b for b in batch if b.outcome.id in inserted]
    before = connection.exec_driver_sql("SELECT max(seq) FROM outcomes").scalar()
    added = connection.exec_driver_sql(
        _SQLITE_OUTCOMES, [_sqlite_values(b.outcome) for b in batch]
    ).rowcount
    if added == len(batch):
        return batch
    new = set(  # the rows this transaction added are those after the last one before it
        connection.execute(select(table.c.id).where(table.c.seq > (before or 0))).scalars()
    )
    return [b for b in batch if b.outcome.id in new]


def _add_sums(connection: Connection, store: Store, sums: Sums) -> None:
    """Add the rows of ``sums`` to their table's running sums (insert, or add to the stored
    row), by the driver's executemany."""
    if not sums.rows:
        return
    columns = (*sums.key, *sums.sums)
    mark = "?" if store.dialect == "sqlite" else "%s"
    added = ", ".join(f"{name} = {sums.table.name}.{name} + excluded.{name}" for name in sums.sums)
    connection.exec_driver_sql(
        f"INSERT INTO {sums.table.name} ({', '.join(columns)}) "
        f"VALUES ({', '.join([mark] * len(columns))}) "
        f"ON CONFLICT ({', '.join(sums.key)}) DO UPDATE SET {added}",
        sums.rows,
    )
