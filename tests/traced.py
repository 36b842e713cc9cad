"""The peak of the memory Python traces (tracemalloc) while a call runs, for memory tests."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable


def traced_peak(call: Callable[[], object]) -> int:
    """The peak, in bytes, of the memory Python traced while ``call()`` ran (tracemalloc
    started just before it and stopped after it, so the peak counts only what the call
    allocated)."""
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
