"""Plugin kinds and their entry-point groups: the one table of what the registry serves.

Three families of kinds share the registry (named lookup, conflicts, blocking, provenance):

* the **run kinds** (:data:`ENTRY_POINT_GROUPS`): classes with ``metadata`` and ``Config``
  that a spec, ``.vally.yaml`` or a flag selects for a run;
* **CLI command extensions** (:data:`CLI_COMMAND_KIND`, group ``vally.cli``): ``register(app)``
  functions that add commands to the ``vally`` CLI (``vally docker prune``). They are not run
  plugins: no spec selects them and they have no config;
* **hook plugins** (:data:`HOOK_KIND`, group ``vally.hooks``): classes whose methods
  implement the experiment hooks (:mod:`vally.engine.experiment_hooks`), such as the
  comparison behind ``vally experiment run --compare``. Not run plugins either: every
  installed one is loaded when an experiment needs its hooks.

This module imports nothing heavy, so the CLI can use it at start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from typing import TypeAlias

    from vally.contracts.metadata import PluginKind

    RegistryKind: TypeAlias = PluginKind | Literal["cli_command", "hook"]
    """Every kind a :class:`vally.plugins.registry.Registry` can serve."""

ENTRY_POINT_GROUPS: dict[PluginKind, str] = {
    "backend": "vally.backends",
    "executor": "vally.executors",
    "grader": "vally.graders",
    "reporter": "vally.reporters",
    "eval_provider": "vally.eval_providers",
    "shard_strategy": "vally.shard_strategies",
    "llm_provider": "vally.llm_providers",
    "exporter": "vally.exporters",
    "runner": "vally.runners",
}
"""Run kind -> entry-point group. Built-ins are declared in these groups like any plugin."""

CLI_COMMAND_KIND: Literal["cli_command"] = "cli_command"
"""The kind of CLI command extensions: each entry point is a ``register(app)`` function."""

HOOK_KIND: Literal["hook"] = "hook"
"""The kind of hook plugins: each entry point is a class implementing experiment hooks."""

REGISTRY_GROUPS: dict[RegistryKind, str] = {
    kind: group for kind, group in ENTRY_POINT_GROUPS.items()
}
"""Every kind the registry serves -> its entry-point group."""
REGISTRY_GROUPS[CLI_COMMAND_KIND] = "vally.cli"
REGISTRY_GROUPS[HOOK_KIND] = "vally.hooks"

KIND_LABELS: dict[RegistryKind, str] = {
    "backend": "backend",
    "executor": "executor",
    "grader": "grader",
    "reporter": "reporter",
    "eval_provider": "eval provider",
    "shard_strategy": "shard strategy",
    "llm_provider": "LLM provider",
    "exporter": "exporter",
    "runner": "runner",
    CLI_COMMAND_KIND: "CLI command",
    HOOK_KIND: "hook plugin",
}
"""Human-readable kind names for messages."""


def kind_label(kind: RegistryKind) -> str:
    """``eval_provider`` -> ``eval provider``: the kind as users read it."""
    return KIND_LABELS.get(kind, kind)
