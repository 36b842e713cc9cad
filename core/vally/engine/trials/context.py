"""What every trial of a run shares: the run context, the trial gate, the contextvars of
the running attempt and node, and trial and run ids."""

from __future__ import annotations

import contextvars
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from vally.contracts.events import EventEmitter, RunInfo
from vally.contracts.llm import LLMProvider
from vally.contracts.protocols import Executor, TrialKey
from vally.engine.planning.plan import PlannedTrial, PluginRef
from vally.engine.records.run_folder import Scrubber
from vally.models.pricing import PriceTable
from vally.models.records import (
    ExperimentBlock,
    TrialResultRecord,
)

TIMEOUT_GRACE = 5.0
"""Seconds the kernel waits past a trial's timeout before cancelling the executor itself
(executors are expected to stop their agent at the timeout on their own)."""

Phase = Literal["setup", "execute", "grade", "cleanup", "plan"]

ATTEMPT: contextvars.ContextVar[int] = contextvars.ContextVar("vally_trial_attempt", default=0)
"""The 0-based attempt of the trial running in the current task (``--max-retries``)."""

NODE: contextvars.ContextVar[str] = contextvars.ContextVar("vally_trial_node", default="")
"""Where the trial in the current task runs: the runner's node id (a Ray node id with
``--runner ray``), empty for this machine; written as ``node`` into the trial's
``metadata.json`` (this machine's host name when empty)."""

RETRIED_PHASES = frozenset({"setup", "execute"})
"""Operational failures of these phases are retried with ``--max-retries``."""

GraderFactory = Callable[[Any], Any]
"""Hands out the grader instance for a grader config entry (one per distinct reference)."""


@dataclass
class RunContext:
    """What every trial of a run shares.

    Attributes:
        run: The run's identity (given to every hook).
        backend: The started backend.
        executors: Executor instances by reference (see :class:`PluginRef`).
        create_grader: Builds the grader for a config entry (cached, validated at plan time).
        emitter: Delivers run events to reporters.
        scrubber: Hides secrets in everything written.
        run_dir: Where per-trial folders go; None writes no per-trial files.
        skip_grade: Execute without grading.
        llm: The LLM provider for judges and LLM executors, when configured.
        experiment_blocks: The ``experiment`` provenance block of each (variant, eval),
            added to its records (experiment runs).
        prices: Prices the records' ``cost`` (the built-in list prices by default).
        judge_llm: The provider graders call (the LLM provider behind the judge cache);
            None gives them ``llm``.
    """

    run: RunInfo
    backend: Any
    executors: Mapping[PluginRef, Executor]
    create_grader: GraderFactory
    emitter: EventEmitter
    scrubber: Scrubber = field(default_factory=Scrubber)
    run_dir: Path | None = None
    skip_grade: bool = False
    llm: LLMProvider | None = None
    experiment_blocks: Mapping[tuple[str, str], ExperimentBlock] = field(default_factory=dict)
    prices: PriceTable = field(default_factory=PriceTable)
    judge_llm: LLMProvider | None = None


class TrialGate(Protocol):
    """Decides, while a run goes on, which planned trials still need to run (sequential
    experiments: ``vally experiment run --until-decided``)."""

    def order(self, trials: Sequence[PlannedTrial]) -> list[PlannedTrial]:
        """The order to schedule ``trials`` in (for example round by round)."""
        ...

    def admit(self, trial: PlannedTrial) -> bool:
        """True when ``trial`` should still start; a trial refused is not run and leaves no
        record."""
        ...

    def observe(self, record: TrialResultRecord) -> None:
        """Take a finished trial into account."""
        ...


def trial_id(key: TrialKey) -> str:
    """The record's ``trialId``: ``[variant/]eval/stimulus/model/trial``."""
    return key.as_id() if key.variant else key.as_id()[1:]


def new_run_id() -> str:
    """A fresh run id (a UUID4)."""
    return str(uuid.uuid4())
