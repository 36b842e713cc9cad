"""Where a trial's own files are written: on the run's event loop while writing them is
quick, on a worker thread while it is slow.

A worker thread overlaps a slow file system (a network mount, a slow temporary folder) with
the other trials. It is not free, though: every hop wakes the loop once more, and while the
loop is busy the thread waits for the interpreter lock after each of its system calls. On a
2-CPU machine, handing each ``command true`` trial's two small files to a thread made the
trials about 40% slower than writing them in place, on a RAM disk and on ext4 alike (see
``docs/performance.md``, *Process trials*). So the writes made in place are timed, and they
move to a thread only while they take longer than :data:`SLOW_WRITE_SECONDS` on average.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

SLOW_WRITE_SECONDS = 0.001
"""A trial's files that take longer than this to write, on average, are written on a
worker thread instead of the event loop (one millisecond: a few file operations on a local
disk take a tenth of it)."""

SMOOTHING = 0.25
"""The weight of the newest write in the running average."""

PROBE_EVERY = 16
"""While writes are slow, one write in this many is still made in place, to notice when
they become quick again."""


class WritePlacement:
    """Decides, write by write, whether a trial's files are written in place or on a worker
    thread, from a running average of how long the writes made in place took.

    Args:
        slow: The average above which writes go to a thread, in seconds.
        clock: Where the times come from.
    """

    def __init__(
        self,
        slow: float = SLOW_WRITE_SECONDS,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._slow = slow
        self._clock = clock
        self._average = 0.0
        self._deferred = 0

    @property
    def average(self) -> float:
        """The running average of the writes made in place, in seconds."""
        return self._average

    def in_place(self) -> bool:
        """Whether the next write is made on the event loop: while writes are quick, and
        one in :data:`PROBE_EVERY` while they are slow."""
        if self._average <= self._slow:
            return True
        self._deferred += 1
        if self._deferred < PROBE_EVERY:
            return False
        self._deferred = 0
        return True

    def timed(self, write: Callable[[], T]) -> T:
        """Call ``write`` in place and count how long it took (also when it raises)."""
        started = self._clock()
        try:
            return write()
        finally:
            self._average += SMOOTHING * (self._clock() - started - self._average)
