"""Golden figures of the graded comparison on crafted runs.

June's semantics (means over the cases a grader scored, ``delta`` over paired cases,
errors-first improved/regressed, ``failed``, ``missing``) and NeMo Gym's (Welch intervals
over repeats, flips with the 0.5 tie), checked value by value on hand-made records.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pytest
from scipy import stats as sps

from tests.compare.graded_records import BRIEF, NAMES, g, trial
from vally.models import (
    TrialResultRecord,
)
from vally_compare.graded import GradedComparison, compare_records
from vally_compare.statistics.estimates import Interval

ERROR = None
"""A trial that errored (status ``error``, no grade, no trajectory)."""


# Per case, the scores of each repeat: (names-the-page, brief), or ERROR.
BASELINE: dict[str, list[dict[str, float] | None]] = {
    "s1": [g(0, 0.5), g(0, 0.5)],  # fail, fail
    "s2": [g(1, 0.8), g(1, 0.8)],  # pass
    "s3": [g(1, 0.9), g(1, 0.9)],  # pass
    "s4": [g(0, 0.4), g(0, 0.4)],  # fail
    "s5": [ERROR, g(1, 1.0)],  # errored once; passes the repeat it was graded on
    "s6": [g(0, 1.0), g(0, 1.0)],  # fail
    "s7": [g(1, 0.6), g(1, 0.6)],  # pass; the candidate skips it
    "s8": [g(1, 0.6), g(0, 0.6)],  # pass, fail: exactly 0.5, a tie
}
CANDIDATE: dict[str, list[dict[str, float] | None]] = {
    "s1": [g(1, 0.5), g(1, 0.5)],  # improves: names 0 -> 1; fail -> pass
    "s2": [g(0, 0.8), g(0, 0.8)],  # regresses: names 1 -> 0; pass -> fail
    "s3": [g(1, 0.5), g(1, 0.5)],  # regresses: brief 0.9 -> 0.5, still passes
    "s4": [ERROR, g(0, 0.9)],  # starts erroring, though brief went up 0.4 -> 0.9
    "s5": [g(1, 0.6), g(1, 0.6)],  # errors went away, though brief went down 1.0 -> 0.6
    "s6": [g(1, 0.0), g(1, 0.0)],  # trades brief for names: the changes cancel
    "s8": [g(1, 0.4), g(0, 0.8)],  # fail, fail; same means as the baseline
}
CANDIDATE_TOKENS = {"s1": 60, "s2": 90}
"""Tokens per candidate trial (80 where not listed; the baseline spends 100)."""


def run(
    table: dict[str, list[dict[str, float] | None]], run_id: str, **kwargs: Any
) -> list[TrialResultRecord]:
    candidate = run_id == "cand"
    return [
        trial(
            stimulus,
            index,
            scores,
            run_id=run_id,
            tokens=CANDIDATE_TOKENS.get(stimulus, 80) if candidate else 100,
            wall_ms=1200 if candidate else 1000,
            **kwargs,
        )
        for stimulus, repeats in table.items()
        for index, scores in enumerate(repeats)
    ]


@pytest.fixture(scope="module")
def scenario() -> GradedComparison:
    return compare_records(run(BASELINE, "base"), run(CANDIDATE, "cand"))


def scipy_paired(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    ci = sps.ttest_1samp(values, 0.0).confidence_interval(level)
    return float(ci.low), float(ci.high)


def scipy_bounded(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    low, high = scipy_paired([*values, -1.0, 1.0], level)
    return max(-1.0, low), min(1.0, high)


def scipy_welch(
    baseline: Sequence[float], candidate: Sequence[float], level: float = 0.95
) -> tuple[float, float]:
    with warnings.catch_warnings():
        # scipy warns of precision loss for a sample with no spread (a baseline of 100 and
        # 100); its variance is still exactly 0, and so is the interval's part of it.
        warnings.filterwarnings("ignore", "Precision loss occurred", RuntimeWarning)
        ci = sps.ttest_ind(candidate, baseline, equal_var=False).confidence_interval(level)
    return float(ci.low), float(ci.high)


def ends(interval: Interval | None) -> tuple[float, float]:
    assert interval is not None
    return interval.low, interval.high


# --------------------------------------------------------------------------- the scenario


def test_grader_means_are_over_the_cases_scored_in_each_run(scenario: GradedComparison) -> None:
    names, brief = scenario.grader(NAMES), scenario.grader(BRIEF)
    assert names is not None and brief is not None
    assert [x.name for x in scenario.graders] == [BRIEF, NAMES]
    # names-the-page: 0, 1, 1, 0, 1, 0, 1, 0.5 over 8 cases; 1, 0, 1, 0, 1, 1, 0.5 over 7
    assert names.baseline_mean == pytest.approx(4.5 / 8)
    assert names.candidate_mean == pytest.approx(4.5 / 7)
    assert (names.baseline_cases, names.candidate_cases, names.paired) == (8, 7, 7)
    # brief: 0.5, 0.8, 0.9, 0.4, 1.0, 1.0, 0.6, 0.6; 0.5, 0.8, 0.5, 0.9, 0.6, 0.0, 0.6
    assert brief.baseline_mean == pytest.approx(5.8 / 8)
    assert brief.candidate_mean == pytest.approx(3.9 / 7)
    assert (brief.baseline_cases, brief.candidate_cases, brief.paired) == (8, 7, 7)


def test_delta_is_the_mean_change_over_paired_cases(scenario: GradedComparison) -> None:
    names, brief = scenario.grader(NAMES), scenario.grader(BRIEF)
    assert names is not None and brief is not None
    names_changes = [1, -1, 0, 0, 0, 1, 0]  # s1..s6, s8
    brief_changes = [0, 0, -0.4, 0.5, -0.4, -1.0, 0]
    assert names.delta == pytest.approx(1 / 7)
    # not the difference of the two means: s7 is in the baseline's mean only
    assert names.delta != pytest.approx(names.candidate_mean - names.baseline_mean)
    assert brief.delta == pytest.approx(-1.3 / 7)
    assert (names.improved, names.regressed) == (2, 1)
    assert (brief.improved, brief.regressed) == (1, 3)
    assert ends(names.case_interval) == pytest.approx(scipy_bounded(names_changes))
    assert ends(brief.case_interval) == pytest.approx(scipy_bounded(brief_changes))
    assert names.method == "cases" and names.interval == names.case_interval
    assert names.better == "higher" and names.kind == "grader" and not names.judged


def test_improved_and_regressed_cases_errors_first(scenario: GradedComparison) -> None:
    assert scenario.improved == ["ev/s1", "ev/s5"]
    assert scenario.regressed == ["ev/s2", "ev/s3", "ev/s4"]
    by_id = {c.id: c for c in scenario.cases}
    assert list(by_id) == ["ev/s1", "ev/s2", "ev/s3", "ev/s4", "ev/s5", "ev/s6", "ev/s8"]
    # s4's scores went up and it is still regressed; s5's went down and it is improved
    assert by_id["ev/s4"].deltas == pytest.approx({BRIEF: 0.5, NAMES: 0.0})
    assert by_id["ev/s4"].reason == "started erroring (1 of 2)"
    assert by_id["ev/s5"].deltas == pytest.approx({BRIEF: -0.4, NAMES: 0.0})
    assert by_id["ev/s5"].reason == "errors went away (1 of 2)"
    # s6 trades one grader for the other: no outcome
    assert by_id["ev/s6"].deltas == {BRIEF: -1.0, NAMES: 1.0}
    assert by_id["ev/s6"].outcome == "unchanged"
    assert by_id["ev/s6"].reason == "grader changes cancel out"
    assert by_id["ev/s8"].outcome == "unchanged"
    assert by_id["ev/s8"].reason == "no change"
    assert by_id["ev/s3"].outcome == "regressed"  # mean grader change -0.2
    assert by_id["ev/s4"].candidate.errored == 1 and by_id["ev/s4"].candidate.trials == 2


def test_failed_and_missing(scenario: GradedComparison) -> None:
    assert scenario.failed == {"baseline": 1, "candidate": 1}
    assert [(m.id, m.present_in) for m in scenario.missing] == [("ev/s7", "baseline")]
    assert any(w == "1 cases missing from the candidate: ev/s7" for w in scenario.warnings)
    assert not any("missing from the baseline" in w for w in scenario.warnings)
    assert not any("unequal repeats" in w for w in scenario.warnings)
    # a case one run lacks is missing, not a change of suite
    assert scenario.suite_same and scenario.changed_cases == []


def test_flips_and_the_half_tie(scenario: GradedComparison) -> None:
    assert [(c.id, c.flip) for c in scenario.flips] == [
        ("ev/s1", "fail→pass"),
        ("ev/s2", "pass→fail"),
    ]
    by_id = {c.id: c for c in scenario.cases}
    s8 = by_id["ev/s8"]
    assert s8.baseline.pass_rate == 0.5 and s8.baseline.state == "tie"
    assert s8.candidate.pass_rate == 0.0 and s8.candidate.state == "fail"
    assert s8.flip is None  # were 0.5 a pass, this would be pass→fail
    assert [c.id for c in scenario.ties] == ["ev/s8"]
    # pass rates over graded repeats only: s5's baseline passed the one it was graded on
    assert by_id["ev/s5"].baseline.pass_rate == 1.0
    assert by_id["ev/s4"].candidate.pass_rate == 0.0
    assert by_id["ev/s4"].flip is None


def test_metrics_carry_their_direction(scenario: GradedComparison) -> None:
    tokens, wall, rate = (scenario.metric(n) for n in ("tokens", "wall_time_ms", "pass_rate"))
    assert tokens is not None and wall is not None and rate is not None
    assert (tokens.better, wall.better, rate.better) == ("lower", "lower", "higher")
    score = scenario.metric("score")
    assert score is not None and score.better == "higher"
    assert [m.name for m in scenario.metrics][:2] == ["pass_rate", "score"]
    # tokens: 100 per baseline trial; 60, 90 then 80 per candidate trial
    token_changes = [-40, -10, -20, -20, -20, -20, -20]
    assert tokens.baseline_mean == 100 and tokens.candidate_mean == pytest.approx(550 / 7)
    assert tokens.delta == pytest.approx(-150 / 7)
    assert (tokens.improved, tokens.regressed, tokens.paired) == (7, 0, 7)
    assert ends(tokens.case_interval) == pytest.approx(scipy_paired(token_changes))
    assert tokens.difference == "better"
    assert tokens.relative == pytest.approx(-150 / 7 / 100)
    assert wall.delta == pytest.approx(200) and (wall.improved, wall.regressed) == (0, 7)
    # pass rates per case: 0, 1, 1, 0, 1, 0, 1, 0.5 and 1, 0, 1, 0, 1, 0, 0
    assert rate.baseline_mean == pytest.approx(4.5 / 8)
    assert rate.candidate_mean == pytest.approx(3 / 7)
    assert rate.delta == pytest.approx(-0.5 / 7)
    assert ends(rate.case_interval) == pytest.approx(scipy_bounded([1, -1, 0, 0, 0, 0, -0.5]))
    assert rate.kind == "metric"


def test_repeat_interval_is_welch_over_the_per_repeat_means(scenario: GradedComparison) -> None:
    names, brief = scenario.grader(NAMES), scenario.grader(BRIEF)
    assert names is not None and brief is not None
    # each repeat's mean over the cases graded in it (errored trials have no scores)
    names_base, names_cand = [4 / 7, 4 / 8], [5 / 6, 4 / 7]
    brief_base, brief_cand = [4.8 / 7, 5.8 / 8], [2.8 / 6, 4.1 / 7]
    expected = scipy_welch(names_base, names_cand)
    assert ends(names.repeat_interval) == pytest.approx(expected, abs=1e-9)
    expected = scipy_welch(brief_base, brief_cand)
    assert ends(brief.repeat_interval) == pytest.approx(expected, abs=1e-9)
    tokens = scenario.metric("tokens")
    assert tokens is not None
    # tokens per repeat: 100 and 100 in the baseline; (60+90+80*4)/6 and (60+90+80*5)/7
    assert ends(tokens.repeat_interval) == pytest.approx(
        scipy_welch([100.0, 100.0], [470 / 6, 550 / 7]), abs=1e-9
    )


def test_repeats_method_and_confidence_level_choose_the_interval() -> None:
    comparison = compare_records(
        run(BASELINE, "base"), run(CANDIDATE, "cand"), method="repeats", confidence_level=0.9
    )
    names = comparison.grader(NAMES)
    assert names is not None
    assert comparison.confidence_level == 0.9 and names.method == "repeats"
    assert names.interval == names.repeat_interval
    assert ends(names.repeat_interval) == pytest.approx(
        scipy_welch([4 / 7, 4 / 8], [5 / 6, 4 / 7], 0.9), abs=1e-9
    )
    assert ends(names.case_interval) == pytest.approx(scipy_bounded([1, -1, 0, 0, 0, 1, 0], 0.9))


def test_unequal_repeats_are_warned_about() -> None:
    candidate = run(CANDIDATE, "cand")
    candidate.append(trial("s1", 2, g(1, 0.5), run_id="cand", tokens=60))
    comparison = compare_records(run(BASELINE, "base"), candidate)
    assert "unequal repeats: the baseline has 2 per case, the candidate 2 to 3" in (
        comparison.warnings
    )
    # a case's repeats are averaged first: a third identical repeat changes no figure
    names = comparison.grader(NAMES)
    assert names is not None and names.delta == pytest.approx(1 / 7)


def test_a_case_only_the_baseline_lacks_is_missing_from_the_baseline() -> None:
    candidate = [*run(CANDIDATE, "cand"), trial("s9", 0, g(1, 1.0), run_id="cand")]
    comparison = compare_records(run(BASELINE, "base"), candidate)
    assert [(m.id, m.present_in) for m in comparison.missing] == [
        ("ev/s7", "baseline"),
        ("ev/s9", "candidate"),
    ]
    assert "1 cases missing from the baseline: ev/s9" in comparison.warnings
    names = comparison.grader(NAMES)
    assert names is not None
    assert (names.baseline_cases, names.candidate_cases, names.paired) == (8, 8, 7)
    assert names.candidate_mean == pytest.approx(5.5 / 8)
    assert names.delta == pytest.approx(1 / 7)


def test_a_grader_only_one_run_has_gives_no_delta() -> None:
    base = [trial(f"s{i}", 0, {NAMES: 1.0}, run_id="base") for i in range(3)]
    cand = [trial(f"s{i}", 0, {NAMES: 1.0, "cites": 0.5}, run_id="cand") for i in range(3)]
    comparison = compare_records(base, cand)
    cites = comparison.grader("cites")
    assert cites is not None
    assert cites.baseline_mean is None and cites.candidate_mean == 0.5
    assert (cites.baseline_cases, cites.candidate_cases, cites.paired) == (0, 3, 0)
    assert cites.delta is None and cites.case_interval is None
    assert cites.difference == "insufficient"
    # the case's outcome rests on the graders scored in both runs only
    assert all(c.deltas == {NAMES: 0.0} and c.outcome == "unchanged" for c in comparison.cases)


def test_errors_in_both_runs_leave_the_scores_to_decide() -> None:
    base = [trial("s1", 0, None, run_id="base"), trial("s1", 1, g(1, 0.4), run_id="base")]
    cand = [trial("s1", 0, None, run_id="cand"), trial("s1", 1, g(1, 0.9), run_id="cand")]
    (case,) = compare_records(base, cand).cases
    assert case.outcome == "improved" and case.reason == "mean grader change +0.25"
    (case,) = compare_records(cand, base).cases
    assert case.outcome == "regressed"


# --------------------------------------------------------------------------- groups

EVALS = ("golden", "evidence")


def grouped_runs(seed: int) -> tuple[list[TrialResultRecord], list[TrialResultRecord]]:
    """Two runs over two evals of 12 stimuli each, tagged ``group: hard|easy`` (a few
    untagged), 2 or 3 repeats, some errored trials and a few cases only one run has."""
    rng = np.random.default_rng(seed)
    runs: tuple[list[TrialResultRecord], list[TrialResultRecord]] = ([], [])
    for eval_name in EVALS:
        for s in range(12):
            tags = {} if s % 5 == 4 else {"group": "hard" if s % 2 else "easy"}
            for side, run_id in enumerate(("base", "cand")):
                if rng.random() < 0.08:
                    continue  # this run skipped the case
                for index in range(int(rng.integers(2, 4))):
                    scores = None
                    if rng.random() > 0.1:
                        scores = {
                            NAMES: float(rng.integers(0, 2)),
                            BRIEF: round(float(rng.random()), 2),
                        }
                    runs[side].append(
                        trial(
                            f"s{s}",
                            index,
                            scores,
                            run_id=run_id,
                            eval_name=eval_name,
                            tokens=int(rng.integers(50, 150)),
                            wall_ms=int(rng.integers(500, 1500)),
                            tags=tags,
                        )
                    )
    return runs


def figures(comparison: GradedComparison) -> dict[str, Any]:
    """What a comparison says, for comparing two of them."""

    def figure(f: Any) -> tuple[Any, ...]:
        return (
            f.name, f.baseline_mean, f.candidate_mean, f.baseline_cases, f.candidate_cases,
            f.delta, f.paired, f.case_interval, f.repeat_interval, f.improved, f.regressed,
        )  # fmt: skip

    return {
        "graders": [figure(f) for f in comparison.graders],
        "metrics": [figure(f) for f in comparison.metrics],
        "cases": [(c.id, c.outcome, c.deltas, c.flip, c.reason) for c in comparison.cases],
        "missing": [(m.id, m.present_in) for m in comparison.missing],
        "failed": comparison.failed,
        "improved": comparison.improved,
        "regressed": comparison.regressed,
    }


def only(
    records: Iterable[TrialResultRecord], dimension: str, value: str
) -> list[TrialResultRecord]:
    if dimension == "eval":
        return [r for r in records if r.eval_name == value]
    return [r for r in records if r.stimulus.tags.get(dimension) == value]


@pytest.mark.parametrize("seed", [3, 11])
def test_group_figures_are_the_comparison_of_that_group_alone(seed: int) -> None:
    base, cand = grouped_runs(seed)
    whole = compare_records(base, cand, by=["eval", "group"])
    assert [g.scope for g in whole.groups] == [
        ("eval", "evidence"),
        ("eval", "golden"),
        ("group", "easy"),
        ("group", "hard"),
    ]
    assert whole.restricted(("", "")) is whole
    assert whole.group("group", "medium") is None
    for dimension, value in [("eval", e) for e in EVALS] + [("group", "hard"), ("group", "easy")]:
        group = whole.group(dimension, value)
        assert group is not None and group.scope == (dimension, value)
        alone = compare_records(only(base, dimension, value), only(cand, dimension, value))
        assert figures(group) == figures(alone), (dimension, value)
        assert group.cases, (dimension, value)
        assert all(w in alone.warnings for w in group.warnings)
    # the groups by eval partition the cases; untagged cases are in no tag group
    assert sum(len(whole.group("eval", e).cases) for e in EVALS) == len(whole.cases)  # type: ignore[union-attr]
    tagged = sum(len(whole.group("group", v).cases) for v in ("hard", "easy"))  # type: ignore[union-attr]
    untagged = [c for c in whole.cases if "group" not in c.tags]
    assert untagged and tagged + len(untagged) == len(whole.cases)


def test_the_grouped_runs_exercise_every_path() -> None:
    """The generated runs have what the group test needs to be able to fail."""
    base, cand = grouped_runs(3)
    whole = compare_records(base, cand, by=["eval", "group"])
    assert whole.missing and whole.improved and whole.regressed and whole.flips
    assert whole.failed["baseline"] and whole.failed["candidate"]
    assert any("unequal repeats" in w for w in whole.warnings)
