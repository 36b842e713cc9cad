"""A warm pool of started containers, each handed to exactly one trial.

Creating and starting a container is most of a docker trial's cost. The pool does it ahead:
while trials run, it keeps a few containers of the run's image and configuration created and
started, so the next trial's ``open`` takes one instead of waiting for the engine. A pooled
container serves one trial and is removed with it: it is never returned to the pool, so no
trial ever sees what another one left.

The pool holds at most ``limit`` spare containers and never more than the most trials it has
seen open at once (so never more than the run's workers). It makes one container at a time:
the engine is never asked for more than one container ahead of the trials, so when it is
already saturated the pool does not compete with the trials (they then create their own,
as without a pool) and when it is not the spares are ready long before they are needed.
When a trial has to wait for the spare still being made, the engine cannot keep ahead of the
trials, and more spares would only be made and removed unused at the end of the run (a
started container costs the engine about as much as a whole trial): the pool then keeps one
spare fewer, down to one, and one more again each time a trial finds its spare ready.

When the run says how many trials it will open (:meth:`WarmPool.expect`), the pool also
never keeps more spares than trials are still to come: the last trials of a run take the
spares made for them and no new one is made, so a short run does not end with containers
made only to be removed.

Containers it made but nobody took are removed by :meth:`WarmPool.close`; should the process
die first, they carry the run's labels like every other container and the next run's sweep
(or ``vally docker prune``) removes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable

from vally_backends.docker.sandbox import ContainerInfo, run_blocking

logger = logging.getLogger("vally.backends.docker")


class WarmPool:
    """Containers created and started ahead of the trials that will use them.

    Args:
        make: Creates and starts one container (blocking; runs in a worker thread).
        discard: Removes a container nobody took (blocking; runs in a worker thread).
        limit: Most spare containers to keep (0 disables the pool).
    """

    def __init__(
        self,
        make: Callable[[], ContainerInfo],
        discard: Callable[[ContainerInfo], None],
        limit: int,
    ) -> None:
        self._make = make
        self._discard = discard
        self.limit = limit
        self._spares: deque[asyncio.Task[ContainerInfo]] = deque()
        self._open = 0
        self._peak = 0
        self._ceiling = limit
        self._remaining: int | None = None
        self._closed = False

    @property
    def target(self) -> int:
        """How many spare containers the pool keeps: ``limit``, but no more than the most
        trials seen open at once, nor than the engine keeps ahead of, nor than trials are
        still to come when the run said how many (see the module)."""
        target = min(self.limit, self._peak, self._ceiling)
        return target if self._remaining is None else min(target, self._remaining)

    def expect(self, trials: int) -> None:
        """The run will ask for ``trials`` more containers (a hint: more are still served,
        by the trials creating their own once the pool has none)."""
        self._remaining = max(0, trials)

    @property
    def spares(self) -> int:
        """Spare containers started or being started."""
        return len(self._spares)

    async def take(self) -> ContainerInfo | None:
        """A started container for one trial, or None when none is ready or coming (the
        caller then creates its own). Counts the trial as open until :meth:`release`."""
        self._open += 1
        self._peak = max(self._peak, self._open)
        if self._remaining is not None:
            self._remaining = max(0, self._remaining - 1)
        task = self._spares.popleft() if self._spares else None
        if task is not None:
            if task.done():
                self._ceiling = min(self.limit, self._ceiling + 1)
            else:  # the engine did not keep ahead of the trials
                self._ceiling = max(1, self._ceiling - 1)
        self._refill()
        if task is None:
            return None
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            self._spares.appendleft(task)  # untouched: the next trial (or close) takes it
            raise
        except Exception as exc:
            logger.debug("docker backend: a pooled container failed to start: %s", exc)
            return None

    def release(self) -> None:
        """A trial that :meth:`take` counted has closed its sandbox (or failed to open)."""
        self._open = max(0, self._open - 1)

    def _refill(self) -> None:
        """Start making the next spare when fewer than :attr:`target` are there and none is
        being made."""
        if self._closed or len(self._spares) >= self.target:
            return
        if any(not task.done() for task in self._spares):
            return
        task = asyncio.ensure_future(run_blocking(self._make))
        task.add_done_callback(self._made)
        self._spares.append(task)

    def _made(self, task: asyncio.Task[ContainerInfo]) -> None:
        if not task.cancelled() and task.exception() is not None:
            with contextlib.suppress(ValueError):
                self._spares.remove(task)  # a failed creation is no spare
            return  # and no retry until the next trial asks
        self._refill()

    async def close(self) -> list[str]:
        """Stop refilling and remove every spare container, waiting for those still being
        created (even when cancelled meanwhile). Returns the problems met."""
        self._closed = True
        spares = list(self._spares)
        self._spares.clear()
        problems: list[str] = []

        async def _remove_all() -> None:
            for task in spares:
                try:
                    info = await task
                except Exception:
                    continue  # nothing was left behind by a failed creation
                try:
                    await run_blocking(self._discard, info)
                except Exception as exc:
                    problems.append(f"{info.id[:12]}: {exc}")

        removal = asyncio.ensure_future(_remove_all())
        cancelled = False
        while not removal.done():
            try:
                await asyncio.shield(removal)
            except asyncio.CancelledError:
                cancelled = True  # finish removing the containers first
        if cancelled:
            raise asyncio.CancelledError
        return problems
