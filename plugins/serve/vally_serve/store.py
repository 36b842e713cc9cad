"""Opening a history store: a SQLite file (the default), an in-memory SQLite database, or a
PostgreSQL server, all through one SQLAlchemy engine.

SQLite stores use WAL, so a reader never blocks an ingest, and write transactions start
with ``BEGIN IMMEDIATE``, so concurrent ingests from several processes queue on the lock
(``busy_timeout``) instead of failing half-way. PostgreSQL stores serialise schema creation
with an advisory lock. The schema is created when missing and migrated when older; a store
written by a newer vally is refused.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, insert, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from vally import ConfigError
from vally_serve import schema
from vally_serve.migrations import to_version_2, to_version_3

POSTGRES_SCHEMES = ("postgresql://", "postgres://", "postgresql+psycopg://")
"""Store targets that name a PostgreSQL server; anything else is a SQLite file path."""

BUSY_TIMEOUT_MS = 120_000
"""How long a SQLite writer waits for another process's write transaction."""

READ_ONLY = "vally_read_only"
"""Execution option of the connections :meth:`Store.read` hands out."""

BULK_CACHE_KB = 32 * 1024
"""SQLite page cache of each connection of a store opened for a bulk load (``vally
ingest``): the outcomes' id indexes are written in random order, and a run of 10^5
outcomes keeps them in about 15 MB (SQLite's default cache is 2 MB)."""
BULK_CHECKPOINT_PAGES = 8000
"""WAL pages (4 KB) after which a bulk load's commit copies the WAL into the database
(SQLite's default is 1,000): a page written by many transactions is copied once."""

_ADVISORY_LOCK = 0x5641_4C4C  # "VALL": serialises schema creation on PostgreSQL

Migration = Callable[[Connection], None]

MIGRATIONS: dict[int, Migration] = {2: to_version_2, 3: to_version_3}
"""Steps from version ``n - 1`` to ``n`` (version 1 is created whole by ``create_all``)."""


class StoreError(ConfigError):
    """The history store cannot be opened, created or used."""

    code = "VALLY_STORE"


@dataclass
class Store:
    """An open history store.

    Attributes:
        engine: The SQLAlchemy engine.
        target: What the user named (a path or a URL without its password).
        dialect: ``sqlite`` or ``postgresql``.
    """

    engine: Engine
    target: str
    dialect: str
    _keeper: Connection | None = field(default=None, repr=False)

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A connection for reading (one transaction, so a page sees one state)."""
        with self.engine.connect() as connection:
            connection = connection.execution_options(**{READ_ONLY: True})
            with connection.begin():
                yield connection

    def close(self) -> None:
        """Release every connection (an in-memory store is gone afterwards)."""
        if self._keeper is not None:
            self._keeper.close()
            self._keeper = None
        self.engine.dispose()


def is_postgres(target: str) -> bool:
    """True when ``target`` is a PostgreSQL URL."""
    return target.startswith(POSTGRES_SCHEMES)


def open_store(target: str, *, create: bool = True, bulk: bool = False) -> Store:
    """Open the store at ``target`` (a SQLite file path or a PostgreSQL URL).

    Args:
        target: The ``--store`` value.
        create: Create the file and schema when missing; with False a missing SQLite file
            is an error (``vally serve --store`` reads an existing store).
        bulk: Set up a SQLite store's connections for writing many outcomes (a larger page
            cache, :data:`BULK_CACHE_KB`, and fewer WAL checkpoints,
            :data:`BULK_CHECKPOINT_PAGES`); what is stored, and how safely, is the same.

    Raises:
        StoreError: The store cannot be reached, is not a vally store, or is too new.
    """
    if is_postgres(target):
        url = "postgresql+psycopg://" + target.split("://", 1)[1]
        engine = create_engine(url, pool_pre_ping=True, pool_size=4, max_overflow=4)
        store = Store(engine, _hide_password(target), "postgresql")
    else:
        path = Path(target).expanduser()
        if not create and not path.is_file():
            raise StoreError(
                f"no history store at {path}",
                hint="create one with: vally ingest <run-dir> --store " + target,
            )
        if path.exists() and not path.is_file():
            raise StoreError(f"the store {path} is not a file", hint="pass a file path")
        path.parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(f"sqlite:///{path}", pool_size=8, max_overflow=8)
        _configure_sqlite(engine, wal=True, bulk=bulk)
        store = Store(engine, str(path), "sqlite")
    _prepare(store)
    return store


def memory_store() -> Store:
    """A private in-memory SQLite store (``vally serve <dir>`` without ``--store``).

    It lives as long as the returned store is open, and is shared by every connection of
    its engine (one per thread).
    """
    name = f"vally-{uuid.uuid4().hex}"
    engine = create_engine(
        f"sqlite:///file:{name}?mode=memory&cache=shared&uri=true", poolclass=NullPool
    )
    _configure_sqlite(engine, wal=False)
    store = Store(engine, ":memory:", "sqlite")
    store._keeper = engine.connect()
    _prepare(store)
    return store


def _use_wal(cursor: Any) -> None:
    """Put the database in WAL mode (kept in the file: a database already in it is left
    as it is). Switching needs the database to itself, and SQLite answers "locked" at once,
    without waiting, when another connection opens it at that moment; the switch is then
    tried again until :data:`BUSY_TIMEOUT_MS` passed.

    Raises:
        sqlite3.OperationalError: The database stayed locked, or another error.
    """
    if str(cursor.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
        return
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    pause = 0.005
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.2)


def _configure_sqlite(engine: Engine, *, wal: bool, bulk: bool = False) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # transactions are begun below
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        if wal:
            _use_wal(cursor)
            cursor.execute("PRAGMA synchronous=NORMAL")
        if bulk:
            cursor.execute(f"PRAGMA cache_size=-{BULK_CACHE_KB}")
            if wal:
                cursor.execute(f"PRAGMA wal_autocheckpoint={BULK_CHECKPOINT_PAGES}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        # Writers take the lock up front, so two ingests never deadlock on an upgrade;
        # readers (the server) begin deferred and never block a writer (WAL).
        read_only = connection.get_execution_options().get(READ_ONLY, False)
        connection.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")


def _prepare(store: Store) -> None:
    """Create the schema when missing, migrate it when older, refuse it when newer."""
    try:
        with store.engine.begin() as connection:
            if store.dialect == "postgresql":
                connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_ADVISORY_LOCK})")
            schema.metadata.create_all(connection, tables=[schema.meta], checkfirst=True)
            found = connection.execute(
                select(schema.meta.c.value).where(schema.meta.c.key == "schema_version")
            ).scalar_one_or_none()
            _migrate(connection, store, None if found is None else int(found))
    except SQLAlchemyError as exc:
        raise StoreError(
            f"cannot open the history store {store.target}: {_reason(exc)}",
            hint="check the path or URL, that the server runs and that you may write there",
        ) from exc


def _migrate(connection: Connection, store: Store, version: int | None) -> None:
    if version is not None and version > schema.SCHEMA_VERSION:
        raise StoreError(
            f"the history store {store.target} has schema version {version}, newer than "
            f"this vally's ({schema.SCHEMA_VERSION})",
            hint="upgrade vally, or use another store",
        )
    if version is None:
        schema.metadata.create_all(connection, checkfirst=True)
        connection.execute(
            insert(schema.meta).values(key="schema_version", value=str(schema.SCHEMA_VERSION))
        )
        return
    for step in range(version + 1, schema.SCHEMA_VERSION + 1):
        MIGRATIONS[step](connection)
    if version < schema.SCHEMA_VERSION:
        connection.execute(
            schema.meta.update()
            .where(schema.meta.c.key == "schema_version")
            .values(value=str(schema.SCHEMA_VERSION))
        )


def _hide_password(url: str) -> str:
    scheme, rest = url.split("://", 1)
    if "@" in rest:
        credentials, host = rest.rsplit("@", 1)
        user = credentials.split(":", 1)[0]
        return f"{scheme}://{user}@{host}"
    return url


def _reason(exc: SQLAlchemyError) -> str:
    original = getattr(exc, "orig", None)
    text = str(original if original is not None else exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
