"""``vally ingest`` and ``vally serve`` as library calls; the CLI only parses and prints.

Every function here checks for the ``serve`` extra first, so a missing dependency is one
clear error naming the extra, not an ImportError.
"""

from __future__ import annotations

import gc
import socket
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vally import ConfigError
from vally_serve.deps import require

if TYPE_CHECKING:
    from vally_serve.ingest import IngestReport
    from vally_serve.store import Store


class NoRunsError(ConfigError):
    """No run was found where the user pointed (``ingest``/``serve`` exit 1)."""

    code = "VALLY_NO_RUNS"


def _require_store(target: str | None) -> None:
    require("sqlalchemy", "the history store")
    if target is not None and target.startswith(("postgresql://", "postgres://")):
        require("psycopg", "a PostgreSQL history store")


def ingest_runs(
    paths: list[Path], store_target: str, progress: Callable[[Any], None] | None = None
) -> IngestReport:
    """Ingest the run folders at or below ``paths`` into the store at ``store_target``.

    Raises:
        NoRunsError: No run was found (nothing was written but the empty schema).
        StoreError: The store cannot be opened or written.
    """
    _check_paths(paths)
    _require_store(store_target)
    from vally_serve.ingest import ingest
    from vally_serve.store import open_store

    store = open_store(store_target, bulk=True)
    try:
        with _objects_so_far_frozen(), _collected_per_batch() as collect:
            report = ingest(store, paths, progress=partial(_collect_then, collect, progress))
    finally:
        store.close()
    if not report.runs:
        raise NoRunsError(_no_runs_message(paths), hint=_NO_RUNS_HINT)
    return report


@contextmanager
def _collected_per_batch() -> Iterator[Callable[[], object]]:
    """Switch the collector's automatic runs off while the block runs and give it a call
    that collects once: the ingest calls it after each batch it writes. A batch allocates
    thousands of containers that live until it is written (parsed records, rows), which
    the automatic young-generation runs walked again and again; a collection per batch
    still frees any cycle a batch left, so the memory stays that of one batch."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield gc.collect
    finally:
        if enabled:
            gc.enable()


def _collect_then(
    collect: Callable[[], object], progress: Callable[[Any], None] | None, report: Any
) -> None:
    """Collect once, then report the progress (when asked to)."""
    collect()
    if progress is not None:
        progress(report)


@contextmanager
def _objects_so_far_frozen() -> Iterator[None]:
    """Keep the objects alive so far (the modules, the store) out of the garbage
    collector's walks while the block runs: its full collections then walk only what the
    block allocates (``gc.freeze``; undone afterwards unless something was frozen before)."""
    frozen_before = gc.get_freeze_count()
    gc.freeze()
    try:
        yield
    finally:
        if not frozen_before:
            gc.unfreeze()


def _check_paths(paths: list[Path]) -> None:
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise ConfigError(
            f"no such file or folder: {', '.join(missing)}",
            hint="pass run folders, experiment folders or the output folder holding them",
        )


_NO_RUNS_HINT = (
    "point at a run folder (with results.jsonl or run-summary.jsonl), an experiment folder, "
    "or the output folder holding them (vally-results/)"
)


def _no_runs_message(paths: list[Path]) -> str:
    shown = ", ".join(str(p) for p in paths)
    return f"no vally run found in {shown}"


MIN_TOKEN_CHARS = 16
"""The shortest access token accepted (a guessable one protects nothing)."""
MAX_TOKEN_CHARS = 512


def check_token(token: str | None) -> str | None:
    """The access token to require (None when none was given).

    Raises:
        ConfigError: The token is too short or long, or holds a character that is not
            printable ASCII or is a space (it travels in headers and cookies).
    """
    if token is None or token == "":
        return None
    printable = all(33 <= ord(char) <= 126 for char in token)
    if not printable or not MIN_TOKEN_CHARS <= len(token) <= MAX_TOKEN_CHARS:
        raise ConfigError(
            f"the access token must be {MIN_TOKEN_CHARS} to {MAX_TOKEN_CHARS} printable "
            "ASCII characters without spaces",
            hint='make one with: python -c "import secrets; print(secrets.token_urlsafe())"',
        )
    return token


@dataclass
class ServeSession:
    """Everything ``vally serve`` prepared: the bound socket, the store, the app."""

    sock: socket.socket
    store: Store
    app: Any
    runs: int
    outcomes: int
    report: IngestReport | None
    exposed: bool = False
    """The server listens beyond this machine's loopback interface."""
    token_required: bool = False

    @property
    def url(self) -> str:
        """Where the dashboard is."""
        from vally_serve.server import url_of

        return url_of(self.sock)

    def run(self) -> None:
        """Serve until interrupted, then release the store."""
        from vally_serve.server import run

        try:
            run(self.app, self.sock)
        finally:
            self.store.close()


def prepare_serve(
    directory: Path | None,
    store_target: str | None,
    *,
    host: str,
    port: int,
    cors: bool,
    allowed_hosts: Sequence[str] = (),
    token: str | None = None,
) -> ServeSession:
    """Bind ``host:port``, open the store (in memory when ``store_target`` is None), ingest
    ``directory`` into it when given, and build the app.

    Args:
        directory: A results folder to serve (or ingest into the store first).
        store_target: A store to serve (a SQLite path or a PostgreSQL URL).
        host: The address to listen on.
        port: The port (0: any free one).
        cors: Allow cross-origin ``GET`` requests.
        allowed_hosts: Host names to answer to besides loopback and ``host``.
        token: An access token every request must carry, or None.

    Raises:
        ConfigError: Neither a directory nor a store, a bad port or token, a missing extra.
        NoRunsError: Nothing to serve.
        StoreError: The store cannot be opened.
    """
    if directory is None and store_target is None:
        raise ConfigError(
            "vally serve needs a results folder, a --store, or both",
            hint="vally serve ./vally-results, or vally serve --store history.db",
        )
    if directory is not None:
        _check_paths([directory])
    token = check_token(token)
    _require_store(store_target)
    require("starlette", "vally serve")
    require("uvicorn", "vally serve")
    from vally_serve.access import AccessPolicy, is_loopback
    from vally_serve.api import create_app
    from vally_serve.ingest import ingest
    from vally_serve.runqueries import totals
    from vally_serve.server import bind
    from vally_serve.store import memory_store, open_store

    sock = bind(host, port)
    store: Store | None = None
    try:
        if store_target is None:
            store = memory_store()
        else:
            store = open_store(store_target, create=directory is not None)
        report = ingest(store, [directory]) if directory is not None else None
        with store.read() as connection:
            runs, outcomes = totals(connection)
        if runs == 0:
            where = [directory] if directory is not None else [Path(store.target)]
            raise NoRunsError(_no_runs_message(where), hint=_NO_RUNS_HINT)
        policy = AccessPolicy.for_bind(host, allowed_hosts=allowed_hosts, token=token)
        app = create_app(store, cors=cors, access=policy)
        exposed = not is_loopback(str(sock.getsockname()[0]))
        return ServeSession(sock, store, app, runs, outcomes, report, exposed, token is not None)
    except BaseException:
        sock.close()
        if store is not None:
            store.close()
        raise
