"""The tables of the history store (SQLAlchemy Core), shared by SQLite and PostgreSQL.

One row per run (``runs``), per eval summary (``run_summaries``), per trial (``outcomes``),
per grader verdict (``graders``) and per tool of a trial (``tools``); the full record of a
trial, unknown fields included, is kept verbatim in ``outcome_details``. Aggregates are
computed by queries over ``outcomes``, ``graders`` and ``tools``; the JSON text columns are
read only to show one outcome.

An outcome's ``id`` is derived from its run id and trial id (:func:`outcome_id`), so ingesting
the same run twice, from one process or many, inserts nothing the second time. ``seq`` keeps
the order of ingestion, which is the order of ``results.jsonl``.
"""

from __future__ import annotations

import hashlib

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

SCHEMA_VERSION = 1
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
    Column("tags", JSON, nullable=False),
    UniqueConstraint("run_id", "trial_id", name="uq_outcomes_run_trial"),
)

outcome_details = Table(
    "outcome_details",
    metadata,
    Column("outcome_id", String(32), ForeignKey("outcomes.id"), primary_key=True),
    Column("record", Text, nullable=False),
    Column("events", Text),  # the trial folder's events.jsonl when the record has none
    Column("artifacts", Text, nullable=False),
    Column("trial_dir", Text),
)

graders = Table(
    "graders",
    metadata,
    Column("outcome_id", String(32), ForeignKey("outcomes.id"), primary_key=True),
    Column("position", Integer, primary_key=True),
    Column("run_id", String(200), nullable=False),
    Column("name", String(300), nullable=False),
    Column("type", String(200), nullable=False),
    Column("passed", Boolean, nullable=False),
    Column("score", Float, nullable=False),
    Column("status", String(16), nullable=False),
    Column("required", Boolean, nullable=False),
)

tools = Table(
    "tools",
    metadata,
    Column("outcome_id", String(32), ForeignKey("outcomes.id"), primary_key=True),
    Column("tool", String(300), primary_key=True),
    Column("run_id", String(200), nullable=False),
    Column("calls", Integer, nullable=False),
    Column("failures", Integer, nullable=False),
)

Index("ix_outcomes_run", outcomes.c.run_id, outcomes.c.seq)
Index("ix_outcomes_run_cell", outcomes.c.run_id, outcomes.c.stimulus, outcomes.c.model)
Index("ix_outcomes_stimulus", outcomes.c.stimulus, outcomes.c.eval_name)
Index("ix_graders_run", graders.c.run_id, graders.c.name)
Index("ix_tools_run", tools.c.run_id, tools.c.tool)
Index("ix_runs_started", runs.c.started_at)


def outcome_id(run_id: str, trial_id: str) -> str:
    """The stable id of one trial of one run (20 hex digits of a SHA-256)."""
    return hashlib.sha256(f"{run_id}\0{trial_id}".encode()).hexdigest()[:20]
