"""Run-event payloads and the emitter that delivers them to observers one by one.

pluggy stops at the first failing implementation; the emitter instead calls each
implementation on its own, so one broken reporter cannot hide events from the others.
Failures of critical observers are raised once the event is delivered. Which observers are
critical is handed in when they are registered (the session reads each reporter's metadata);
the emitter never inspects the observers themselves.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import pluggy

from vally.contracts import hookspecs
from vally.models.facts import TrialFacts
from vally.models.records import RunSummaryRecord, TrialResultRecord

log = logging.getLogger("vally.contracts.events")


@dataclass(frozen=True)
class RunInfo:
    """A run's identity and options, given to every hook.

    Attributes:
        run_id: The run's id (a UUID unless given).
        command: ``eval``, ``experiment`` or ``grade``.
        run_dir: The output folder of this run, None when nothing is written.
        planned_trials: How many trials the run will execute.
        started_at: ISO 8601 UTC start time.
        options: Presentation options (``verbose``, ``require_pass``, ...).
        experiment: The experiment name, for experiment runs.
        shard: ``"i/n"`` for a sharded run.
        evals: The names of the run's evals, in plan order.
        baseline: The baseline variant, for experiment runs.
        variants: Every variant of an experiment run, in the experiment file's order.
        snapshot: The experiment's plan snapshot (what ``plan-snapshot.json`` holds:
            evals with files and hashes, trial keys in plan order), for experiment runs:
            a read-only mapping (:func:`vally.specs.packed.plain` gives the plain
            dictionary).
        links: Runs this one continues (``experiment merge``: each shard's
            ``otel-context.json``, with ``traceId``, ``spanId`` and ``vally.shard``).
        stimuli: Each eval's selected stimuli by eval name, in the spec's order (for
            reports that list stimuli as the author wrote them).
    """

    run_id: str
    command: str
    run_dir: Path | None
    planned_trials: int
    started_at: str
    options: Mapping[str, Any] = field(default_factory=dict)
    experiment: str | None = None
    shard: str | None = None
    evals: Sequence[str] = ()
    baseline: str | None = None
    variants: Sequence[str] = ()
    snapshot: Mapping[str, Any] | None = None
    links: Sequence[Mapping[str, Any]] = ()
    stimuli: Mapping[str, Sequence[str]] = field(default_factory=dict)


class RecordCounter(Protocol):
    """Counts trial records one at a time (see ``vally_seal_counters``)."""

    def add(self, record: TrialResultRecord) -> None:
        """Count one record."""

    def state(self) -> Any:
        """What was counted, as JSON data."""


@runtime_checkable
class FactCounter(RecordCounter, Protocol):
    """A :class:`RecordCounter` that counts a trial from its facts
    (:class:`vally.TrialFacts`: key, status, verdict, metrics, usage, cost, times, and of a
    trial that failed its error, failing graders and violated constraints), so a merge or a
    seal hands it the facts it reads anyway instead of validating the whole record. A
    counter that has only ``add`` is handed whole records, as before.
    """

    def add_facts(self, facts: TrialFacts) -> bool:
        """Count one trial from its facts and return True; or count nothing and return
        False to be handed the whole record through ``add`` instead (for a trial the
        counter keeps whole, say)."""


@dataclass(frozen=True)
class RunOutcome:
    """What a run produced, given to ``vally_run_end``.

    Attributes:
        records: Every finished trial's record.
        summaries: One summary per (variant, eval).
        cancelled: The run was interrupted.
        error: Why the run stopped early (a required output could not be written), if it did.
        sealed: For a merge, what reporters' counters counted (``vally_seal_counters``):
            each key with every sealed shard's state in shard order, or with one state of
            every record; a key some shard's seal lacks is left out. Empty otherwise.
    """

    records: Sequence[TrialResultRecord]
    summaries: Sequence[RunSummaryRecord]
    cancelled: bool = False
    error: str | None = None
    sealed: Mapping[str, Sequence[Any]] = field(default_factory=dict)


@dataclass
class ObserverFailure:
    """One observer failing one event."""

    observer: str
    hook: str
    error: BaseException
    critical: bool


class EventEmitter:
    """Delivers hook calls to each registered observer separately.

    Args:
        manager: The session's pluggy manager with the selected observers registered.
        critical: The names (as registered in ``manager``) of the observers whose failures
            fail the run.
    """

    def __init__(self, manager: pluggy.PluginManager, critical: Iterable[str] = ()) -> None:
        self.manager = manager
        self.critical: set[str] = set(critical)
        self.failures: list[ObserverFailure] = []

    def mark_critical(self, name: str) -> None:
        """Make the failures of observer ``name`` (its registered name) fail the run."""
        self.critical.add(name)

    def emit(self, hook_name: str, **kwargs: Any) -> None:
        """Call every implementation of ``hook_name``; isolate non-critical failures.

        Raises:
            The first critical observer's exception, after all observers were called.
        """
        start = len(self.failures)
        for _result in self._results(hook_name, kwargs):
            pass
        critical = [f for f in self.failures[start:] if f.critical]
        for later in critical[1:]:
            log.warning("reporter %s failed in %s: %s", later.observer, hook_name, later.error)
        if critical:
            raise critical[0].error

    def collect(self, hook_name: str, **kwargs: Any) -> dict[str, Any]:
        """Call every implementation of ``hook_name`` and merge the mappings they return
        (later observers' keys win); an observer that raises, or returns something other
        than a mapping with string keys, is recorded in :attr:`failures` and left out
        (nothing is raised, whether the observer is critical or not)."""
        merged: dict[str, Any] = {}
        for plugin, result in self._results(hook_name, kwargs):
            if result is None:
                continue
            if not isinstance(result, Mapping) or not all(isinstance(k, str) for k in result):
                error = TypeError(f"{hook_name} must return a mapping with string keys")
                self._failed(plugin, hook_name, error)
                continue
            merged.update(result)
        return merged

    def _results(self, hook_name: str, kwargs: Mapping[str, Any]) -> Iterator[tuple[Any, Any]]:
        """``(observer, what it returned)`` for each implementation of ``hook_name`` that
        returned, each called on its own; one that raised is recorded instead."""
        hook = getattr(self.manager.hook, hook_name)
        for impl in reversed(hook.get_hookimpls()):
            args = {name: kwargs[name] for name in impl.argnames if name in kwargs}
            try:
                result = impl.function(**args)
            except Exception as exc:
                self._failed(impl.plugin, hook_name, exc)
                continue
            yield impl.plugin, result

    def _failed(self, plugin: object, hook_name: str, error: BaseException) -> None:
        """Record ``plugin`` failing ``hook_name`` (a non-critical failure is logged)."""
        name = self.manager.get_name(plugin) or repr(plugin)
        critical = name in self.critical
        self.failures.append(ObserverFailure(name, hook_name, error, critical))
        if not critical:
            log.warning("reporter %s failed in %s: %s", name, hook_name, error)


def new_plugin_manager() -> pluggy.PluginManager:
    """A fresh plugin manager with vally's hookspecs (one per session, never global)."""
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    return manager
