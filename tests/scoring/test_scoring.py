"""Golden and property tests of vally.engine.records.scoring (reference §8.1, §8.2)."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, strategies as st

from vally.engine.records.scoring import (
    multi_trial_metrics,
    pass_at_k,
    pass_at_k_naive,
    pass_to_the_k,
    skill_score,
    summarize_stimulus,
    trial_verdict,
    weighted_score,
)
from vally.engine.records.tally import summarize_eval
from vally.models.records import GradeResult, GraderResult, TrialResultRecord
from vally.models.spec import GraderConfig, Stimulus
from vally.models.trajectory import Trajectory, TrajectoryMetrics


def gr(
    type_: str,
    score: float,
    *,
    passed: bool | None = None,
    weight: float = 1.0,
    required: bool = False,
    status: str = "success",
) -> GraderResult:
    return GraderResult(
        name=type_,
        type=type_,
        passed=score == 1.0 if passed is None else passed,
        score=score,
        weight=weight,
        required=required,
        status=status,  # type: ignore[arg-type]
    )


# --------------------------------------------------------------------------- one trial


def test_docs_example_weights() -> None:
    results = [gr("file-exists", 1.0, weight=1.0), gr("output-contains", 0.0, weight=0.5)]
    assert weighted_score(results) == pytest.approx(2 / 3)
    verdict = trial_verdict(results, 0.7)
    assert round(verdict.score, 3) == 0.667
    assert not verdict.passed and verdict.mode == "threshold"
    assert trial_verdict(results, 0.6).passed


def test_threshold_boundary_is_inclusive_despite_float_error() -> None:
    results = [gr("a", 0.7), gr("b", 0.7), gr("c", 0.7)]
    assert trial_verdict(results, 0.7).passed
    assert trial_verdict(results, 0.7000001).passed is False


def test_binary_mode_needs_every_grader() -> None:
    results = [gr("a", 1.0), gr("b", 0.9, passed=False)]
    verdict = trial_verdict(results, None)
    assert verdict.mode == "binary" and not verdict.passed
    assert verdict.score == pytest.approx(0.95)
    assert trial_verdict([gr("a", 1.0)], None).passed


def test_required_and_violations_fail_both_modes() -> None:
    results = [gr("a", 1.0), gr("b", 1.0), gr("c", 1.0), gr("r", 0.0, required=True)]
    assert not trial_verdict(results, 0.5).passed
    ok = [gr("a", 1.0)]
    for threshold in (None, 0.5):
        verdict = trial_verdict(ok, threshold, ["max_turns exceeded"])
        assert not verdict.passed and verdict.constraint_violations == ["max_turns exceeded"]


def test_errored_results_count_as_zero_and_error_the_trial() -> None:
    results = [gr("a", 1.0), gr("b", 0.0, passed=False, status="error")]
    verdict = trial_verdict(results, 0.4)
    assert verdict.errored and not verdict.passed
    assert verdict.score == pytest.approx(0.5)


def test_no_graders_and_zero_weights() -> None:
    verdict = trial_verdict([], 0.5)
    assert verdict.mode == "no-graders" and verdict.passed and not verdict.has_graders
    assert verdict.score == 1.0
    assert not trial_verdict([], None, ["x"]).passed
    assert weighted_score([gr("a", 1.0, weight=0.0)]) == 0.0
    with pytest.raises(ValueError, match="weights must be"):
        weighted_score([gr("a", 1.0, weight=-1.0)])
    with pytest.raises(ValueError, match="threshold"):
        trial_verdict([gr("a", 1.0)], 1.5)


# --------------------------------------------------------------------------- several trials


def test_pass_at_k_goldens() -> None:
    assert pass_at_k(5, 3, 5) == 1.0
    assert pass_at_k(5, 4, 5) == 1.0
    assert pass_at_k(1, 0, 1) == 0.0
    assert pass_at_k(1, 1, 1) == 1.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(10, 3, 2) == pytest.approx(1 - (7 * 6) / (10 * 9))
    for n in (1, 2, 7, 50, 400):
        for k in (1, n):
            assert pass_at_k(n, 0, k) == 0.0


@pytest.mark.parametrize(
    ("n", "c", "k"), [(0, 0, 1), (3, 4, 1), (3, -1, 1), (3, 1, 0), (3, 1, 4), (3, 1.5, 1)]
)
def test_pass_at_k_validates(n: Any, c: Any, k: Any) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_pass_at_k_matches_the_stable_product_form_over_a_grid() -> None:
    for n in range(1, 41):
        for c in range(0, n + 1):
            for k in range(1, n + 1):
                if n - c < k:
                    expected = 1.0
                else:
                    expected = 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))
                assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12), (n, c, k)


def test_pass_at_k_large_n_is_exact() -> None:
    # 1 - C(900, 100)/C(1000, 100), well-defined though the binomials overflow floats.
    expected = 1.0 - float(np.prod(1.0 - 100 / np.arange(901, 1001)))
    assert pass_at_k(1000, 100, 100) == pytest.approx(expected, rel=1e-12)


@given(st.integers(1, 60).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))))
def test_pass_at_k_is_monotone_in_k(nc: tuple[int, int]) -> None:
    n, c = nc
    values = [pass_at_k(n, c, k) for k in range(1, n + 1)]
    assert all(0.0 <= v <= 1.0 for v in values)
    assert all(a <= b + 1e-12 for a, b in itertools.pairwise(values))
    assert values[0] == pytest.approx(c / n)


def test_naive_and_to_the_k() -> None:
    assert pass_to_the_k(0.8, 5) == pytest.approx(0.32768)
    assert pass_at_k_naive(0.8, 5) == pytest.approx(0.99968)
    assert pass_to_the_k(1.0, 3) == 1.0 and pass_at_k_naive(0.0, 3) == 0.0
    with pytest.raises(ValueError):
        pass_to_the_k(1.2, 2)
    with pytest.raises(ValueError):
        pass_at_k_naive(0.5, -1)


def test_multi_trial_metrics_docs_example() -> None:
    metrics = multi_trial_metrics([True, True, False, True, True])
    assert metrics.per_trial_pass_rate == pytest.approx(0.8)
    assert metrics.pass_at_k == 1.0
    assert metrics.pass_at_k_naive == pytest.approx(0.99968)
    assert metrics.pass_to_the_k == pytest.approx(0.32768)
    assert metrics.k == 5
    assert metrics.to_json_dict() == {
        "perTrialPassRate": pytest.approx(0.8),
        "passAtK": 1.0,
        "passAtKNaive": pytest.approx(0.99968),
        "passToTheK": pytest.approx(0.32768),
        "k": 5,
    }


def test_multi_trial_metrics_empty_and_single() -> None:
    empty = multi_trial_metrics([])
    assert empty.k == 0 and empty.per_trial_pass_rate is None and empty.pass_at_k is None
    assert empty.pass_at_k_naive is None and empty.pass_to_the_k is None
    one = multi_trial_metrics([False])
    assert (one.per_trial_pass_rate, one.pass_at_k, one.pass_to_the_k) == (0.0, 0.0, 0.0)


# --------------------------------------------------------------------------- summaries

STIM = Stimulus(name="s1", prompt="p", graders=[GraderConfig(type="completed")])
BARE = Stimulus(name="bare", prompt="p")


def record(
    index: int,
    passed: bool | None,
    *,
    stim: Stimulus = STIM,
    status: str = "success",
    score: float | None = None,
    model: str | None = "m1",
    errored: bool = False,
    tokens: int = 100,
) -> TrialResultRecord:
    grade = None
    if passed is not None:
        grade = GradeResult(
            passed=passed,
            score=(1.0 if passed else 0.0) if score is None else score,
            threshold=None,
            mode="binary" if stim.graders else "no-graders",
            has_graders=bool(stim.graders),
            errored=errored,
        )
    metrics = TrajectoryMetrics.model_validate(
        {"tokenUsage": {"totalTokens": tokens}, "turnCount": 2, "errorCount": 1, "wallTimeMs": 10}
    )
    return TrialResultRecord(
        run_id="run",
        eval_name="ev",
        eval_file=None,
        stimulus_name=stim.name,
        stimulus=stim,
        variant=None,
        model=model,
        trial_index=index,
        trial_id=f"{stim.name}/{index}",
        status=status,  # type: ignore[arg-type]
        error=None,
        started_at=f"2026-01-01T00:00:0{index}.000Z",
        completed_at=f"2026-01-01T00:01:0{index}.000Z",
        duration_ms=5,
        grade_result=grade,
        trajectory=Trajectory(stimulus=stim, metrics=metrics),
    )


def test_summarize_stimulus_flaky_and_errored_excluded() -> None:
    records = [
        record(0, True),
        record(1, False, score=0.5),
        record(2, True),
        record(3, None, status="error"),
        record(4, False, errored=True),
    ]
    summary = summarize_stimulus(records)
    assert (summary.trials, summary.graded, summary.passed, summary.errored) == (5, 3, 2, 2)
    assert summary.flaky and summary.has_graders
    assert summary.metrics.per_trial_pass_rate == pytest.approx(2 / 3)
    assert summary.metrics.pass_at_k == 1.0 and summary.metrics.k == 3
    assert summary.mean_score == pytest.approx(2.5 / 3)
    assert summary.mean_tokens == 100 and summary.mean_turns == 2 and summary.total_errors == 5
    steady = summarize_stimulus([record(0, True), record(1, True)])
    assert not steady.flaky and steady.metrics.pass_to_the_k == 1.0
    with pytest.raises(ValueError):
        summarize_stimulus([])


def test_summarize_eval_verdicts() -> None:
    records = [record(0, True), record(1, True), record(0, True, model="m2")]
    summary = summarize_eval(records, run_id="run", eval_name="ev", threshold=0.8)
    assert summary.verdict == "pass" and summary.pass_rate == 1.0
    assert summary.models == ["m1", "m2"] and len(summary.stimuli) == 2
    assert summary.started_at == "2026-01-01T00:00:00.000Z"
    assert summary.completed_at == "2026-01-01T00:01:01.000Z"
    assert summary.threshold == 0.8

    with_error = [*records, record(2, None, status="error")]
    errored = summarize_eval(with_error, run_id="run", eval_name="ev")
    assert errored.verdict == "pass" and errored.errored == 1 and errored.trials == 4

    failing = summarize_eval([*records, record(3, False)], run_id="run", eval_name="ev")
    assert failing.verdict == "fail" and (failing.passed, failing.failed) == (3, 1)
    assert failing.pass_rate == pytest.approx(0.75)

    ungraded = summarize_eval([record(0, True, stim=BARE)], run_id="run", eval_name="ev")
    assert ungraded.verdict == "none" and ungraded.pass_rate is None
    assert ungraded.stimuli[0].has_graders is False and ungraded.stimuli[0].graded == 0

    empty = summarize_eval([], run_id="run", eval_name="ev")
    assert empty.verdict == "none" and empty.trials == 0 and empty.stimuli == []
    line = failing.to_json_dict()
    assert line["type"] == "run-summary" and line["stimuli"][0]["metrics"]["k"] == 3


def test_skill_score_is_the_mean_of_stimulus_metrics() -> None:
    a = summarize_stimulus([record(0, True), record(1, True)])  # rate 1, pass^2 1
    b = summarize_stimulus(
        [
            record(i, i < 1, stim=Stimulus(name="b", prompt="p", graders=STIM.graders))
            for i in range(4)
        ]
    )  # rate 0.25
    score = skill_score("skill", [a, b])
    assert score.metrics.per_trial_pass_rate == pytest.approx((1 + 0.25) / 2)
    assert score.metrics.pass_to_the_k == pytest.approx((1 + 0.25**4) / 2)
    assert score.metrics.k == 4 and score.stimuli == 2
    assert score.passed is False  # binary: every stimulus must always pass
    assert skill_score("skill", [a, b], threshold=0.6).passed is True
    assert skill_score("skill", [a]).passed is True
    none = skill_score("skill", [])
    assert none.passed is None and none.metrics.per_trial_pass_rate is None
    assert math.isclose(score.mean_score or 0, (1 + 0.25) / 2)
