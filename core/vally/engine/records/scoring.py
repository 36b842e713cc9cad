"""Scoring: from grader results to a trial verdict, and from trials to run summaries.

Pure functions only; nothing here does I/O.

One trial (reference §8.1):

* :func:`weighted_score` is ``S = sum(w_i * s_i) / sum(w_i)``; the weight of a result is its
  ``weight`` (the kernel fills it from ``scoring.weights[type]``, default 1). A result with
  ``status: error`` counts with score 0.
* :func:`trial_verdict` decides the trial:

  - **threshold** mode (a threshold is set): passes when ``S >= threshold``;
  - **binary** mode (no threshold): passes when every grader passed;
  - in both modes a failing ``required`` grader, a constraint violation or an errored grader
    fails the trial (an errored trial is reported as an operational error, never as a low
    score; ``errored`` tells them apart);
  - **no-graders** mode (nothing to grade): the trial passes unless a constraint was
    violated, its score is 1.0 when it passes and 0.0 otherwise, and ``has_graders`` is
    false. Summaries leave such trials out of pass rates (they are "not graded").

Several trials (reference §8.2), with ``n`` trials, ``c`` passed and ``p = c / n``:

* :func:`pass_at_k` is the unbiased estimator of Chen et al. (2021),
  ``1 - C(n - c, k) / C(n, k)`` (1.0 when ``n - c < k``), computed exactly with integers;
* :func:`pass_at_k_naive` is ``1 - (1 - p)^k`` (reported for comparison only);
* :func:`pass_to_the_k` is ``p^k``;
* :func:`multi_trial_metrics` uses ``k = n``. The reference's docs example
  ``[T,T,F,T,T] -> pass@k 0.99`` matches the naive formula; vally reports the unbiased value
  (1.0) as ``passAtK`` and the naive one (0.99968) as ``passAtKNaive``.

Summaries:

* a trial is **errored** when its record's status is not ``success`` or a grader errored;
  errored trials are counted (``errored``) but excluded from pass rates and mean scores;
* a trial is **graded** when it is not errored and its stimulus had graders;
* a stimulus is **flaky** when ``0 < passed < graded``;
* an eval's **verdict** is ``pass`` when every graded trial passed, ``fail`` when at least one
  graded trial failed, and ``none`` when no trial was graded. Errored trials do not decide
  the verdict; the run reports them as operational errors (exit code) on their own.
* :func:`skill_score` rolls several stimuli up: its metrics are the mean of the per-stimulus
  metrics (not a pool of all trials).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from vally.models.records import (
    GradeResult,
    GraderResult,
    MultiTrialMetrics,
    StimulusSummary,
    TrialResultRecord,
)

_EPSILON = 1e-9
"""Tolerance for ``S >= threshold`` so that e.g. 0.7000000000000001 vs 0.7 is not a fail."""


# --------------------------------------------------------------------------- one trial


def weighted_score(results: Sequence[GraderResult]) -> float:
    """The weighted mean of grader scores, ``sum(w * s) / sum(w)``.

    Errored results count with score 0. Returns 0.0 when there are no results or every
    weight is 0.

    Raises:
        ValueError: A weight is negative or not finite.
    """
    total_weight = 0.0
    total = 0.0
    for result in results:
        weight = result.weight
        if not math.isfinite(weight) or weight < 0:
            raise ValueError(
                f"grader '{result.name}' has weight {weight}; weights must be finite and >= 0 "
                "(check scoring.weights)"
            )
        score = 0.0 if result.status == "error" else result.score
        total_weight += weight
        total += weight * score
    if total_weight == 0:
        return 0.0
    return total / total_weight


def trial_verdict(
    results: Sequence[GraderResult],
    threshold: float | None,
    violations: Sequence[str] = (),
) -> GradeResult:
    """Decide one trial from its grader results (see the module docstring for the rules).

    Args:
        results: Every grader's result, weights already set.
        threshold: The pass threshold in [0, 1], or None for the binary verdict.
        violations: Constraint violations found on the trajectory.

    Raises:
        ValueError: The threshold is outside [0, 1].
    """
    if threshold is not None and not (0.0 <= threshold <= 1.0):
        raise ValueError(f"threshold must be between 0 and 1, got {threshold}")
    details = list(results)
    violation_list = list(violations)
    if not details:
        passed = not violation_list
        return GradeResult(
            passed=passed,
            score=1.0 if passed else 0.0,
            threshold=threshold,
            mode="no-graders",
            has_graders=False,
            errored=False,
            details=[],
            constraint_violations=violation_list,
        )
    errored = any(r.status == "error" for r in details)
    score = weighted_score(details)
    required_failed = any(r.required and not r.passed for r in details)
    if threshold is not None:
        mode: Literal["threshold", "binary"] = "threshold"
        base = score >= threshold - _EPSILON
    else:
        mode = "binary"
        base = all(r.passed for r in details)
    passed = base and not required_failed and not violation_list and not errored
    return GradeResult(
        passed=passed,
        score=score,
        threshold=threshold,
        mode=mode,
        has_graders=True,
        errored=errored,
        details=details,
        constraint_violations=violation_list,
    )


# --------------------------------------------------------------------------- several trials


def _check_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    return value


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021): ``1 - C(n - c, k) / C(n, k)``.

    The probability that at least one of ``k`` trials drawn without replacement from ``n``
    trials (``c`` of which passed) passed. It is 1.0 when ``n - c < k``. Computed with exact
    integer binomials, so it is exact for any ``n``.

    Raises:
        ValueError: Unless ``0 <= c <= n`` and ``1 <= k <= n``.
    """
    n = _check_int("n", n)
    c = _check_int("c", c)
    k = _check_int("k", k)
    if n < 1:
        raise ValueError(f"pass@k needs at least one trial (n >= 1), got n={n}")
    if not 0 <= c <= n:
        raise ValueError(f"the number of passed trials c must be in [0, n={n}], got c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"k must be in [1, n={n}], got k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def _check_rate_and_k(p: float, k: int) -> tuple[float, int]:
    """``p`` as a float in [0, 1] and ``k`` as an integer >= 0, or a ValueError."""
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"a pass rate must be a number in [0, 1], got {p!r}")
    k = _check_int("k", k)
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    return float(p), k


def pass_at_k_naive(p: float, k: int) -> float:
    """Naive pass@k, ``1 - (1 - p)^k``, from a per-trial pass rate ``p``.

    Kept for comparison only; it overestimates capability for small ``n``.

    Raises:
        ValueError: ``p`` is outside [0, 1] or ``k`` is negative.
    """
    p, k = _check_rate_and_k(p, k)
    return 1.0 - (1.0 - p) ** k


def pass_to_the_k(p: float, k: int) -> float:
    """pass^k, ``p^k``: the probability that ``k`` independent trials all pass.

    Raises:
        ValueError: ``p`` is outside [0, 1] or ``k`` is negative.
    """
    p, k = _check_rate_and_k(p, k)
    return float(p**k)


def multi_trial_metrics(passed: Sequence[bool]) -> MultiTrialMetrics:
    """Pass rate, pass@k (unbiased and naive) and pass^k of a list of trial verdicts, k = n.

    With no trials every metric is None and ``k`` is 0.
    """
    return metrics_from_counts(len(passed), sum(1 for flag in passed if flag))


def metrics_from_counts(n: int, c: int) -> MultiTrialMetrics:
    """Pass rate, pass@k (unbiased and naive) and pass^k of ``n`` trial verdicts of which
    ``c`` passed, k = n (see :func:`multi_trial_metrics`)."""
    if n == 0:
        return MultiTrialMetrics(
            per_trial_pass_rate=None, pass_at_k=None, pass_at_k_naive=None, pass_to_the_k=None, k=0
        )
    rate = c / n
    return MultiTrialMetrics(
        per_trial_pass_rate=rate,
        pass_at_k=pass_at_k(n, c, n),
        pass_at_k_naive=pass_at_k_naive(rate, n),
        pass_to_the_k=pass_to_the_k(rate, n),
        k=n,
    )


# --------------------------------------------------------------------------- summaries


def is_errored(record: TrialResultRecord) -> bool:
    """True when the trial failed operationally (status not ``success`` or a grader errored)."""
    if record.status != "success" or record.grade_result is None:
        return True
    return record.grade_result.errored


def is_graded(record: TrialResultRecord) -> bool:
    """True when the trial counts towards pass rates: not errored and it had graders."""
    return (
        not is_errored(record)
        and record.grade_result is not None
        and record.grade_result.has_graders
    )


def _mean(values: Iterable[float]) -> float | None:
    items = list(values)
    return sum(items) / len(items) if items else None


def summarize_stimulus(records: Sequence[TrialResultRecord]) -> StimulusSummary:
    """Aggregate the trials of one stimulus (for one eval, model and variant).

    Counts every trial; pass rate, pass@k, mean score and flakiness cover graded trials
    only. Trajectory means (tokens, turns, tool calls, wall time) cover every trial that has
    a trajectory.

    Raises:
        ValueError: ``records`` is empty.
    """
    if not records:
        raise ValueError("summarize_stimulus needs at least one trial record")
    first = records[0]
    graded = [r for r in records if is_graded(r)]
    verdicts = [bool(r.grade_result and r.grade_result.passed) for r in graded]
    passed = sum(verdicts)
    trajectories = [r.trajectory for r in records if r.trajectory is not None]
    has_graders = bool(first.stimulus.graders) or any(
        r.grade_result is not None and r.grade_result.has_graders for r in records
    )
    return StimulusSummary(
        stimulus_name=first.stimulus_name,
        model=first.model,
        trials=len(records),
        graded=len(graded),
        passed=passed,
        errored=sum(1 for r in records if is_errored(r)),
        mean_score=_mean(r.grade_result.score for r in graded if r.grade_result is not None),
        metrics=multi_trial_metrics(verdicts),
        flaky=0 < passed < len(graded),
        has_graders=has_graders,
        mean_tokens=_mean(t.metrics.token_usage.total_tokens for t in trajectories),
        mean_turns=_mean(t.metrics.turn_count for t in trajectories),
        mean_tool_calls=_mean(t.metrics.tool_call_count for t in trajectories),
        mean_wall_time_ms=_mean(t.metrics.wall_time_ms for t in trajectories),
        total_errors=sum(t.metrics.error_count for t in trajectories),
    )


@dataclass(frozen=True)
class SkillScore:
    """Several stimuli rolled up (e.g. every stimulus exercising one skill).

    Attributes:
        name: What is scored (a skill or eval name).
        stimuli: How many stimulus summaries had graded trials.
        metrics: The mean of the per-stimulus metrics; ``k`` is the largest per-stimulus k.
        mean_score: The mean of the per-stimulus mean scores.
        passed: Mean pass rate >= threshold; with no threshold, every graded stimulus has a
            pass rate of 1. None when nothing was graded.
    """

    name: str
    stimuli: int
    metrics: MultiTrialMetrics
    mean_score: float | None
    passed: bool | None


def skill_score(
    name: str, summaries: Sequence[StimulusSummary], threshold: float | None = None
) -> SkillScore:
    """Roll stimulus summaries up by averaging their metrics (reference §8.2).

    Stimuli without graded trials are left out.
    """
    graded = [s for s in summaries if s.graded > 0]

    def mean_of(field: str) -> float | None:
        return _mean(v for v in (getattr(s.metrics, field) for s in graded) if v is not None)

    metrics = MultiTrialMetrics(
        per_trial_pass_rate=mean_of("per_trial_pass_rate"),
        pass_at_k=mean_of("pass_at_k"),
        pass_at_k_naive=mean_of("pass_at_k_naive"),
        pass_to_the_k=mean_of("pass_to_the_k"),
        k=max((s.metrics.k for s in graded), default=0),
    )
    rate = metrics.per_trial_pass_rate
    if rate is None:
        passed: bool | None = None
    elif threshold is not None:
        passed = rate >= threshold - _EPSILON
    else:
        passed = all(s.passed == s.graded for s in graded)
    return SkillScore(
        name=name,
        stimuli=len(graded),
        metrics=metrics,
        mean_score=_mean(s.mean_score for s in graded if s.mean_score is not None),
        passed=passed,
    )
