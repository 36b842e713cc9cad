"""The planner: from loaded evals and run options to an ordered, lazily made sequence of
planned trials.

A plan enumerates ``variant x eval x stimulus x model x trial`` in that order. Each
:class:`PlannedTrial` carries everything the trial runner needs, resolved once: the eval,
the stimulus, its merged environment, graders (root-level ``graders:`` first, then the
stimulus's), merged constraints, timeout, model, executor and scoring settings.

Variants are a first-class input (:class:`PlanInput` holds a variant name and that
variant's :class:`~vally.contracts.protocols.LoadedEval`), so experiments reuse the same planner;
``vally eval`` plans with the variant ``""``.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vally.contracts.protocols import JudgeSettings, LoadedEval, TrialKey
from vally.engine.planning.plan import (
    DEFAULT_TIMEOUT,
    Plan,
    PlanInput,
    PlannedEval,
    PlannedTrial,
    PlannedTrials,
    PlanOptions,
    PluginRef,
    TagFilter,
    TrialGroup,
)
from vally.engine.records.run_folder import model_label
from vally.errors import ConfigError, MissingExecutorError
from vally.models.fingerprint import case_fingerprint
from vally.models.limits import PLAN_TRIALS
from vally.models.spec import (
    Constraints,
    EnvironmentConfig,
    EvalSpec,
    ExecutorRef,
    Stimulus,
)


def eval_name(loaded: LoadedEval) -> str:
    """The eval's display name: ``name`` from the spec, else its folder's name."""
    if loaded.spec.name:
        return loaded.spec.name
    parent = loaded.source.parent.name
    stem = loaded.source.name.split(".")[0]
    return parent if stem in {"eval", ""} and parent else stem or "eval"


def parse_models(value: str | None) -> list[str] | None:
    """``--model a,b`` -> ``["a", "b"]``; None or blank -> None.

    Raises:
        ConfigError: An empty item (``a,,b``) or a duplicate model.
    """
    if value is None or not value.strip():
        return None
    items = [part.strip() for part in value.split(",")]
    if any(not item for item in items):
        raise ConfigError(f"--model {value!r} has an empty item", hint="write --model a,b")
    duplicates = sorted({m for m in items if items.count(m) > 1})
    if duplicates:
        raise ConfigError(f"--model lists {', '.join(duplicates)} more than once")
    return items


def merge_constraints(eval_level: Constraints | None, stimulus: Constraints | None) -> Constraints:
    """Stimulus constraints over eval-level ones: limits set on the stimulus win, lists of
    expected/rejected tools and skills are united (eval-level first)."""
    if eval_level is None and stimulus is None:
        return Constraints()
    if eval_level is None:
        return stimulus or Constraints()
    if stimulus is None:
        return eval_level
    merged: dict[str, Any] = eval_level.model_dump(exclude_unset=True)
    for name, value in stimulus.model_dump(exclude_unset=True).items():
        if isinstance(value, list):
            base = list(merged.get(name) or [])
            merged[name] = base + [v for v in value if v not in base]
        else:
            merged[name] = value
    return Constraints.model_validate(merged)


def judge_settings(spec: EvalSpec, judge_model: str | None) -> JudgeSettings:
    """Judge settings: CLI over spec over ``EVAL_JUDGE_MODEL``/``EVAL_JUDGE_REASONING_EFFORT``
    (grader ``config.model`` overrides all of them when grading)."""
    defaults = spec.defaults
    return JudgeSettings(
        model=judge_model or defaults.judge_model or os.environ.get("EVAL_JUDGE_MODEL") or None,
        reasoning_effort=defaults.judge_reasoning_effort
        or os.environ.get("EVAL_JUDGE_REASONING_EFFORT")
        or None,
        provider=defaults.judge_provider,
        timeout=defaults.judge_timeout or DEFAULT_TIMEOUT,
    )


def effective_tags(spec: EvalSpec, stimulus: Stimulus) -> dict[str, str]:
    """Eval tags overridden key by key by the stimulus's tags."""
    return {**spec.tags, **stimulus.tags}


def tags_match(tags: Mapping[str, str], tag_filter: TagFilter | None) -> bool:
    """AND across keys, OR within a key's values; an empty or absent filter matches."""
    if not tag_filter:
        return True
    return all(tags.get(key) in set(values) for key, values in tag_filter.items())


EnvironmentResolver = Callable[[LoadedEval, Stimulus], EnvironmentConfig]
"""Resolves a stimulus's environment (root, named and stimulus merged, paths absolute)."""


def _with_extra_skills(env: EnvironmentConfig, extra: Sequence[str]) -> EnvironmentConfig:
    if not extra:
        return env
    skills = list(env.skills) + [s for s in extra if s not in env.skills]
    return env.model_copy(update={"skills": skills})


def workspace_path(root: Path, key: TrialKey, *, many_evals: bool, many_models: bool) -> Path:
    """Where ``--workspace`` keeps a trial's workspace:
    ``<root>/[<variant>/][<eval>/]<stimulus>/[<model>/]trial-<n>`` (the eval and model levels
    appear only when the run has several evals or models), named like trial folders
    (:func:`~vally.engine.records.run_folder.name_folder`)."""
    from vally.engine.records.run_folder import name_folder, safe_name

    parts: list[str] = []
    if key.variant:
        parts.append(safe_name(key.variant))
    if many_evals:
        parts.append(name_folder(key.eval_name))
    parts.append(name_folder(key.stimulus))
    if many_models:
        parts.append(name_folder(key.model))
    return root.joinpath(*parts, f"trial-{key.trial}")


def _check_stimuli(loaded: LoadedEval) -> None:
    """Reject what would make trials overwrite each other or fail only after running:
    two stimuli with one name, and a grader ``turn`` beyond its stimulus's turns."""
    spec = loaded.spec
    first: dict[str, int] = {}
    for index, stimulus in enumerate(spec.stimuli):
        previous = first.setdefault(stimulus.name, index)
        if previous != index:
            raise ConfigError(
                f"{loaded.source}: stimuli[{index}] is named {stimulus.name!r} like "
                f"stimuli[{previous}]; their trials would overwrite each other's files",
                hint="give every stimulus of the file a distinct 'name:' (vally lint finds these)",
            )
        turns = len(stimulus.prompts)
        for config in [*spec.graders, *stimulus.graders]:
            if config.turn is not None and config.turn >= turns:
                raise ConfigError(
                    f"{loaded.source}: grader '{config.label}' of stimulus {stimulus.name!r} "
                    f"has turn: {config.turn}, but the stimulus has {turns} "
                    f"turn{'s' if turns != 1 else ''}",
                    hint=f"turns are numbered from 0, so the last is {turns - 1}; fix 'turn:' "
                    "or add turns to the stimulus",
                )


def _check_sources(loaded: LoadedEval, stimulus: Stimulus, env: EnvironmentConfig) -> None:
    """Every ``files[].src`` must exist before any trial starts (not fail trial by trial)."""
    for entry in env.files:
        if not Path(entry.src).exists():
            raise ConfigError(
                f"{loaded.source}: stimulus {stimulus.name!r}: files[].src "
                f"{entry.src!r} does not exist",
                hint="src is relative to the eval file; fix the path or create the file "
                "(vally lint reports this as environment-file-not-found)",
            )


@dataclass(frozen=True)
class _Selected:
    """One eval of the plan with its name, selected stimuli, models and run count."""

    item: PlanInput
    name: str
    stimuli: list[Stimulus]
    models: list[str | None]
    runs: int


def _select(
    inputs: Sequence[PlanInput],
    options: PlanOptions,
    stimulus_filter: Callable[[LoadedEval, Stimulus], bool] | None,
) -> list[_Selected]:
    """Name each eval, check it, and pick its stimuli, models and run count."""
    seen: dict[tuple[str, str], Path] = {}
    selected: list[_Selected] = []
    for item in inputs:
        loaded = item.loaded
        spec = loaded.spec
        name = eval_name(loaded)
        previous = seen.get((item.variant, name))
        if previous is not None:
            raise ConfigError(
                f"two evals are named {name!r}: {previous} and {loaded.source}",
                hint="give each eval file a distinct 'name:'",
            )
        seen[(item.variant, name)] = loaded.source
        _check_stimuli(loaded)
        runs = options.runs if options.runs is not None else spec.defaults.runs
        models: list[str | None] = list(options.models) if options.models else [spec.defaults.model]
        stimuli = [
            s
            for s in spec.stimuli
            if tags_match(effective_tags(spec, s), options.tag_filter)
            and name_matches(s.name, options.stimulus_patterns)
            and (stimulus_filter is None or stimulus_filter(loaded, s))
        ]
        selected.append(_Selected(item, name, stimuli, models, runs))
    _check_stimulus_patterns(options.stimulus_patterns, selected)
    return selected


def name_matches(name: str, patterns: Sequence[str]) -> bool:
    """True when ``name`` matches any shell-style glob of ``patterns`` (case-sensitive);
    no patterns match every name."""
    return not patterns or any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _check_stimulus_patterns(patterns: Sequence[str], selected: Sequence[_Selected]) -> None:
    """Every ``--stimulus`` pattern must name a stimulus of some selected eval.

    Raises:
        ConfigError: A pattern matches no stimulus; the message lists the names that exist.
    """
    names = list(dict.fromkeys(s.name for item in selected for s in item.item.loaded.spec.stimuli))
    for pattern in patterns:
        if not any(fnmatch.fnmatchcase(n, pattern) for n in names):
            shown = ", ".join(names[:30])
            if len(names) > 30:
                shown += f", ... ({len(names)} in all)"
            raise ConfigError(
                f"--stimulus {pattern!r} matches no stimulus of the selected evals; "
                f"they have: {shown or '(none)'}",
                hint="use a stimulus name or a glob such as 'auth-*' (case-sensitive)",
            )


def _executor_of(selected: _Selected, default_executor: str | None) -> ExecutorRef:
    executor = selected.item.loaded.spec.defaults.executor
    if executor is not None:
        return executor
    if default_executor is None:
        raise MissingExecutorError(
            f"eval {selected.name!r} ({selected.item.loaded.source}) does not say which "
            "executor runs it",
            hint="set 'defaults.executor' in the eval file, e.g. 'executor: command' "
            "with a config, or 'executor: mock'",
        )
    return ExecutorRef(name=default_executor)


def _groups_of(
    selected: _Selected,
    options: PlanOptions,
    resolve_environment: EnvironmentResolver,
    executor: ExecutorRef,
) -> list[TrialGroup]:
    """The trial groups of one eval: stimulus x model, in that order (each of ``runs``)."""
    loaded = selected.item.loaded
    spec = loaded.spec
    executor_ref = PluginRef.of(executor.name, executor.config)
    timeout = options.timeout or spec.defaults.timeout or DEFAULT_TIMEOUT
    judge = judge_settings(spec, options.judge_model)
    threshold = options.threshold if options.threshold is not None else spec.scoring.threshold
    weights = dict(spec.scoring.weights)
    groups: list[TrialGroup] = []
    shared: list[PlannedTrial] = []  # each model's first trial: the settings its groups share
    # one object for every stimulus without constraints, graders or tags of its own, not
    # one each
    eval_constraints = merge_constraints(spec.constraints, None)
    eval_graders = tuple(spec.graders)
    eval_tags = dict(spec.tags)
    for stimulus in selected.stimuli:
        environment = _with_extra_skills(
            resolve_environment(loaded, stimulus), options.extra_skills
        )
        _check_sources(loaded, stimulus, environment)
        graders = eval_graders + tuple(stimulus.graders) if stimulus.graders else eval_graders
        case_hash = case_fingerprint(stimulus, spec.graders)
        constraints = (
            eval_constraints
            if stimulus.constraints is None
            else merge_constraints(spec.constraints, stimulus.constraints)
        )
        tags = effective_tags(spec, stimulus) if stimulus.tags else eval_tags
        for position, model in enumerate(selected.models):
            if position == len(shared):  # the first stimulus's trial of this model
                key = TrialKey(
                    selected.item.variant, selected.name, stimulus.name, model_label(model), 0
                )
                shared.append(
                    PlannedTrial(
                        key=key,
                        loaded=loaded,
                        stimulus=stimulus,
                        environment=environment,
                        graders=graders,
                        constraints=constraints,
                        timeout=timeout,
                        model=model,
                        executor=executor,
                        executor_ref=executor_ref,
                        threshold=threshold,
                        weights=weights,
                        judge=judge,
                        tags=tags,
                        reasoning_effort=spec.defaults.reasoning_effort,
                        resources=spec.defaults.resources,
                        case_hash=case_hash,
                    )
                )
            groups.append(
                TrialGroup(
                    shared[position],
                    stimulus,
                    environment,
                    graders,
                    constraints,
                    tags,
                    case_hash,
                    selected.runs,
                )
            )
    return groups


def _check_plan_size(selected: Sequence[_Selected]) -> None:
    """Refuse a plan of more trials than ``VALLY_MAX_TRIALS`` before anything is made.

    Raises:
        ConfigError: Naming the biggest eval, the total and how to raise the limit.
    """
    limit = PLAN_TRIALS.value()
    sizes = [(len(s.stimuli) * len(s.models) * s.runs, s) for s in selected]
    total = sum(size for size, _ in sizes)
    if total <= limit:
        return
    size, biggest = max(sizes, key=lambda pair: pair[0])
    where = f" ({biggest.item.variant})" if biggest.item.variant else ""
    raise ConfigError(
        f"the run would plan {total} trials, more than the limit of {limit}; eval "
        f"{biggest.name!r}{where} alone plans {size} ({len(biggest.stimuli)} stimuli x "
        f"{len(biggest.models)} model(s) x runs {biggest.runs})",
        hint=f"lower 'runs' (or --runs), select fewer stimuli or models; {PLAN_TRIALS.hint(limit)}",
    )


def build_plan(
    inputs: Sequence[PlanInput],
    options: PlanOptions,
    *,
    resolve_environment: EnvironmentResolver,
    stimulus_filter: Callable[[LoadedEval, Stimulus], bool] | None = None,
    default_executor: str | None = None,
) -> Plan:
    """Expand evals into planned trials, in plan order.

    Args:
        inputs: The evals (with their variant) in the order they should run.
        options: Run-wide choices.
        resolve_environment: Resolves one stimulus's environment.
        stimulus_filter: Extra per-stimulus selection (e.g. a suite's tag filter); the
            ``options.tag_filter`` applies as well.
        default_executor: Executor for specs that name none; None makes that an error.

    Raises:
        MissingExecutorError: A spec names no executor and there is no default.
        ConfigError: Two evals of one variant share a name; a spec cannot be planned.
    """
    selected = _select(inputs, options, stimulus_filter)
    _check_plan_size(selected)
    running = [s for s in selected if s.stimuli and s.runs]
    many_evals = len({(s.item.variant, s.name) for s in running}) > 1
    many_models = len({model_label(m) for s in selected for m in s.models}) > 1

    def workspace_for(key: TrialKey) -> Path | None:
        if options.workspace_root is None:
            return None
        return workspace_path(
            options.workspace_root, key, many_evals=many_evals, many_models=many_models
        )

    groups: list[TrialGroup] = []
    evals: list[PlannedEval] = []
    for item in selected:
        spec = item.item.loaded.spec
        threshold = options.threshold if options.threshold is not None else spec.scoring.threshold
        executor: ExecutorRef | None = spec.defaults.executor
        if item.runs and item.stimuli:
            executor = _executor_of(item, default_executor)
            groups += _groups_of(item, options, resolve_environment, executor)
        evals.append(
            PlannedEval(
                variant=item.item.variant,
                name=item.name,
                loaded=item.item.loaded,
                runs=item.runs,
                models=tuple(item.models),
                threshold=threshold,
                stimuli=tuple(s.name for s in item.stimuli),
                executor=executor,
            )
        )
    return Plan(trials=PlannedTrials(groups, workspace_for), evals=tuple(evals))
