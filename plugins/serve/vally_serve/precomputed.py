"""Answers computed once from a run's running sums and kept in ``analyses``: an
experiment's comparison of its variants with the baseline.

The ingest computes it after each folder it wrote (where scipy's import and the sign-flip
tests cost seconds once); the endpoint then reads one row. Each answer carries the
*stamp* of the sums it was computed from (how many cells, trials, graded, passed and
errored trials, and the score sum); a request whose run no longer has that stamp (another
ingest added to it, or the store predates the table's rows) computes the answer again and
keeps it in this process's memory under the new stamp, so it pays once.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, func, select

from vally_serve.schema import analyses, cells

EXPERIMENT = "experiment"

_MEMORY: dict[tuple[str, str, str], tuple[str, dict[str, Any]]] = {}
"""Answers computed by requests, by (store, run, name): the stamp and the answer."""
_LOCK = threading.Lock()
MEMORY_ENTRIES = 256
"""Answers kept in memory at most (the oldest is dropped first)."""


def stamp(connection: Connection, run_id: str) -> str:
    """The state of the run's running sums, as text: it changes whenever an outcome is
    added to the run."""
    c = cells.c
    row = connection.execute(
        select(
            func.count(),
            func.sum(c.trials),
            func.sum(c.graded),
            func.sum(c.passed),
            func.sum(c.errored),
            func.sum(c.score_sum),
        ).where(c.run_id == run_id)
    ).one()
    return ":".join("0" if v is None else repr(round(float(v), 9)) for v in row)


def stored(connection: Connection, run_id: str, name: str, current: str) -> dict[str, Any] | None:
    """The answer ``name`` of the run computed from sums of stamp ``current``, from the
    store or this process's memory; None when there is none."""
    a = analyses.c
    row = connection.execute(
        select(a.stamp, a.body).where(a.run_id == run_id, a.name == name)
    ).one_or_none()
    if row is not None and row.stamp == current:
        body: dict[str, Any] = json.loads(row.body)
        return body
    with _LOCK:
        kept = _MEMORY.get((_store_of(connection), run_id, name))
    return kept[1] if kept is not None and kept[0] == current else None


def _store_of(connection: Connection) -> str:
    return connection.engine.url.render_as_string(hide_password=True)


def remember(
    connection: Connection, run_id: str, name: str, current: str, body: dict[str, Any]
) -> None:
    """Keep ``body`` in this process's memory as the answer for stamp ``current`` of the
    run in the store of ``connection``."""
    key = (_store_of(connection), run_id, name)
    with _LOCK:
        _MEMORY.pop(key, None)
        _MEMORY[key] = (current, body)
        while len(_MEMORY) > MEMORY_ENTRIES:
            del _MEMORY[next(iter(_MEMORY))]


def cached(
    connection: Connection, run_id: str, name: str, compute: Callable[[], dict[str, Any]]
) -> dict[str, Any]:
    """The answer ``name`` of the run: stored or remembered for its current sums, else
    computed by ``compute`` and remembered."""
    current = stamp(connection, run_id)
    body = stored(connection, run_id, name, current)
    if body is None:
        body = compute()
        remember(connection, run_id, name, current, body)
    return body


def store_answer(
    connection: Connection, insert: Any, run_id: str, name: str, body: dict[str, Any]
) -> None:
    """Write ``body`` as the run's answer ``name`` for its current sums (replacing an
    older one); ``insert`` is the dialect's ``insert``."""
    current = stamp(connection, run_id)
    statement = insert(analyses).values(
        run_id=run_id, name=name, stamp=current, body=json.dumps(body)
    )
    connection.execute(
        statement.on_conflict_do_update(
            index_elements=["run_id", "name"],
            set_={"stamp": statement.excluded.stamp, "body": statement.excluded.body},
        )
    )
