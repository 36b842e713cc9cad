"""Built-in shard strategies.

A strategy receives every planned trial key in plan order and returns one shard's slice.
Both strategies here are deterministic and partition the plan exactly: every key lands in
exactly one of the shards 1..n, so re-running a lost shard reproduces its slice.
"""

from __future__ import annotations

from collections.abc import Sequence

from vally import EmptyConfig, Plugin, PluginMetadata, TrialKey


def _check(index: int, total: int) -> None:
    if total < 1 or not 1 <= index <= total:
        raise ValueError(f"shard {index}/{total} is out of range; use i/n with 1 <= i <= n")


class RoundRobinStrategy(Plugin[EmptyConfig]):
    """Key j of the plan (0-based) goes to shard (j mod n) + 1: balanced trial counts."""

    metadata = PluginMetadata(
        name="round-robin",
        kind="shard_strategy",
        description="Deal planned trials to shards in turn (balanced trial counts).",
    )

    def select(self, keys: Sequence[TrialKey], index: int, total: int) -> list[TrialKey]:
        """Return every n-th key starting at position index-1."""
        _check(index, total)
        return [key for position, key in enumerate(keys) if position % total == index - 1]


class ByStimulusStrategy(Plugin[EmptyConfig]):
    """Every variant, model and trial of one stimulus runs on the same shard.

    Stimuli, identified by (eval, stimulus), are dealt to shards in turn in order of first
    appearance in the plan. Baseline/treatment pairs and multi-trial metrics then stay
    local to one shard.
    """

    metadata = PluginMetadata(
        name="by-stimulus",
        kind="shard_strategy",
        description="Keep all variants and trials of a stimulus on one shard.",
    )

    def select(self, keys: Sequence[TrialKey], index: int, total: int) -> list[TrialKey]:
        """Return the keys of the stimuli dealt to shard ``index``."""
        _check(index, total)
        order: dict[tuple[str, str], int] = {}
        for key in keys:
            order.setdefault((key.eval_name, key.stimulus), len(order))
        return [key for key in keys if order[(key.eval_name, key.stimulus)] % total == index - 1]
