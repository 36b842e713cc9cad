"""Trial hosts: long-lived Ray actors, each running up to ``slots`` trials of a run at once.

A task per trial made Ray lease a worker for every attempt and start one worker process
per trial in flight, each importing Ray, vally and the run's plugins and building the
plugins (about 2 s of CPU). A host is one actor process that does that once and then runs
trial after trial, several at a time on its event loop: it reserves ``slots`` times what
one trial needs on its node for the run's lifetime, receives the run's spec files and LLM
permits once, and each attempt is one actor call (no lease, no scheduling).

The driver's :class:`HostPool` (one per distinct resource setting) hands a free slot to
each attempt and starts another host when every slot is taken and more attempts wait; an
attempt never waits for one particular host, so a host that cannot be placed (its node
is full or gone) holds up no trial while slots free up elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vally import SpecArchive, TrialJob, TrialOutcome, run_trial_job
from vally_ray.permits import ClusterLLMGate


class TrialHost:
    """The actor: runs the run's attempts on this node, reading the spec's files from
    ``files`` (unpacked once per node) and taking LLM permits from ``llm_gate``.

    Args:
        files: The run's spec files (None: the nodes read the driver's paths).
        llm_gate: The run's cluster-wide LLM permits.
    """

    def __init__(self, files: SpecArchive | None, llm_gate: ClusterLLMGate) -> None:
        import ray

        self._files = files
        self._llm_gate = llm_gate
        self._node = str(ray.get_runtime_context().get_node_id())

    async def ready(self) -> str:
        """This host's node id, once the actor is placed and built."""
        return self._node

    async def run(self, job: TrialJob) -> TrialOutcome:
        """Run one attempt here; a cancellation (``ray.cancel``) cancels the trial, which
        closes its sandbox before the call ends."""
        return await run_trial_job(
            job, node=self._node, files=self._files, llm_gate=self._llm_gate
        )


@dataclass(eq=False)
class Host:
    """The driver's handle of one host.

    Attributes:
        actor: The Ray actor handle.
        slots: How many trials it runs at once.
        dead: True once a call found the actor gone (it is never handed out again).
        started: True once the actor answered (it is placed and built).
    """

    actor: Any
    slots: int
    dead: bool = False
    started: bool = False


def node_capacity(nodes: Sequence[Mapping[str, Any]], per_trial: Mapping[str, float]) -> int:
    """How many trials needing ``per_trial`` (``CPU``, ``memory``, custom resources) the
    largest alive node in ``nodes`` (``ray.nodes()``) holds at once; 0: none holds one.
    A trial needing nothing fits without a limit (a very large number: the caller caps
    it)."""
    best = 0.0
    for node in nodes:
        if not node.get("Alive", False):
            continue
        have: Mapping[str, float] = node.get("Resources", {})
        fits = min(
            (math.floor(have.get(name, 0.0) / need + 1e-9) for name, need in per_trial.items()
             if need > 0),
            default=math.inf,
        )
        best = max(best, fits)
    return int(best) if best != math.inf else 1 << 30


class HostPool:
    """The hosts of one resource setting and their free slots.

    Args:
        create: Makes a host actor with this many slots (its options reserve that many
            trials' resources).
        slots: The slots of each new host (at most the largest node's capacity).
    """

    def __init__(self, create: Callable[[int], Any], slots: int) -> None:
        self._create = create
        self.slots = max(1, slots)
        self.hosts: list[Host] = []
        self._free: asyncio.Queue[Host | None] = asyncio.Queue()
        self._waiting = 0
        self._starting = 0
        self._failure: str | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def take(self) -> Host:
        """A free slot's host (starting another host when every slot is taken).

        Raises:
            RuntimeError: A host of this pool could not start and none of its hosts is
                alive (the message says why).
        """
        self._waiting += 1
        try:
            while True:
                self._grow()
                host = await self._free.get()
                if host is None:
                    raise RuntimeError(self._failure or "a trial host could not start")
                if not host.dead:
                    return host
        finally:
            self._waiting -= 1

    def give_back(self, host: Host) -> None:
        """Return ``host``'s slot after an attempt (a dead host's slot is dropped)."""
        if not host.dead:
            self._free.put_nowait(host)

    def _live(self) -> bool:
        return any(host.started and not host.dead for host in self.hosts)

    def _grow(self) -> None:
        if self._failure is not None:  # no more hosts: wait for a live one's slot, if any
            if not self._live():
                self._free.put_nowait(None)
            return
        if self._waiting > self._free.qsize() + self._starting:
            actor = self._create(self.slots)
            host = Host(actor, self.slots)
            self.hosts.append(host)
            self._starting += self.slots
            task = asyncio.ensure_future(self._started(host))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _started(self, host: Host) -> None:
        try:
            await host.actor.ready.remote()
        except Exception as exc:
            host.dead = True
            self._failure = f"a trial host could not start: {type(exc).__name__}: {exc}"
            if not self._live():
                for _ in range(self._waiting):
                    self._free.put_nowait(None)
            return
        finally:
            self._starting -= host.slots
        host.started = True
        for _ in range(host.slots):
            self._free.put_nowait(host)

    async def close(self) -> None:
        """Stop every host of the pool (placed or still waiting for its node)."""
        import ray

        for task in list(self._tasks):
            task.cancel()
        for host in self.hosts:
            with contextlib.suppress(Exception):
                ray.kill(host.actor)
        self.hosts.clear()
