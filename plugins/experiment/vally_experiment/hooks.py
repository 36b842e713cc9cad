"""The hook plugin ``shards`` (entry-point group ``vally.hooks``): the seal of a finished
shard of ``vally experiment run --shard``.

* ``vally_experiment_shard_opened``: the seal an earlier run of the shard left is removed
  before the new run writes its first manifest;
* ``vally_experiment_shard_closed``: a shard that ran every trial it selected is sealed
  (:func:`vally_experiment.seal.seal`), so ``vally experiment merge`` copies its results
  instead of reading every record. A shard that cannot be sealed is merged the slow way.

The hooks are specified by :class:`vally.ExperimentHooks`; this module imports nothing heavy,
the work is imported when a hook runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vally import hookimpl


class ShardSealHooks:
    """Seals each finished shard, and drops the stale seal of a shard that runs again."""

    @hookimpl
    def vally_experiment_shard_opened(self, shard_dir: Path) -> None:
        """Remove the seal of an earlier run of the shard."""
        from vally_experiment.seal import discard_seal

        discard_seal(shard_dir)

    @hookimpl
    def vally_experiment_shard_closed(
        self, shard_dir: Path, manifest: Mapping[str, Any], snapshot: Mapping[str, Any]
    ) -> None:
        """Seal the finished shard."""
        from vally_experiment.seal import seal

        seal(shard_dir, manifest, snapshot)
