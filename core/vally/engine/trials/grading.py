"""Grading one trial: run its graders, check its constraints, score it.

:func:`grade_trial` is the kernel's only entry point here. It knows nothing about where
graders come from: the caller passes ``create_grader`` (the session validates each grader's
config against its plugin and builds it). For each grader entry, in spec order:

1. the trajectory is scoped to the entry's ``turn`` when set (``Trajectory.for_turn``); a
   turn beyond the stimulus's turns is an errored result;
2. the grader is built and run; one whose metadata declares ``needs_llm`` without an LLM
   provider, or ``needs_workspace`` without a sandbox, is not run but errored. It runs off
   the run's event loop (:mod:`vally.engine.trials.isolation`), bounded by the entry's ``timeout``
   (:data:`DEFAULT_GRADER_TIMEOUT` by default), so a grader that blocks or never returns
   cannot stop other trials or Ctrl-C. A timeout, a :class:`~vally.errors.GradingError`,
   or any other exception, becomes a result with ``status: error``, ``passed: false``,
   ``score: 0`` and the message as evidence, and the trial is marked errored (operational,
   not a low score);
3. the result is labelled (name, type, ``required``, ``turn``) and weighted with
   ``weights[type]`` (default 1).

Constraints (``expect_tools``/``reject_tools``/``expect_skills``/``reject_skills`` as name
regexes searched, with a time bound, in tool-call and skill-activation names; ``max_*``
limits checked against the end reason and the metrics of the whole trajectory) become
``constraint_violations``, which fail the trial. Scoring rules are in
:mod:`vally.engine.records.scoring`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from vally.contracts.llm import LLMProvider
from vally.contracts.protocols import GradeContext, Grader, JudgeSettings, Sandbox
from vally.engine.records.scoring import trial_verdict
from vally.engine.trials.isolation import IsolatedTimeout, bridge, run_isolated
from vally.engine.trials.tracebacks import format_traceback, plugin_location
from vally.errors import ConfigError, GradingError, VallyError
from vally.models.records import GradeResult, GraderResult
from vally.models.spec import Constraints, GraderConfig, Stimulus
from vally.models.trajectory import Trajectory
from vally.plugins import capabilities

if TYPE_CHECKING:
    import regex

__all__ = [
    "DEFAULT_GRADER_TIMEOUT",
    "check_constraints",
    "error_result",
    "grade_trial",
    "scope_trajectory",
]

DEFAULT_GRADER_TIMEOUT = 600.0
"""Seconds a grader may take when its entry sets no ``timeout``."""


def error_result(config: GraderConfig, message: str, weight: float = 1.0) -> GraderResult:
    """An operational failure of one grader: ``status: error``, not passed, score 0."""
    return GraderResult(
        name=config.label,
        type=config.type,
        passed=False,
        score=0.0,
        evidence=message,
        status="error",
        required=config.required,
        weight=weight,
        turn=config.turn,
    )


def scope_trajectory(
    trajectory: Trajectory, stimulus: Stimulus, config: GraderConfig
) -> Trajectory:
    """The trajectory a grader entry sees: the whole one, or one turn of it.

    Raises:
        ConfigError: ``turn`` is beyond the stimulus's turns.
    """
    if config.turn is None:
        return trajectory
    turns = len(stimulus.prompts)
    if config.turn >= turns:
        raise ConfigError(
            f"grader '{config.label}' of stimulus '{stimulus.name}' has turn: {config.turn}, "
            f"but the stimulus has {turns} turn{'s' if turns != 1 else ''} "
            f"(turns are numbered from 0, so the last is {turns - 1})"
        )
    return trajectory.for_turn(config.turn)


def _describe_exception(config: GraderConfig, exc: BaseException) -> str:
    if isinstance(exc, (ConfigError, GradingError)):
        return exc.render()
    if isinstance(exc, VallyError):
        return f"grader '{config.label}' ({config.type}): {exc.render()}"
    message = str(exc) or "(no message)"
    location = plugin_location(exc)
    where = f" (at {location})" if location else ""
    return f"grader '{config.label}' ({config.type}) raised {type(exc).__name__}: {message}{where}"


def _crash_result(config: GraderConfig, exc: Exception, weight: float) -> GraderResult:
    """The error result of a grader that raised; an unexpected exception (not a vally
    error) keeps its traceback and the plugin's ``location`` in ``metadata``."""
    result = error_result(config, _describe_exception(config, exc), weight)
    if isinstance(exc, VallyError):
        return result
    crash = {"location": plugin_location(exc), "traceback": format_traceback(exc)}
    return result.model_copy(update={"metadata": crash})


def _label(result: GraderResult, config: GraderConfig, weight: float) -> GraderResult:
    return result.model_copy(
        update={
            "name": result.name or config.label,
            "type": config.type,
            "required": config.required,
            "turn": config.turn,
            "weight": weight,
        }
    )


CONSTRAINT_REGEX_TIMEOUT = 10.0
"""Seconds one constraint pattern may take on one tool or skill name."""


def _compile(pattern: str, where: str) -> regex.Pattern[str]:
    import regex  # on the first constraint pattern, not at start-up

    try:
        re.compile(pattern)  # Python's syntax is the contract
        return regex.compile(pattern, regex.VERSION0)
    except (re.error, regex.error) as exc:
        raise ConfigError(
            f"constraints.{where}: {pattern!r} is not a valid regular expression ({exc}); "
            "fix the pattern or escape special characters"
        ) from None


def _found(compiled: regex.Pattern[str], name: str) -> bool:
    try:
        return compiled.search(name, timeout=CONSTRAINT_REGEX_TIMEOUT) is not None
    except TimeoutError:
        raise GradingError(
            f"the constraint pattern /{compiled.pattern}/ took longer than "
            f"{CONSTRAINT_REGEX_TIMEOUT:g}s on a name of {len(name):,} characters",
            hint="simplify the pattern (nested quantifiers backtrack exponentially)",
        ) from None


def check_constraints(trajectory: Trajectory, constraints: Constraints | None) -> list[str]:
    """Every way the trajectory breaks the constraints, as readable messages.

    A run the executor stopped at a limit (end reason ``max_turns``, ``max_tokens``,
    ``max_duration`` or ``max_tool_calls``) is a violation even when ``constraints`` is None.

    Raises:
        ConfigError: A tool or skill pattern is not a valid regular expression.
        GradingError: A pattern took too long on a name (see
            :data:`CONSTRAINT_REGEX_TIMEOUT`).
    """
    constraints = constraints or Constraints()
    violations: list[str] = []
    tools = [e.data.tool_name for e in trajectory.events if e.type == "tool_call"]
    skills = [e.data.skill_name for e in trajectory.events if e.type == "skill_activation"]
    for name in trajectory.metrics.skill_activation_breakdown:
        if name not in skills:
            skills.append(name)
    for kind, names, expect, reject in (
        ("tools", tools, constraints.expect_tools, constraints.reject_tools),
        ("skills", skills, constraints.expect_skills, constraints.reject_skills),
    ):
        for pattern in expect:
            compiled = _compile(pattern, f"expect_{kind}")
            if not any(_found(compiled, n) for n in names):
                violations.append(f"expect_{kind}: nothing matching '{pattern}' was used")
        for pattern in reject:
            compiled = _compile(pattern, f"reject_{kind}")
            hits = sorted({n for n in names if _found(compiled, n)})
            if hits:
                violations.append(f"reject_{kind}: '{pattern}' matched {', '.join(hits)}")
    metrics = trajectory.metrics
    usage = metrics.token_usage
    total_tokens = max(usage.total_tokens, usage.input_tokens + usage.output_tokens)
    measured: dict[str, tuple[float | None, float, str]] = {
        "max_turns": (constraints.max_turns, metrics.turn_count, "turns"),
        "max_tokens": (constraints.max_tokens, total_tokens, "tokens"),
        "max_tool_calls": (constraints.max_tool_calls, metrics.tool_call_count, "tool calls"),
        "max_duration": (
            constraints.max_duration,
            metrics.wall_time_ms / 1000,
            "seconds of wall time",
        ),
    }
    for field, (limit, value, unit) in measured.items():
        stopped = trajectory.end_reason == field
        if limit is not None and value > limit + (1e-9 if field == "max_duration" else 0):
            shown = f"{value:g}" if isinstance(value, float) else str(value)
            violations.append(f"{field} exceeded: {shown} {unit} > {limit:g}")
        elif stopped:
            detail = f": {trajectory.end_detail}" if trajectory.end_detail else ""
            violations.append(f"{field}: the run was stopped at the limit{detail}")
    return violations


async def grade_trial(
    trajectory: Trajectory,
    stimulus: Stimulus,
    graders: Sequence[GraderConfig],
    *,
    create_grader: Callable[[GraderConfig], Grader],
    sandbox: Sandbox | None = None,
    spec_dir: Path | None = None,
    llm: LLMProvider | None = None,
    judge: JudgeSettings | None = None,
    weights: Mapping[str, float] | None = None,
    threshold: float | None = None,
    constraints: Constraints | None = None,
    on_result: Callable[[GraderResult], None] | None = None,
) -> GradeResult:
    """Run every grader on one trial and decide it.

    Args:
        trajectory: The trial's trajectory (unscoped).
        stimulus: The stimulus it answered.
        graders: The grader entries to run, in order (stimulus and eval-level ones).
        create_grader: Builds a grader from its entry (validating its config).
        sandbox: The trial's open sandbox, None when re-grading without a workspace.
        spec_dir: The eval file's folder.
        llm: The LLM provider for judge graders.
        judge: Resolved judge settings.
        weights: ``scoring.weights``: weight per grader type (default 1).
        threshold: Pass threshold, or None for the binary verdict.
        constraints: The stimulus's effective constraints.
        on_result: Called with each grader result as soon as it is known.

    Raises:
        ConfigError: A constraint pattern is invalid (checked before any grader runs).
    """
    weight_map = dict(weights or {})
    for key, value in weight_map.items():
        if not math.isfinite(value) or value < 0:
            raise ConfigError(f"scoring.weights['{key}'] is {value}; weights must be numbers >= 0")
    violations = check_constraints(trajectory, constraints)
    judge_settings = judge or JudgeSettings()
    results: list[GraderResult] = []
    for config in graders:
        weight = weight_map.get(config.type, 1.0)
        result = await _run_one(
            config,
            trajectory=trajectory,
            stimulus=stimulus,
            create_grader=create_grader,
            sandbox=sandbox,
            spec_dir=spec_dir,
            llm=llm,
            judge=judge_settings,
            weight=weight,
        )
        # Evidence quoting agent text or file names may hold lone surrogates.
        result = result.writable()
        results.append(result)
        if on_result is not None:
            on_result(result)
    return trial_verdict(results, threshold, violations)


async def _run_one(
    config: GraderConfig,
    *,
    trajectory: Trajectory,
    stimulus: Stimulus,
    create_grader: Callable[[GraderConfig], Grader],
    sandbox: Sandbox | None,
    spec_dir: Path | None,
    llm: LLMProvider | None,
    judge: JudgeSettings,
    weight: float,
) -> GraderResult:
    try:
        scoped = scope_trajectory(trajectory, stimulus, config)
        grader = create_grader(config)
        if capabilities.needs_llm(grader) and llm is None:
            return error_result(
                config,
                f"grader '{config.label}' ({config.type}) needs an LLM provider, but none "
                "is configured; configure one (llm settings in .vally.yaml) or drop the grader",
                weight,
            )
        if capabilities.needs_workspace(grader) and sandbox is None:
            return error_result(
                config,
                f"grader '{config.label}' ({config.type}) needs the trial workspace, but none "
                "is available; re-grade with a workspace, or drop the grader",
                weight,
            )
        context = GradeContext(
            trajectory=scoped,
            stimulus=stimulus,
            grader=config,
            sandbox=sandbox,
            spec_dir=spec_dir,
            llm=llm,
            judge=judge,
        )
        timeout = config.timeout if config.timeout is not None else DEFAULT_GRADER_TIMEOUT
        if capabilities.is_nonblocking(grader):
            result = await _in_loop_grade(grader, context, timeout)
        else:
            result = await _isolated_grade(grader, context, timeout)
        if not isinstance(result, GraderResult):
            return error_result(
                config,
                f"grader '{config.label}' ({config.type}) returned "
                f"{type(result).__name__} instead of a GraderResult",
                weight,
            )
    except IsolatedTimeout as exc:
        return error_result(config, _timed_out(config, exc.timeout), weight)
    except Exception as exc:
        return _crash_result(config, exc, weight)
    return _label(result, config, weight)


async def _isolated_grade(grader: Grader, context: GradeContext, timeout: float) -> GraderResult:
    """``grader.grade(context)`` off the run's event loop, bounded by ``timeout`` seconds
    (see :mod:`vally.engine.trials.isolation`); the sandbox and LLM provider are bridged back."""

    async def grade(home: asyncio.AbstractEventLoop) -> GraderResult:
        bridged = dataclasses.replace(
            context, sandbox=bridge(context.sandbox, home), llm=bridge(context.llm, home)
        )
        return await grader.grade(bridged)

    return await run_isolated(grade, timeout=timeout, name=f"vally-grader-{context.grader.label}")


async def _in_loop_grade(grader: Grader, context: GradeContext, timeout: float) -> GraderResult:
    """``grader.grade(context)`` on the run's event loop, bounded by ``timeout`` seconds: for
    graders that declare they never block (a thread hop costs more than their work)."""
    bound = asyncio.timeout(timeout)
    try:
        async with bound:
            return await grader.grade(context)
    except TimeoutError:
        if bound.expired():  # not a TimeoutError of the grader's own
            raise IsolatedTimeout(timeout) from None
        raise


def _timed_out(config: GraderConfig, timeout: float) -> str:
    from vally.models.durations import format_duration

    return (
        f"grader '{config.label}' ({config.type}) did not finish within "
        f"{format_duration(timeout)} and was stopped; fix the grader, or give it longer with "
        "'timeout:' on its entry (e.g. timeout: 20m)"
    )
