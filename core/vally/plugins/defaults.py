"""The plugins the commands use when nothing else is selected: names only, in one place.

The kernel never decides by a plugin's name anywhere else; everything here can be replaced
from ``.vally.yaml`` or a flag (``--backend``, ``--eval-plugin``, ``--shard-strategy``,
``--reporter-plugin``), and every name resolves through the registry like any plugin.
"""

from __future__ import annotations

DEFAULT_BACKEND = "local"
"""Where trials run without ``--backend`` or ``.vally.yaml defaults.backend``."""

DEFAULT_EVAL_PROVIDER = "yaml"
"""Reads eval files without ``--eval-plugin`` or ``.vally.yaml defaults.eval_provider``."""

DEFAULT_SHARD_STRATEGY = "round-robin"
"""Splits a plan into shards without ``--shard-strategy``."""

RESULTS_REPORTER = "jsonl"
"""Writes ``results.jsonl`` (critical: the run fails when it cannot write)."""

CONSOLE_REPORTER = "console"
"""Progress and results on the terminal."""

REPORT_REPORTER = "markdown"
"""Writes ``report.md``."""

JUNIT_REPORTER = "junit"
"""Writes ``junit.xml`` (``--junit``)."""

TRACE_REPORTER = "otel"
"""Writes OpenTelemetry spans (``otel-spans.jsonl``, or to ``--otlp-endpoint``)."""
