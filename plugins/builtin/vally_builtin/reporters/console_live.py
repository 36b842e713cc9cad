"""What the ``console`` reporter shows while a run goes: the tally of finished trials, a
live display on a terminal and a heartbeat line when the output is a log.

:class:`Tally` counts outcomes per eval and estimates the time left; :class:`LiveDisplay`
draws it as a progress bar with per-eval pass/fail counts, elapsed time and ETA (redrawn
in place, on a terminal only); :class:`Heartbeat` prints the same facts as one plain line
(:meth:`Tally.progress_line`) every ``interval`` seconds from a background thread, and
:class:`ProgressSteps` says when the finished trials crossed the next step of the plan
(every 10% by default), so a CI log of a long run shows the run is alive between trials::

    progress: 1,234/20,000 trials (6%), 12 failed, 0 errored, 5 running, elapsed 1m 02s, ETA 15m 40s
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vally import RunInfo, TrialResultRecord
from vally_builtin.reporters import trial_outcome


def format_seconds(seconds: float) -> str:
    """``12.3s`` under a minute, ``4m 05s`` under an hour, ``1h 02m`` after."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, rest = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {rest:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


@dataclass
class EvalCounts:
    """Finished trials of one eval by outcome."""

    passed: int = 0
    failed: int = 0
    errored: int = 0
    other: int = 0

    @property
    def done(self) -> int:
        """Every finished trial of the eval."""
        return self.passed + self.failed + self.errored + self.other

    def label(self) -> str:
        """``3 passed, 1 failed`` (errored only when there are some)."""
        text = f"{self.passed} passed, {self.failed} failed"
        return text + (f", {self.errored} errored" if self.errored else "")


@dataclass
class Tally:
    """Trials planned, running and finished (per eval, in plan order), thread-safe.

    Attributes:
        planned: How many trials the run will execute.
        evals: The run's eval names in plan order (counts are listed in this order).
    """

    planned: int
    evals: list[str] = field(default_factory=list)
    clock: Callable[[], float] = time.monotonic
    """Where elapsed time is read (monotonic seconds)."""
    started: float = -1.0
    """When the run started, on ``clock`` (read from it when not given)."""
    running: int = 0
    counts: dict[str, EvalCounts] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if self.started < 0:
            self.started = self.clock()

    def start(self) -> None:
        """A trial was handed to a worker."""
        with self._lock:
            self.running += 1

    def finish(self, record: TrialResultRecord) -> None:
        """A trial finished: count its outcome under its eval."""
        outcome = trial_outcome(record)
        with self._lock:
            self.running = max(0, self.running - 1)
            counts = self.counts.setdefault(record.eval_name, EvalCounts())
            if outcome in ("passed", "failed", "errored"):
                setattr(counts, outcome, getattr(counts, outcome) + 1)
            else:
                counts.other += 1

    @property
    def done(self) -> int:
        """Finished trials over every eval."""
        return sum(c.done for c in self.counts.values())

    def elapsed(self) -> float:
        """Seconds since the tally was created (the run's start)."""
        return self.clock() - self.started

    def eta(self) -> float | None:
        """Seconds left at the pace so far; None before the first trial finished."""
        done = self.done
        if not done or done >= self.planned:
            return None
        return self.elapsed() / done * (self.planned - done)

    def per_eval(self) -> str:
        """The counts of each eval with finished trials: ``a: 2 passed, 0 failed · b: ...``
        (without the eval's name when the run has one eval)."""
        with self._lock:
            names = [n for n in self.evals if n in self.counts]
            names += sorted(n for n in self.counts if n not in self.evals)
            if len(names) == 1 and len(self.evals) <= 1:
                return self.counts[names[0]].label()
            return " · ".join(f"{n}: {self.counts[n].label()}" for n in names)

    def totals(self) -> EvalCounts:
        """The finished trials of every eval added up."""
        with self._lock:
            total = EvalCounts()
            for counts in self.counts.values():
                total.passed += counts.passed
                total.failed += counts.failed
                total.errored += counts.errored
                total.other += counts.other
            return total

    def progress_line(self) -> str:
        """One line for a log: finished of planned trials (and the share), failed and
        errored trials, running trials, elapsed time and the estimated time left."""
        total = self.totals()
        share = int(total.done * 100 / self.planned) if self.planned > 0 else 100
        eta = self.eta()
        line = (
            f"progress: {total.done:,}/{self.planned:,} trials ({share}%), "
            f"{total.failed:,} failed, {total.errored:,} errored, {self.running} running, "
            f"elapsed {format_seconds(self.elapsed())}"
        )
        return line + (f", ETA {format_seconds(eta)}" if eta is not None else "")


class ProgressSteps:
    """Says when the finished trials cross the next ``step`` percent of the planned ones
    (each step once, thread-safe); a step of 0 never does."""

    def __init__(self, planned: int, step: float) -> None:
        self._planned = planned
        self._step = step
        self._reached = 0
        self._lock = threading.Lock()

    def crossed(self, done: int) -> bool:
        """Whether ``done`` finished trials reach a step not reached before."""
        if self._step <= 0 or self._planned <= 0:
            return False
        step = int(done * 100 / self._planned / self._step)
        with self._lock:
            if step <= self._reached:
                return False
            self._reached = step
            return True


class LiveDisplay:
    """A progress bar redrawn in place on a terminal: done/planned, per-eval pass/fail
    counts, elapsed time and the estimated time left. Cleared when the run ends."""

    def __init__(self, run: RunInfo, tally: Tally, console: Any) -> None:
        # rich's progress display is imported on a terminal only (off one, a run's lines
        # need none of it).
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._tally = tally
        self._progress = Progress(
            TextColumn("[bold]vally {task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[counts]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
            transient=True,
        )
        self._task = self._progress.add_task(run.command, total=run.planned_trials, counts="")

    def start(self) -> None:
        """Show the display."""
        self._progress.start()

    def update(self) -> None:
        """Redraw with the tally's current counts."""
        self._progress.update(self._task, completed=self._tally.done, counts=self._tally.per_eval())

    def stop(self) -> None:
        """Clear the display."""
        self._progress.stop()


class Heartbeat:
    """Calls ``emit`` with the tally's progress line every ``interval`` seconds until
    stopped (a daemon thread waiting on an event, so stopping is immediate)."""

    def __init__(self, tally: Tally, interval: float, emit: Callable[[str], None]) -> None:
        self._tally = tally
        self._interval = interval
        self._emit = emit
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="vally-heartbeat", daemon=True)

    def start(self) -> None:
        """Start beating."""
        self._thread.start()

    def _beat(self) -> None:
        while not self._stopped.wait(self._interval):
            self._emit(self._tally.progress_line())

    def stop(self) -> None:
        """Stop beating and wait for the thread to end."""
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
