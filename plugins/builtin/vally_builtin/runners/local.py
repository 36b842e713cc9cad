"""The ``local`` runner: every trial runs in this process's worker pool (the default).

``--runner local`` is the same as giving no ``--runner``: up to ``--workers`` trials run
concurrently on this machine, on the selected backend.
"""

from __future__ import annotations

from typing import Any, ClassVar

from vally import EmptyConfig, PluginMetadata, TrialDispatch


class LocalRunner:
    """Runs each trial attempt here, in the run's event loop."""

    metadata: ClassVar[PluginMetadata] = PluginMetadata(
        name="local",
        kind="runner",
        description="Run trials in this process (the default).",
    )
    Config = EmptyConfig
    runs_elsewhere: ClassVar[bool] = False

    def __init__(self, config: EmptyConfig | None = None) -> None:
        self.config = config or EmptyConfig()

    async def start(self, run_id: str) -> None:
        """Nothing to prepare."""

    async def run_trial(self, dispatch: TrialDispatch) -> Any:
        """Run the attempt in this process (a cancellation becomes a ``cancelled`` record
        inside the trial runner)."""
        return await dispatch.run_here()

    async def shutdown(self) -> None:
        """Nothing to release."""
