"""Running plugin code that may block off the run's event loop, with a time bound.

A grader is user code: a pure-Python loop, a blocking call or a slow regular expression
inside its ``grade`` coroutine would freeze the event loop, and with it every other trial's
timeout and Ctrl-C. :func:`run_isolated` runs such a coroutine on an event loop of its own,
in a daemon thread (kept and reused for later calls once the call finished), and waits for
it on the run's loop with a timeout:

* the run's loop stays free: other trials go on, their timeouts fire, Ctrl-C works;
* past the timeout (or when the run is interrupted) the coroutine is cancelled on its own
  loop; code stuck without ever yielding stays in its daemon thread, abandoned, and never
  holds up the exit of vally;
* objects bound to the run's loop (the trial's sandbox, the LLM provider) are handed in
  wrapped by :func:`bridge`: each of their coroutine methods runs on the run's loop, and the
  isolated code awaits the result.

Code that holds the interpreter lock for long (a C extension that never releases it, such
as the standard ``re`` module backtracking) still slows every thread; the built-in graders
match regular expressions with the ``regex`` package, which releases the lock and stops at
a time bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

from vally.contracts.protocols import Process

__all__ = ["IsolatedTimeout", "bridge", "run_isolated"]

T = TypeVar("T")


class IsolatedTimeout(TimeoutError):
    """The isolated code did not finish in time (told apart from a ``TimeoutError`` that
    the code itself raised).

    Args:
        timeout: The bound, in seconds.
    """

    def __init__(self, timeout: float) -> None:
        super().__init__(f"did not finish within {timeout:g}s")
        self.timeout = timeout


class _Bridge:
    """Forwards attribute access to ``target``; coroutine methods run on ``home``."""

    def __init__(self, target: Any, home: asyncio.AbstractEventLoop) -> None:
        self._vally_target = target
        self._vally_home = home

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._vally_target, name)
        if not inspect.iscoroutinefunction(value):
            return value
        home = self._vally_home

        async def on_home_loop(*args: Any, **kwargs: Any) -> Any:
            future = asyncio.run_coroutine_threadsafe(value(*args, **kwargs), home)
            result = await asyncio.wrap_future(future)
            return bridge(result, home) if isinstance(result, Process) else result

        return on_home_loop

    def __repr__(self) -> str:
        return f"bridge({self._vally_target!r})"


def bridge(target: T, home: asyncio.AbstractEventLoop) -> T:
    """``target`` as seen from another event loop: its coroutine methods run on ``home``
    (the loop that owns it), everything else is read from it directly. None stays None."""
    if target is None:
        return target
    return cast(T, _Bridge(target, home))


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class _Worker:
    """A daemon thread running an event loop of its own, lent to one isolated call at a
    time and reused afterwards (starting a thread per call cost more than most graders)."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()


_idle: dict[str, list[_Worker]] = {}
"""Idle workers by thread name."""

_idle_lock = threading.Lock()


def _take_worker(name: str) -> _Worker:
    with _idle_lock:
        workers = _idle.get(name)
        if workers:
            return workers.pop()
    return _Worker(name)


def _return_worker(name: str, worker: _Worker) -> None:
    with _idle_lock:
        _idle.setdefault(name, []).append(worker)


async def run_isolated(
    make: Callable[[asyncio.AbstractEventLoop], Awaitable[T]],
    *,
    timeout: float | None,
    name: str = "vally-isolated",
) -> T:
    """Run the coroutine ``make(home)`` on a loop of its own in a daemon thread and return
    its result; ``home`` is the calling (run's) loop, to :func:`bridge` objects with. The
    thread and its loop serve later calls once this one finished; one whose call timed
    out or was cancelled is let go when (if ever) the call ends.

    Raises:
        IsolatedTimeout: It did not finish within ``timeout`` seconds (it is cancelled,
            or abandoned when it never yields).
        asyncio.CancelledError: The caller was cancelled (the same happens to it).
        BaseException: Whatever the coroutine raised.
    """
    home = asyncio.get_running_loop()
    done: asyncio.Future[T] = home.create_future()
    started = threading.Event()
    own: dict[str, Any] = {}
    worker = _take_worker(name)
    context = contextvars.copy_context()

    def report(result: Any, error: BaseException | None) -> None:
        with contextlib.suppress(RuntimeError):  # the run's loop is closed: nobody waits
            home.call_soon_threadsafe(_settle, done, result, error)

    def finished(task: asyncio.Future[Any]) -> None:
        # Lent again before the caller hears of the end, so its next call finds it idle.
        if own.get("abandoned"):
            worker.loop.stop()  # the thread ends; its loop is not used again
        else:
            _return_worker(name, worker)
        if task.cancelled():
            report(None, asyncio.CancelledError())
        elif task.exception() is not None:
            report(None, task.exception())
        else:
            report(task.result(), None)

    def begin() -> None:
        try:
            coroutine = context.run(make, home)
            task = worker.loop.create_task(_await(coroutine), context=context)
        except BaseException as exc:  # handed to the caller
            _return_worker(name, worker)
            started.set()
            report(None, exc)
            return
        own["loop"], own["task"] = worker.loop, task
        started.set()
        task.add_done_callback(finished)

    worker.loop.call_soon_threadsafe(begin)
    try:
        await asyncio.wait([done], timeout=timeout)
    except BaseException:
        done.cancel()
        own["abandoned"] = True
        _cancel_inside(own, started)
        raise
    if not done.done():
        done.cancel()
        own["abandoned"] = True
        _cancel_inside(own, started)
        raise IsolatedTimeout(timeout or 0.0)
    return done.result()


async def _await(awaitable: Awaitable[T]) -> T:
    return await awaitable


def _cancel_inside(own: dict[str, Any], started: threading.Event) -> None:
    """Cancel the isolated task on its own loop (best effort: code that never yields
    cannot be stopped and stays in its daemon thread)."""
    started.wait(timeout=1.0)
    loop, task = own.get("loop"), own.get("task")
    if loop is None or task is None:
        return
    with contextlib.suppress(RuntimeError):  # it finished meanwhile
        loop.call_soon_threadsafe(task.cancel)
