"""vally's run history: a store of ingested runs, the ingest that fills it, and the read-only
queries, REST API and dashboard that ``vally serve`` offers over it.

A package outside the kernel, like any third-party one: it imports only the public ``vally``
API (and the top-level API of ``vally_compare``, for the comparison figures), and its two
commands (``vally ingest``, ``vally serve``) are ``vally.cli`` entry points
(:mod:`~vally_serve.cli`). Modules, one concept each:

* :mod:`~vally_serve.schema`: the tables (SQLAlchemy Core) and the schema version;
* :mod:`~vally_serve.store`: opening a store (a SQLite file, an in-memory SQLite
  database or a PostgreSQL URL), creating and migrating its schema;
* :mod:`~vally_serve.runfiles`: finding run folders and reading their JSONL files
  tolerantly (a torn or invalid line is reported with ``file:line`` and skipped);
* :mod:`~vally_serve.trialdirs`: a trial's folder and what the store keeps from it;
* :mod:`~vally_serve.storable`: which values of a record the columns can hold, and what
  to tell the user of those they cannot;
* :mod:`~vally_serve.rows`: one trial record as the rows of the store;
* :mod:`~vally_serve.writes`: transactions that insert each outcome exactly once, tried
  again on conflicts, with the records the store refuses set aside;
* :mod:`~vally_serve.ingest`: loading run folders into a store, idempotently;
* :mod:`~vally_serve.pagination` and :mod:`~vally_serve.metrics`: cursor pages and the
  metrics every list can aggregate;
* :mod:`~vally_serve.runqueries`, :mod:`~vally_serve.outcomequeries`,
  :mod:`~vally_serve.analysis` and :mod:`~vally_serve.crossrun`: the reads behind the
  endpoints (runs; outcomes; one run's matrix, ranking, graders and tools; comparisons and
  history across runs);
* :mod:`~vally_serve.graded`: two runs' stored records streamed into the judge-free
  comparison of graded runs of ``vally_compare`` (``/api/compare/graded``);
* :mod:`~vally_serve.access`: the ``Host`` check (DNS rebinding) and the access token;
* :mod:`~vally_serve.api` and :mod:`~vally_serve.openapi`: the REST API (one table of
  endpoints), its OpenAPI document and the dashboard (a Starlette app; the dashboard's
  files are in ``dashboard/``);
* :mod:`~vally_serve.deadlines`: deadlines on the phases of a connection (half-sent
  requests);
* :mod:`~vally_serve.server`: binding a socket and serving the app;
* :mod:`~vally_serve.service`: ``ingest`` and ``serve`` as library calls;
* :mod:`~vally_serve.cli`: the two commands.

SQLAlchemy, the PostgreSQL driver, Starlette and uvicorn come with the ``serve`` extra
(``pip install 'vally[serve]'``); they are imported on first use (:mod:`~vally_serve.deps`),
so the commands are listed, and say which extra to install, without them.
"""
