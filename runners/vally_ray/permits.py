"""The run's LLM permits on the cluster: one named Ray actor per run holds an
``asyncio.Semaphore`` of the project's ``llm.max_concurrency``; every LLM call of every
trial on every node takes a permit from it (see :class:`vally.LLMGate`), so judge and
``chat-agent`` calls do not multiply with the nodes.

The actor is created by the first call that needs it (runs without LLM calls start none)
and removed by the driver when the run ends. It lives on whichever node Ray places it
(it reserves no CPU).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

ACTOR_PREFIX = "vally-llm-permits-"
"""The actor's name is this prefix and the run id."""

MAX_WAITING = 100_000
"""How many permit requests the actor takes at once (waiting ones included)."""


class _Permits:
    """The actor: ``limit`` permits."""

    def __init__(self, limit: int) -> None:
        self._semaphore = asyncio.Semaphore(limit)

    async def acquire(self) -> None:
        """Wait for a permit."""
        await self._semaphore.acquire()

    async def release(self) -> None:
        """Give a permit back."""
        self._semaphore.release()


class ClusterLLMGate:
    """The run's permits as an :class:`vally.LLMGate` (picklable: it names the actor).

    Args:
        run_id: The run (names the actor).
        namespace: The Ray namespace of the run.
    """

    def __init__(self, run_id: str, namespace: str) -> None:
        self.name = ACTOR_PREFIX + run_id
        self.namespace = namespace
        self._handle: Any = None
        self._pending: set[asyncio.Future[Any]] = set()
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, str]:
        return {"name": self.name, "namespace": self.namespace}

    def __setstate__(self, state: dict[str, str]) -> None:
        self.name, self.namespace = state["name"], state["namespace"]
        self._handle, self._pending, self._lock = None, set(), threading.Lock()

    def _actor(self, limit: int) -> Any:
        with self._lock:
            if self._handle is None:
                import ray

                actor = ray.remote(_Permits).options(
                    name=self.name,
                    namespace=self.namespace,
                    get_if_exists=True,
                    lifetime="detached",  # not tied to the worker that happened to create it
                    num_cpus=0,
                    max_concurrency=MAX_WAITING,
                )
                self._handle = actor.remote(limit)
            return self._handle

    async def acquire(self, limit: int) -> None:
        """Wait for a permit; a permit granted after the wait was cancelled is given back."""
        actor = self._actor(limit)
        ref = actor.acquire.remote()
        try:
            await ref
        except asyncio.CancelledError:
            giving_back = asyncio.ensure_future(self._give_back(actor, ref))
            self._pending.add(giving_back)
            giving_back.add_done_callback(self._pending.discard)
            raise

    async def release(self) -> None:
        """Give a permit back."""
        await self._actor(1).release.remote()

    @staticmethod
    async def _give_back(actor: Any, ref: Any) -> None:
        with contextlib.suppress(Exception):
            await ref
            await actor.release.remote()

    def remove(self) -> None:
        """Remove the run's actor, if a call created it (on the driver, at the run's end)."""
        import ray

        try:
            actor = ray.get_actor(self.name, namespace=self.namespace)
        except ValueError:
            return
        with contextlib.suppress(Exception):
            ray.kill(actor)
