"""The tables of the history store (SQLAlchemy Core), shared by SQLite and PostgreSQL.

One row per run (``runs``), per eval summary (``run_summaries``) and per trial
(``outcomes``); the full record of a trial, unknown fields included, is kept verbatim, its
line compressed with those stored beside it in ``record_blocks`` (:mod:`.recordblocks`).
The ingest also keeps running sums: per stimulus, model and variant of a run (``cells``),
per grader (``grader_stats``) and per tool (``tool_stats``), so every aggregate the API
serves reads a few thousand rows at most, however many outcomes the store holds.

An outcome's ``id`` is derived from its run id and trial id (:func:`outcome_id`), so ingesting
the same run twice, from one process or many, inserts nothing the second time. ``seq`` keeps
the order of ingestion, which is the order of ``results.jsonl``.
"""

from __future__ import annotations

import hashlib

from sqlalchemy import (
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

SCHEMA_VERSION = 3
"""The version of this schema; stored in ``meta`` and checked when a store is opened."""

metadata = MetaData()

meta = Table(
    "meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

runs = Table(
    "runs",
    metadata,
    Column("run_id", String(200), primary_key=True),
    Column("kind", String(16), nullable=False),  # eval | experiment
    Column("name", Text, nullable=False),
    Column("experiment", Text),
    Column("baseline", Text),
    Column("started_at", String(40)),
    Column("completed_at", String(40)),
    Column("vally_version", String(40)),
    Column("source", Text, nullable=False),
    Column("ingested_at", String(40), nullable=False),
)

run_summaries = Table(
    "run_summaries",
    metadata,
    Column("run_id", String(200), ForeignKey("runs.run_id"), primary_key=True),
    Column("eval_name", String(300), primary_key=True),
    Column("variant", String(300), primary_key=True),  # "" outside experiments
    Column("shard", String(40), primary_key=True),  # "" when not a shard
    Column("record", Text, nullable=False),
)

outcomes = Table(
    "outcomes",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("id", String(32), nullable=False, unique=True),
    Column("run_id", String(200), ForeignKey("runs.run_id"), nullable=False),
    Column("trial_id", Text, nullable=False),
    Column("eval_name", String(300), nullable=False),
    Column("stimulus", String(300), nullable=False),
    Column("model", String(300), nullable=False),  # "" when none
    Column("variant", String(300), nullable=False),  # "" outside experiments
    Column("trial_index", Integer, nullable=False),
    Column("status", String(16), nullable=False),
    Column("verdict", String(16), nullable=False),  # pass | fail | error | ungraded
    Column("score", Float),
    Column("started_at", String(40)),
    Column("duration_ms", Integer),
    Column("tokens", Integer),
    Column("tool_calls", Integer),
    Column("turns", Integer),
    Column("error_events", Integer),
    Column("end_reason", String(40)),
    Column("error_code", String(80)),
    Column("tags", Text, nullable=False),  # JSON object
    Column("error_text", Text),  # the trial's error and error events, for ?error= (v2)
    Column("grader_verdicts", Text),  # "\nname=verdict\n..." of each grader, for ?grader= (v2)
    UniqueConstraint("run_id", "trial_id", name="uq_outcomes_run_trial"),
)

outcome_details = Table(
    "outcome_details",
    metadata,
    Column("outcome_id", String(32), ForeignKey("outcomes.id"), primary_key=True),
    # before version 3, the record line zlib-compressed; since, empty (the line is in a block)
    Column("record", LargeBinary, nullable=False),
    Column("events", LargeBinary),  # the trial folder's events (JSON array, compressed)
    Column("artifacts", Text, nullable=False),
    Column("trial_dir", Text),
    Column("block", Integer),  # the record_blocks row of the record line (v3)
    Column("block_start", Integer),  # where the line starts in the block's bytes (v3)
    Column("block_length", Integer),  # and its length (v3)
)

record_blocks = Table(
    "record_blocks",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("data", LargeBinary, nullable=False),  # record lines, one after another, zlib
)
"""The record lines of the outcomes, compressed a few dozen at a time (schema version 3)."""

_KEY = ("run_id", "eval_name", "stimulus", "model", "variant")

cells = Table(
    "cells",
    metadata,
    *(Column(name, String(300), primary_key=True) for name in _KEY),
    Column("trials", Integer, nullable=False),
    Column("graded", Integer, nullable=False),
    Column("passed", Integer, nullable=False),
    Column("errored", Integer, nullable=False),
    *(
        Column(name, Float, nullable=False)
        for name in (
            "score_sum",
            "duration_sum",
            "duration_n",
            "tokens_sum",
            "tokens_n",
            "tool_calls_sum",
            "tool_calls_n",
            "turns_sum",
            "turns_n",
        )
    ),
)
"""Aggregates of the outcomes of one stimulus of one run (per model and variant), kept up
to date by the ingest: every aggregate the API shows is a sum over cells."""

CELL_SUMS = (
    "trials",
    "graded",
    "passed",
    "errored",
    "score_sum",
    "duration_sum",
    "duration_n",
    "tokens_sum",
    "tokens_n",
    "tool_calls_sum",
    "tool_calls_n",
    "turns_sum",
    "turns_n",
)
"""The additive columns of ``cells``."""

grader_stats = Table(
    "grader_stats",
    metadata,
    Column("run_id", String(200), primary_key=True),
    Column("name", String(300), primary_key=True),
    Column("type", String(200), primary_key=True),
    Column("stimulus", String(300), primary_key=True),
    Column("results", Integer, nullable=False),
    Column("failed", Integer, nullable=False),
    Column("errored", Integer, nullable=False),
    Column("score_sum", Float, nullable=False),
    Column("required", Integer, nullable=False),
)
"""Per run, grader and stimulus: how often the grader ran, failed and errored."""

GRADER_SUMS = ("results", "failed", "errored", "score_sum", "required")

tool_stats = Table(
    "tool_stats",
    metadata,
    Column("run_id", String(200), primary_key=True),
    Column("tool", String(300), primary_key=True),
    Column("calls", Integer, nullable=False),
    Column("failures", Integer, nullable=False),
    Column("trials", Integer, nullable=False),
)
"""Per run and tool: calls, failed results and the trials that used it."""

TOOL_SUMS = ("calls", "failures", "trials")

durations = Table(
    "durations",
    metadata,
    Column("run_id", String(200), primary_key=True),
    Column("bucket", Integer, primary_key=True),
    Column("verdict", String(16), primary_key=True),
    Column("trials", Integer, nullable=False),
)
"""Per run, how many trials of each verdict took a duration in each bucket: bucket ``b``
holds durations from ``2^(b/4)`` to ``2^((b+1)/4)`` milliseconds (four per doubling)."""

DURATION_SUMS = ("trials",)
BUCKETS_PER_DOUBLING = 4

analyses = Table(
    "analyses",
    metadata,
    Column("run_id", String(200), primary_key=True),
    Column("name", String(40), primary_key=True),  # experiment
    Column("stamp", Text, nullable=False),
    Column("body", Text, nullable=False),  # JSON
)
"""Answers computed once from a run's running sums (an experiment's comparison with its
baseline), with the stamp of the sums they were computed from (schema version 2)."""

Index("ix_outcomes_run", outcomes.c.run_id, outcomes.c.seq)
Index("ix_outcomes_stimulus", outcomes.c.stimulus, outcomes.c.seq)
Index("ix_cells_stimulus", cells.c.stimulus, cells.c.eval_name)
Index("ix_runs_started", runs.c.started_at)


def outcome_id(run_id: str, trial_id: str) -> str:
    """The stable id of one trial of one run (20 hex digits of a SHA-256)."""
    return hashlib.sha256(f"{run_id}\0{trial_id}".encode()).hexdigest()[:20]
