"""Run events broadcast to reporters and other observers, as pluggy hook specifications.

A reporter is a plugin class (group ``vally.reporters``) whose methods are marked with
:data:`vally.hookimpl` and named after the hooks below. Only the reporters a run selects
are registered. Arguments are keyword-only and can only grow: implement the subset you need.

An observer that raises is reported as a warning and the run goes on, unless the observer
is critical (a reporter declaring ``ReporterMetadata(..., critical=True)``, as the results
writer does), in which case the run fails.

What ``vally experiment run`` asks of the comparison (the ``--until-decided`` gate, the
decision after the run) are the experiment hooks of :mod:`vally.engine.experiment_hooks`,
which hook plugins (group ``vally.hooks``) implement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from collections.abc import Mapping

    from vally.contracts.events import RecordCounter, RunInfo, RunOutcome
    from vally.contracts.protocols import TrialKey
    from vally.models.records import GraderResult, TrialResultRecord

PROJECT = "vally"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)
"""Marks a method or function as an implementation of a vally hook."""


@hookspec
def vally_run_start(run: RunInfo) -> None:
    """Called once before the first trial starts.

    Args:
        run: The run's identity, output folder, planned trial count and options.
    """


@hookspec
def vally_trial_start(run: RunInfo, key: TrialKey) -> None:
    """Called when a trial is handed to a worker, before its sandbox opens.

    Args:
        run: The run.
        key: The trial's identity (variant, eval, stimulus, model, trial index).
    """


@hookspec
def vally_grader_result(run: RunInfo, key: TrialKey, result: GraderResult) -> None:
    """Called after each grader of a trial has produced its result.

    Args:
        run: The run.
        key: The trial graded.
        result: The grader's result (frozen; do not mutate).
    """


@hookspec
def vally_trial_end(run: RunInfo, record: TrialResultRecord) -> None:
    """Called once per finished trial (passed, failed, errored or cancelled), in completion
    order. The record is exactly the line written to ``results.jsonl``.

    Args:
        run: The run.
        record: The trial's complete result record.
    """


@hookspec
def vally_run_end(run: RunInfo, outcome: RunOutcome) -> None:
    """Called once after the last trial, also when the run was interrupted.

    Args:
        run: The run.
        outcome: Every record, the per-eval summaries, and whether the run was cancelled.
    """


@hookspec
def vally_seal_counters(run: RunInfo) -> Mapping[str, RecordCounter] | None:
    """Called when a finished shard seals itself (``shard-seal.json``) and when a merge
    reads unsealed shards, on a reporter of the kind ``vally experiment merge`` uses.
    Return counters under keys of its own (or None): each record is read once and fed to
    every counter's ``add`` (a :class:`~vally.RecordCounter`), or to its ``add_facts``
    when it has one (a :class:`~vally.FactCounter`: the facts the merge reads of each line
    anyway, so no record is validated whole unless a counter asks for it); the seal keeps
    each ``state()`` (JSON data), and a merge hands the states (a sealed shard's each, in
    shard order; one of every record when it read them) to the reporter's
    ``vally_run_end`` as ``outcome.sealed[key]``, so it adds them up instead of reading
    every record again. A counter that raises is left out.

    Args:
        run: The run as the merge will describe it (its ``snapshot``, variants, baseline).
    """
