"""Entry-point groups: the one table that maps a plugin kind to its group."""

from __future__ import annotations

from vally.contracts.metadata import PluginKind

ENTRY_POINT_GROUPS: dict[PluginKind, str] = {
    "backend": "vally.backends",
    "executor": "vally.executors",
    "grader": "vally.graders",
    "reporter": "vally.reporters",
    "eval_provider": "vally.eval_providers",
    "shard_strategy": "vally.shard_strategies",
    "llm_provider": "vally.llm_providers",
    "exporter": "vally.exporters",
}
"""Kind -> entry-point group. Built-ins are declared in these groups like any plugin."""
