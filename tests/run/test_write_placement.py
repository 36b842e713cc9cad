"""Where a trial's files are written: in place while writing is quick, on a worker thread
while it is slow, back in place once it is quick again."""

from __future__ import annotations

import pytest

from vally.engine.trials.write_placement import PROBE_EVERY, SLOW_WRITE_SECONDS, WritePlacement


class Clock:
    """A clock that moves only when a write says how long it took."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _write(placement: WritePlacement, clock: Clock, seconds: float) -> str:
    def write() -> str:
        clock.now += seconds
        return "written"

    return placement.timed(write)


def test_quick_writes_stay_in_place() -> None:
    clock = Clock()
    placement = WritePlacement(clock=clock)
    for _ in range(100):
        assert placement.in_place()
        assert _write(placement, clock, SLOW_WRITE_SECONDS / 10) == "written"
    assert placement.average == pytest.approx(SLOW_WRITE_SECONDS / 10)


def test_slow_writes_move_to_a_thread_with_a_probe_in_place_now_and_then() -> None:
    clock = Clock()
    placement = WritePlacement(clock=clock)
    decisions: list[bool] = []
    for _ in range(3 * PROBE_EVERY):
        here = placement.in_place()
        decisions.append(here)
        if here:
            _write(placement, clock, 0.05)
    # The first writes are made in place until the average passes the limit; from then on
    # only one in PROBE_EVERY is.
    first_deferred = decisions.index(False)
    assert 1 <= first_deferred <= 3
    later = decisions[first_deferred:]
    assert later.count(True) == len(later) // PROBE_EVERY
    assert all(not here for here in later[: PROBE_EVERY - 1])


def test_writes_come_back_in_place_once_quick_again() -> None:
    clock = Clock()
    placement = WritePlacement(clock=clock)
    _write(placement, clock, 0.1)
    assert placement.average > SLOW_WRITE_SECONDS
    probes = 0
    for _ in range(50 * PROBE_EVERY):
        if placement.average <= SLOW_WRITE_SECONDS:
            break
        if placement.in_place():  # a probe; the other writes go to a thread, not timed
            probes += 1
            _write(placement, clock, SLOW_WRITE_SECONDS / 100)
    assert placement.average <= SLOW_WRITE_SECONDS
    assert probes > 1
    assert all(placement.in_place() for _ in range(2 * PROBE_EVERY))


def test_a_write_that_fails_is_timed_and_its_error_passes_through() -> None:
    clock = Clock()
    placement = WritePlacement(clock=clock)

    def failing() -> None:
        clock.now += 0.2
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        placement.timed(failing)
    assert placement.average > SLOW_WRITE_SECONDS
