"""The scheduler: one asyncio worker pool over every planned trial of a run.

``workers`` coroutines pull the next item from one shared queue, so a slow trial occupies
one worker and never delays the others. Each item runs as its own task, which lets
:meth:`Scheduler.stop` cancel running trials (Ctrl-C, SIGTERM): no new item starts, running
ones are cancelled and get a chance to clean up (the trial runner closes its sandbox, which
kills the agent's process tree, and returns a ``cancelled`` record).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

DEFAULT_WORKERS = 5


class Scheduler(Generic[T, R]):
    """Runs ``work(item)`` for every item with at most ``workers`` at a time.

    Args:
        work: The coroutine function run per item. It should turn its own failures into
            results; an exception it raises is passed to ``on_error`` and the pool goes on.
        workers: Maximum concurrent items (>= 1).
        on_result: Called in completion order with each item and its result.
        on_error: Called with an item and the exception ``work`` raised (default: re-raise
            once the pool has drained).
    """

    def __init__(
        self,
        work: Callable[[T], Coroutine[Any, Any, R]],
        *,
        workers: int = DEFAULT_WORKERS,
        on_result: Callable[[T, R], None] | None = None,
        on_error: Callable[[T, BaseException], None] | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.work = work
        self.workers = workers
        self.on_result = on_result
        self.on_error = on_error
        self.stopped = False
        self.started = 0
        self.finished = 0
        self._running: set[asyncio.Task[R]] = set()
        self._errors: list[BaseException] = []

    def stop(self) -> None:
        """Start no new item and cancel the running ones. Safe to call repeatedly."""
        self.stopped = True
        for task in list(self._running):
            task.cancel()

    async def run(self, items: Sequence[T]) -> None:
        """Run every item (until :meth:`stop`) and return when all started ones are done.

        Raises:
            The first exception ``work`` raised when there is no ``on_error``.
        """
        iterator = iter(items)
        count = min(self.workers, len(items))
        pool = [asyncio.create_task(self._worker(iterator)) for _ in range(count)]
        try:
            await asyncio.gather(*pool)
        except asyncio.CancelledError:
            self.stop()
            await asyncio.gather(*pool, return_exceptions=True)
            raise
        if self._errors:
            raise self._errors[0]

    async def _worker(self, iterator: Iterator[T]) -> None:
        while not self.stopped:
            try:
                item = next(iterator)
            except StopIteration:
                return
            self.started += 1
            task: asyncio.Task[R] = asyncio.create_task(self.work(item))
            self._running.add(task)
            try:
                result = await asyncio.shield(task)
            except asyncio.CancelledError:
                # Either the item was cancelled by stop() (the task finished as cancelled),
                # or this worker itself was cancelled: cancel the item and wait for it.
                if not task.done():
                    task.cancel()
                    await asyncio.wait([task])
                if task.cancelled():
                    self.finished += 1
                    continue
                exc = task.exception()
                if exc is not None:
                    self._fail(item, exc)
                    continue
                result = task.result()
            except Exception as exc:
                self._fail(item, exc)
                continue
            finally:
                self._running.discard(task)
            self.finished += 1
            if self.on_result is not None:
                self.on_result(item, result)

    def _fail(self, item: T, exc: BaseException) -> None:
        self.finished += 1
        if self.on_error is not None:
            self.on_error(item, exc)
        else:
            self._errors.append(exc)


@contextmanager
def stop_on_signals(
    stop: Callable[[], None], signals: Sequence[int] = (signal.SIGINT, signal.SIGTERM)
) -> Iterator[list[int]]:
    """Call ``stop`` when one of ``signals`` arrives while the block runs (in the running
    event loop). Yields the list of signals received, for the caller's exit code.

    Where the loop cannot install handlers (not the main thread, Windows), nothing is
    installed and Ctrl-C keeps Python's default behaviour.
    """
    loop = asyncio.get_running_loop()
    received: list[int] = []
    installed: list[int] = []

    def handler(signum: int) -> None:
        received.append(signum)
        stop()

    for signum in signals:
        try:
            loop.add_signal_handler(signum, handler, signum)
        except (NotImplementedError, RuntimeError, ValueError):
            continue
        installed.append(signum)
    try:
        yield received
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
