"""The worker pool: concurrency bound, no head-of-line blocking, stop/cancel, errors."""

from __future__ import annotations

import asyncio

import pytest

from vally.engine.trials.scheduler import Scheduler

FAILSAFE = 30  # seconds; only guards against a hang, never decides a result


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, FAILSAFE))


def test_slow_item_does_not_block_the_others() -> None:
    order: list[str] = []

    async def main() -> None:
        others_done = asyncio.Event()
        remaining = {"a", "b", "c", "d", "e"}

        async def work(item: str) -> str:
            if item == "slow":
                await others_done.wait()  # finishes only after every other item
            else:
                await asyncio.sleep(0)
                remaining.discard(item)
                if not remaining:
                    others_done.set()
            return item

        pool = Scheduler(work, workers=2, on_result=lambda item, result: order.append(result))
        await pool.run(["slow", "a", "b", "c", "d", "e"])

    run(main())
    assert order[-1] == "slow"
    assert sorted(order[:-1]) == ["a", "b", "c", "d", "e"]


def test_never_more_than_workers_at_once() -> None:
    peak = 0
    current = 0

    async def work(item: int) -> int:
        nonlocal peak, current
        current += 1
        peak = max(peak, current)
        for _ in range(3):
            await asyncio.sleep(0)
        current -= 1
        return item

    results: list[int] = []
    pool = Scheduler(work, workers=3, on_result=lambda i, r: results.append(r))
    run(pool.run(list(range(20))))
    assert peak == 3
    assert sorted(results) == list(range(20))


def test_stop_cancels_running_and_starts_nothing_new() -> None:
    results: list[tuple[int, str]] = []

    async def main() -> Scheduler[int, str]:
        started = asyncio.Event()
        count = 0

        async def work(item: int) -> str:
            nonlocal count
            count += 1
            if count == 2:
                started.set()
            try:
                await asyncio.Event().wait()  # never finishes on its own
            except asyncio.CancelledError:
                return "cancelled"
            return "done"

        pool: Scheduler[int, str] = Scheduler(
            work, workers=2, on_result=lambda i, r: results.append((i, r))
        )
        task = asyncio.create_task(pool.run(list(range(10))))
        await started.wait()
        pool.stop()
        await task
        return pool

    pool = run(main())
    assert pool.started == 2
    assert sorted(results) == [(0, "cancelled"), (1, "cancelled")]


def test_errors_go_to_on_error_and_the_pool_goes_on() -> None:
    errors: list[tuple[int, str]] = []
    results: list[int] = []

    async def work(item: int) -> int:
        if item == 2:
            raise RuntimeError("boom")
        return item

    pool = Scheduler(
        work,
        workers=2,
        on_result=lambda i, r: results.append(r),
        on_error=lambda i, e: errors.append((i, str(e))),
    )
    run(pool.run([1, 2, 3]))
    assert errors == [(2, "boom")]
    assert sorted(results) == [1, 3]


def test_without_on_error_the_first_error_is_raised_after_draining() -> None:
    results: list[int] = []

    async def work(item: int) -> int:
        if item == 0:
            raise ValueError("bad item")
        return item

    pool = Scheduler(work, workers=1, on_result=lambda i, r: results.append(r))
    with pytest.raises(ValueError, match="bad item"):
        run(pool.run([0, 1, 2]))
    assert results == [1, 2]


def test_workers_must_be_positive() -> None:
    async def work(item: int) -> int:
        return item

    with pytest.raises(ValueError):
        Scheduler(work, workers=0)
