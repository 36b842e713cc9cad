"""A run's plan as data: its inputs and options, the planned evals and trials (each with
the plugins it uses), trial groups and the plan itself. Built by
:func:`vally.engine.planning.planner.build_plan`."""

from __future__ import annotations

import bisect
import dataclasses
import json
import os
from abc import abstractmethod
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload

from vally.contracts.protocols import JudgeSettings, LoadedEval, TrialKey
from vally.models.fingerprint import case_fingerprint
from vally.models.spec import (
    Constraints,
    EnvironmentConfig,
    ExecutorRef,
    GraderConfig,
    Stimulus,
    TrialResources,
)

DEFAULT_TIMEOUT = 120.0
"""Per-trial timeout when neither ``--timeout`` nor ``defaults.timeout`` sets one."""

TagFilter = Mapping[str, Sequence[str]]


@dataclass(frozen=True)
class PlanInput:
    """One eval to plan, under one variant.

    Attributes:
        loaded: The eval as loaded (for experiments: with the variant's patches applied).
        variant: The variant name; ``""`` for plain eval runs.
    """

    loaded: LoadedEval
    variant: str = ""


@dataclass(frozen=True)
class PlanOptions:
    """Run-wide choices that shape the plan (mostly CLI flags).

    Attributes:
        models: ``--model a,b`` fan-out; None to use each spec's ``defaults.model``.
        runs: ``--runs``; None to use each spec's ``defaults.runs``.
        timeout: ``--timeout`` in seconds; None for spec, then 2m.
        threshold: ``--threshold``; None for the spec's ``scoring.threshold``.
        judge_model: ``--judge-model``; None for the spec, then ``EVAL_JUDGE_MODEL``.
        tag_filter: Stimuli must match it (AND across keys, OR within a key's values).
        stimulus_patterns: ``--stimulus``: shell-style globs (case-sensitive); a stimulus runs
            when its name matches any of them. Empty selects every stimulus.
        extra_skills: Skill folders (absolute) loaded for every trial (``--skill-dir``).
        workspace_root: ``--workspace``: keep workspaces under this folder.
    """

    models: Sequence[str] | None = None
    runs: int | None = None
    timeout: float | None = None
    threshold: float | None = None
    judge_model: str | None = None
    tag_filter: TagFilter | None = None
    stimulus_patterns: Sequence[str] = ()
    extra_skills: Sequence[str] = ()
    workspace_root: Path | None = None


@dataclass(frozen=True)
class PluginRef:
    """The identity of one plugin instance: its name and its config as canonical JSON.

    Runs create one instance per distinct reference (two stimuli naming the same grader
    with the same config share it); the reference is hashable, so instances are looked up
    by it directly.
    """

    name: str
    config_json: str

    @classmethod
    def of(cls, name: str, config: Mapping[str, Any]) -> PluginRef:
        """The reference of plugin ``name`` created with ``config``."""
        return cls(name, json.dumps(config, sort_keys=True, default=str))


@dataclass(frozen=True, slots=True)
class PlannedTrial:
    """One trial of the plan and what the runner needs to run it.

    Attributes:
        key: Identity (variant, eval, stimulus, model label, 0-based trial index).
        loaded: The eval the stimulus belongs to.
        stimulus: The stimulus.
        environment: The resolved environment (skills and ``files[].src`` absolute).
        graders: Root-level graders followed by the stimulus's graders.
        constraints: Eval-level constraints merged with the stimulus's.
        timeout: Seconds for the trial.
        model: The model to run, None for the agent's default.
        executor: Which executor runs it, with its config.
        executor_ref: The executor instance's reference (see :class:`PluginRef`).
        threshold: The pass threshold, None for the all-graders-pass verdict.
        weights: Scoring weights by grader type.
        judge: Judge settings for LLM graders.
        tags: The stimulus's effective tags (eval tags overridden by stimulus tags).
        reasoning_effort: Passed to the executor.
        keep_workspace: Where to keep the workspace (``--workspace``), else None.
        resources: What the trial reserves on its node (``defaults.resources``), None for
            the runner's defaults.
        files_root: On a node of a distributed run, the folder that mirrors the driver's
            ``/`` with the spec's files (see :mod:`vally.engine.planning.spec_files`); the eval's
            folder is read there. None where the eval file itself is read.
        case_hash: The case fingerprint of the stimulus with the eval-level graders
            (:func:`vally.models.fingerprint.case_fingerprint`), computed once per stimulus
            when planning; empty when the trial was made elsewhere (see
            :meth:`fingerprint`).
    """

    key: TrialKey
    loaded: LoadedEval
    stimulus: Stimulus
    environment: EnvironmentConfig
    graders: tuple[GraderConfig, ...]
    constraints: Constraints
    timeout: float
    model: str | None
    executor: ExecutorRef
    executor_ref: PluginRef
    threshold: float | None
    weights: Mapping[str, float]
    judge: JudgeSettings
    tags: Mapping[str, str] = field(default_factory=dict)
    reasoning_effort: str | None = None
    keep_workspace: Path | None = None
    resources: TrialResources | None = None
    files_root: Path | None = None
    case_hash: str = ""

    def fingerprint(self) -> str:
        """The trial's case fingerprint: :attr:`case_hash`, else computed from its stimulus
        and the eval-level graders."""
        return self.case_hash or case_fingerprint(self.stimulus, self.loaded.spec.graders)

    @property
    def spec_dir(self) -> Path:
        """The folder of the eval file (anchor of relative paths), or its copy under
        ``files_root``."""
        folder = self.loaded.source.parent
        if self.files_root is None:
            return folder
        return self.files_root.joinpath(*Path(os.path.normpath(folder.absolute())).parts[1:])


@dataclass(frozen=True)
class PlannedEval:
    """One (variant, eval) of the plan, with its resolved run count and model list.

    Attributes:
        executor: The executor its trials run on (None when it plans no trial and its spec
            names none).
    """

    variant: str
    name: str
    loaded: LoadedEval
    runs: int
    models: tuple[str | None, ...]
    threshold: float | None
    stimuli: tuple[str, ...]
    executor: ExecutorRef | None = None


WorkspaceFor = Callable[[TrialKey], Path | None]
"""Where ``--workspace`` keeps one trial's workspace (None: not kept)."""


@dataclass(frozen=True, slots=True)
class TrialGroup:
    """The trials of one (variant, eval, stimulus, model): alike but for their index.

    A group holds what is its own; the settings every group of an eval and model shares
    (the timeout, the executor, the judge, the weights, ...) it holds once, in ``shared``.
    A plan of 10^4 stimuli held a whole planned trial and its key for each stimulus
    otherwise (about 300 bytes a stimulus, to the end of the run).

    Attributes:
        shared: A trial of the group's eval and model, holding the settings its groups
            share (its stimulus, key, environment, graders, constraints, tags and case
            fingerprint are another group's: the group's own are below).
        stimulus: The stimulus.
        environment: The stimulus's resolved environment.
        graders: Root-level graders followed by the stimulus's graders.
        constraints: Eval-level constraints merged with the stimulus's.
        tags: The stimulus's effective tags.
        case_hash: The stimulus's case fingerprint (see :attr:`PlannedTrial.case_hash`).
        runs: How many trials the group has.
    """

    shared: PlannedTrial
    stimulus: Stimulus
    environment: EnvironmentConfig
    graders: tuple[GraderConfig, ...]
    constraints: Constraints
    tags: Mapping[str, str]
    case_hash: str
    runs: int

    def key(self, index: int) -> TrialKey:
        """The key of the group's trial ``index``."""
        shared = self.shared.key
        return TrialKey(shared.variant, shared.eval_name, self.stimulus.name, shared.model, index)

    def trial(self, index: int, workspace_for: WorkspaceFor | None = None) -> PlannedTrial:
        """The group's trial ``index`` (made anew on each call), its workspace kept where
        ``workspace_for`` says (not kept without it)."""
        key = self.key(index)
        return dataclasses.replace(
            self.shared,
            key=key,
            stimulus=self.stimulus,
            environment=self.environment,
            graders=self.graders,
            constraints=self.constraints,
            tags=self.tags,
            case_hash=self.case_hash,
            keep_workspace=workspace_for(key) if workspace_for is not None else None,
        )

    @property
    def first(self) -> PlannedTrial:
        """The group's trial 0; trial ``i`` is a copy with index ``i`` in its key."""
        return self.trial(0)


class _TrialsMadeOnRead(Sequence[PlannedTrial]):
    """A sequence of trials, each made when it is read: a subclass gives its length and
    makes the trial at an index (:meth:`_at`, given one within bounds)."""

    @abstractmethod
    def _at(self, index: int) -> PlannedTrial:
        """The trial at ``index`` (``0 <= index < len(self)``)."""

    @overload
    def __getitem__(self, index: int) -> PlannedTrial: ...

    @overload
    def __getitem__(self, index: slice) -> list[PlannedTrial]: ...

    def __getitem__(self, index: int | slice) -> PlannedTrial | list[PlannedTrial]:
        if isinstance(index, slice):
            return [self._at(i) for i in range(*index.indices(len(self)))]
        return self._at(self._within(index))

    def _within(self, index: int) -> int:
        """``index`` counted from the start (negative counts from the end).

        Raises:
            IndexError: ``index`` is outside the sequence.
        """
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("plan index out of range")
        return index


class PlannedTrials(_TrialsMadeOnRead):
    """The trials of a plan in plan order, made on demand from their groups.

    A plan of a million trials holds one :class:`TrialGroup` per stimulus and model, not a
    million objects: trials are created when iterated or indexed, so memory does not grow
    with ``runs`` before trials start.

    Args:
        groups: The groups in plan order.
        workspace_for: Where each trial's workspace is kept.
    """

    def __init__(self, groups: Sequence[TrialGroup], workspace_for: WorkspaceFor) -> None:
        self.groups: tuple[TrialGroup, ...] = tuple(g for g in groups if g.runs > 0)
        self._workspace_for = workspace_for
        self._starts = array("q")  # each group's first trial: 8 bytes, not an int object
        total = 0
        for group in self.groups:
            self._starts.append(total)
            total += group.runs
        self._total = total

    def _make(self, group: TrialGroup, index: int) -> PlannedTrial:
        return group.trial(index, self._workspace_for)

    def __len__(self) -> int:
        return self._total

    def _at(self, index: int) -> PlannedTrial:
        group, offset = self._locate(index)
        return self._make(group, offset)

    def group_at(self, index: int) -> TrialGroup:
        """The group of the trial at ``index`` (no trial is created).

        Raises:
            IndexError: ``index`` is outside the plan.
        """
        return self._locate(self._within(index))[0]

    def _locate(self, index: int) -> tuple[TrialGroup, int]:
        """The group of the trial at ``index`` (within bounds) and the trial's index
        within it."""
        position = bisect.bisect_right(self._starts, index) - 1
        return self.groups[position], index - self._starts[position]

    def __iter__(self) -> Iterator[PlannedTrial]:
        for group in self.groups:
            for index in range(group.runs):
                yield self._make(group, index)

    def keys(self) -> Iterator[TrialKey]:
        """The trial keys in plan order (no trial is created)."""
        for group in self.groups:
            for index in range(group.runs):
                yield group.key(index)

    def distinct(self) -> Sequence[PlannedTrial]:
        """One trial per group, each made when read: every executor, grader, environment
        and judge setting of the plan appears in them (for creating plugins once per
        distinct config)."""
        return _GroupFirsts(self.groups)


class _GroupFirsts(_TrialsMadeOnRead):
    """Trial 0 of each of ``groups``, made when read (see :meth:`PlannedTrials.distinct`)."""

    def __init__(self, groups: tuple[TrialGroup, ...]) -> None:
        self._groups = groups

    def __len__(self) -> int:
        return len(self._groups)

    def _at(self, index: int) -> PlannedTrial:
        return self._groups[index].first

    def __iter__(self) -> Iterator[PlannedTrial]:
        for group in self._groups:
            yield group.first


def trial_keys(trials: Sequence[PlannedTrial]) -> Iterator[TrialKey]:
    """The keys of ``trials`` in order, without making each trial of a lazy plan."""
    if isinstance(trials, PlannedTrials):
        return trials.keys()
    return (trial.key for trial in trials)


@dataclass(frozen=True)
class Plan:
    """The whole plan: trials in plan order, and the evals they came from."""

    trials: Sequence[PlannedTrial]
    evals: tuple[PlannedEval, ...]

    @property
    def keys(self) -> list[TrialKey]:
        """The trial keys in plan order."""
        return list(trial_keys(self.trials))

    @property
    def distinct_trials(self) -> Sequence[PlannedTrial]:
        """Trials that together hold every distinct setting of the plan (one per stimulus
        and model): enough to create and validate the plugins the plan needs."""
        if isinstance(self.trials, PlannedTrials):
            return self.trials.distinct()
        return self.trials

    @property
    def lint_only(self) -> bool:
        """True when the plan runs nothing (every eval has ``runs: 0`` or no stimulus)."""
        return not self.trials
