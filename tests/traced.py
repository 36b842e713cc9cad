"""What Python traces (tracemalloc) of a call, for memory tests: the peak while it runs,
or what its result still holds once it returns."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


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


def traced_held(call: Callable[[], T]) -> tuple[T, int]:
    """``call()``'s result and the bytes of what the call allocated that are still held
    when it returns (its result and what the result keeps; garbage collected first)."""
    gc.collect()
    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
