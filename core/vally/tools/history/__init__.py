"""The run history: a store of ingested runs, the ingest that fills it, and the read-only
queries, REST API and dashboard that ``vally serve`` offers over it.

Modules, one concept each:

* :mod:`~vally.tools.history.schema`: the tables (SQLAlchemy Core) and the schema version;
* :mod:`~vally.tools.history.store`: opening a store (a SQLite file, an in-memory SQLite
  database or a PostgreSQL URL), creating and migrating its schema;
* :mod:`~vally.tools.history.runfiles`: finding run folders and reading their JSONL files
  tolerantly (a torn or invalid line is reported with ``file:line`` and skipped);
* :mod:`~vally.tools.history.rows`: one trial record as the rows of the store;
* :mod:`~vally.tools.history.ingest`: loading run folders into a store, idempotently;
* :mod:`~vally.tools.history.queries` and its siblings: the reads behind every endpoint;
* :mod:`~vally.tools.history.api`: the REST API and the dashboard (a Starlette app);
* :mod:`~vally.tools.history.server`: binding a socket and serving the app.

SQLAlchemy, the PostgreSQL driver, Starlette and uvicorn come with the ``serve`` extra
(``pip install 'vally[serve]'``); they are imported on first use, so the rest of vally
works without them.
"""
