"""A backend that does nothing, to measure the orchestrator alone (``bench/throughput.py``).

Its sandboxes are :class:`vally.testing.FakeSandbox`: files in memory and exit code 0 for
every command, so a run with the ``mock`` executor measures planning, scheduling, grading,
events and file writes without any workspace or process cost. Load it with
``--backend bench/null_backend.py``.
"""

from __future__ import annotations

from typing import Any

from vally import BaseBackend, EmptyConfig, PluginMetadata, TrialContext
from vally.testing import FakeSandbox


class NullBackend(BaseBackend[EmptyConfig]):
    """Opens in-memory sandboxes."""

    metadata = PluginMetadata(
        name="bench-null", kind="backend", description="In-memory sandboxes for benchmarks."
    )
    Config = EmptyConfig

    async def open(self, trial: TrialContext) -> FakeSandbox:
        return FakeSandbox(workdir="/null")


def register(registrar: Any) -> None:
    """Register the null backend."""
    registrar.backend(NullBackend)
