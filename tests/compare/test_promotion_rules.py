"""Promotion rules read against crafted comparisons: each rule passes and fails where it
should, with its evidence, and the candidate is promoted only when every rule passes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import ValidationError
from scipy import stats as sps

from tests.compare.graded_records import BRIEF, NAMES, g, trial
from vally.errors import ConfigError
from vally.models import (
    TrialResultRecord,
)
from vally.models.promotion import PromotionRules
from vally_compare.graded import GradedComparison, compare_records
from vally_compare.rules import PromotionResult, RuleResult, WinRateEvidence, evaluate
from vally_compare.statistics.estimates import Interval

Table = dict[str, list[dict[str, float] | None]]

# s1 improves; s2 regresses on names-the-page; s3 on brief by 0.4 (mean change -0.2);
# s4 starts erroring though brief rises; s5 stops erroring though brief falls by 0.4;
# s6 trades brief (-1) for names (+1); s7 is only in the baseline.
BASELINE: Table = {
    "s1": [g(0, 0.5), g(0, 0.5)],
    "s2": [g(1, 0.8), g(1, 0.8)],
    "s3": [g(1, 0.9), g(1, 0.9)],
    "s4": [g(0, 0.4), g(0, 0.4)],
    "s5": [None, g(1, 1.0)],
    "s6": [g(0, 1.0), g(0, 1.0)],
    "s7": [g(1, 0.6), g(1, 0.6)],
}
CANDIDATE: Table = {
    "s1": [g(1, 0.5), g(1, 0.5)],
    "s2": [g(0, 0.8), g(0, 0.8)],
    "s3": [g(1, 0.5), g(1, 0.5)],
    "s4": [None, g(0, 0.9)],
    "s5": [g(1, 0.6), g(1, 0.6)],
    "s6": [g(1, 0.0), g(1, 0.0)],
}


def records(table: Table, run_id: str, **kwargs: Any) -> list[TrialResultRecord]:
    return [
        trial(stimulus, index, scores, run_id=run_id, **kwargs)
        for stimulus, repeats in table.items()
        for index, scores in enumerate(repeats)
    ]


@pytest.fixture(scope="module")
def scenario() -> GradedComparison:
    return compare_records(records(BASELINE, "base"), records(CANDIDATE, "cand"))


def rules(*items: dict[str, Any], **top: Any) -> PromotionRules:
    return PromotionRules.model_validate({**top, "rules": list(items)})


def one(rule: dict[str, Any], comparison: GradedComparison, **kwargs: Any) -> RuleResult:
    (result,) = evaluate(rules(rule), comparison, **kwargs).rules
    return result


def scored(
    base: Sequence[float], cand: Sequence[float], *, wall: tuple[Sequence[int], Sequence[int]]
) -> GradedComparison:
    """One repeat per case: brief scores and wall times per case, baseline and candidate."""
    base_records = [
        trial(f"c{i:02d}", 0, {BRIEF: b}, run_id="base", wall_ms=w)
        for i, (b, w) in enumerate(zip(base, wall[0], strict=True))
    ]
    cand_records = [
        trial(f"c{i:02d}", 0, {BRIEF: c}, run_id="cand", wall_ms=w)
        for i, (c, w) in enumerate(zip(cand, wall[1], strict=True))
    ]
    return compare_records(base_records, cand_records)


def scipy_bounded(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    ci = sps.ttest_1samp([*values, -1.0, 1.0], 0.0).confidence_interval(level)
    return max(-1.0, float(ci.low)), min(1.0, float(ci.high))


def scipy_paired(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    ci = sps.ttest_1samp(values, 0.0).confidence_interval(level)
    return float(ci.low), float(ci.high)


# --------------------------------------------------------------------------- cases


def test_no_regressed_cases_by_mean_grader_change(scenario: GradedComparison) -> None:
    result = one({"type": "no-regressed-cases"}, scenario)
    assert result.verdict == "fail"
    assert result.cases == ["ev/s2", "ev/s3", "ev/s4"]  # s5's errors went away: not listed
    assert result.figures == {"regressed": 3}
    assert result.name == "no-regressed-cases" and result.scope == ""
    assert result.reason.startswith("3 of 6 cases regressed by mean grader change")
    assert "ev/s2, ev/s3, ev/s4" in result.reason


def test_no_regressed_cases_on_named_graders(scenario: GradedComparison) -> None:
    result = one({"type": "no-regressed-cases", "graders": [NAMES]}, scenario)
    # s2 lost names-the-page; s4 started erroring, whatever its scores did
    assert (result.verdict, result.cases) == ("fail", ["ev/s2", "ev/s4"])
    assert "on names-the-page" in result.reason


def test_no_regressed_cases_tolerance(scenario: GradedComparison) -> None:
    # mean grader changes: s2 -0.5, s3 -0.2; a tolerance of 0.2 lets s3 through
    result = one({"type": "no-regressed-cases", "tolerance": 0.2}, scenario)
    assert (result.verdict, result.cases) == ("fail", ["ev/s2", "ev/s4"])
    assert "beyond a tolerance of 0.2" in result.reason
    result = one({"type": "no-regressed-cases", "tolerance": 0.19}, scenario)
    assert result.cases == ["ev/s2", "ev/s3", "ev/s4"]
    # on brief: s3 and s5 lose 0.4, within 0.5; s6 loses 1; s4 errors
    result = one({"type": "no-regressed-cases", "graders": [BRIEF], "tolerance": 0.5}, scenario)
    assert result.cases == ["ev/s4", "ev/s6"]
    # a tolerance does not excuse a case that started erroring
    result = one({"type": "no-regressed-cases", "graders": [BRIEF], "tolerance": 1.0}, scenario)
    assert (result.verdict, result.cases) == ("fail", ["ev/s4"])


def test_no_regressed_cases_max(scenario: GradedComparison) -> None:
    allowed = one({"type": "no-regressed-cases", "max": 3}, scenario)
    assert allowed.verdict == "pass"
    assert allowed.cases == ["ev/s2", "ev/s3", "ev/s4"]  # still named
    assert "(at most 3 allowed)" in allowed.reason
    assert one({"type": "no-regressed-cases", "max": 2}, scenario).verdict == "fail"


def test_no_regressed_cases_passes_when_nothing_regressed() -> None:
    base = records({"a": [g(1, 0.5)], "b": [g(0, 0.5)]}, "base")
    cand = records({"a": [g(1, 0.5)], "b": [g(1, 0.6)]}, "cand")
    result = one({"type": "no-regressed-cases"}, compare_records(base, cand))
    assert (result.verdict, result.cases, result.figures) == ("pass", [], {"regressed": 0})


def test_no_more_failed(scenario: GradedComparison) -> None:
    result = one({"type": "no-more-failed"}, scenario)  # one errored case on each side
    assert (result.verdict, result.figures) == ("pass", {"baseline": 1, "candidate": 1})
    assert result.cases == []
    worse = dict(CANDIDATE, s1=[g(1, 0.5), None])
    comparison = compare_records(records(BASELINE, "base"), records(worse, "cand"))
    result = one({"type": "no-more-failed"}, comparison)
    assert (result.verdict, result.figures) == ("fail", {"baseline": 1, "candidate": 2})
    assert result.cases == ["ev/s1", "ev/s4"]  # the cases that started erroring


def test_no_missing_and_same_suite(scenario: GradedComparison) -> None:
    result = one({"type": "no-missing"}, scenario)
    assert (result.verdict, result.cases) == ("fail", ["ev/s7"])
    # a case one run lacks is missing, not another suite
    result = one({"type": "same-suite"}, scenario)
    assert result.verdict == "pass" and "1 cases only one run has" in result.reason
    whole = {k: v for k, v in BASELINE.items() if k != "s7"}
    same = compare_records(records(whole, "base"), records(CANDIDATE, "cand"))
    assert one({"type": "no-missing"}, same).verdict == "pass"
    result = one({"type": "same-suite"}, same)
    assert result.verdict == "pass"
    assert result.figures["baseline"] == result.figures["candidate"] is not None
    changed = records(CANDIDATE, "cand")
    changed[0] = trial("s1", 0, g(1, 0.5), run_id="cand", prompt="do something else")
    changed[1] = trial("s1", 1, g(1, 0.5), run_id="cand", prompt="do something else")
    result = one({"type": "same-suite"}, compare_records(records(whole, "base"), changed))
    assert (result.verdict, result.cases) == ("fail", ["ev/s1"])


# --------------------------------------------------------------------------- margins

N = 40
BRIEF_BASE = [0.45 + 0.05 * (i % 4) for i in range(N)]
"""Baseline brief scores per case, 0.45 to 0.6."""
BRIEF_GAIN = [0.2 + 0.05 * (i % 4) for i in range(N)]
"""Per-case gains on brief, 0.2 to 0.35: mean 0.275, all positive."""
WALL_BASE = [1000] * N


def brief_gain(gains: Sequence[float], wall_cand: Sequence[int] = WALL_BASE) -> GradedComparison:
    cand = [b + d for b, d in zip(BRIEF_BASE, gains, strict=True)]
    return scored(BRIEF_BASE, cand, wall=(WALL_BASE, wall_cand))


def test_improves_reads_the_printed_interval() -> None:
    comparison = brief_gain(BRIEF_GAIN)
    brief = comparison.grader(BRIEF)
    assert brief is not None and brief.delta == pytest.approx(0.275)
    low, high = scipy_bounded(BRIEF_GAIN)
    assert brief.case_interval is not None
    assert (brief.case_interval.low, brief.case_interval.high) == pytest.approx((low, high))
    assert 0.1 < low < 0.2 < 0.275 < high < 0.4
    passed = one({"type": "improves", "figure": BRIEF, "by": 0.05}, comparison)
    assert passed.verdict == "pass"
    assert passed.figures["margin"] == 0.05 and passed.figures["marginAsWritten"] == "0.05"
    assert passed.figures["delta"] == pytest.approx(0.275)
    assert passed.figures["interval"] == {
        "low": pytest.approx(low), "high": pytest.approx(high), "level": 0.95,
    }  # fmt: skip
    gain = passed.figures["gainInterval"]
    assert gain == {"low": pytest.approx(low), "high": pytest.approx(high)}
    assert passed.figures["basis"] == "interval" and passed.figures["paired"] == N
    assert passed.name == "improves brief"
    # a margin past the interval's top end is ruled out
    failed = one({"type": "improves", "figure": BRIEF, "by": 0.45}, comparison)
    assert failed.verdict == "fail" and "rules out" in failed.reason
    # a margin inside the interval: not established
    middle = one({"type": "improves", "figure": BRIEF, "by": 0.2}, comparison)
    assert middle.verdict == "inconclusive"


def test_basis_estimate_reads_the_point_estimate_alone() -> None:
    comparison = brief_gain(BRIEF_GAIN)
    # the interval straddles 0.2, the estimate (0.275) clears it
    rule = {"type": "improves", "figure": BRIEF, "by": 0.2}
    assert one(rule, comparison).verdict == "inconclusive"
    estimate = one({**rule, "basis": "estimate"}, comparison)
    assert estimate.verdict == "pass" and estimate.figures["basis"] == "estimate"
    assert "gainInterval" not in estimate.figures
    assert one({**rule, "by": 0.275, "basis": "estimate"}, comparison).verdict == "pass"
    assert one({**rule, "by": 0.28, "basis": "estimate"}, comparison).verdict == "fail"
    rule = {"type": "non-inferior", "figure": BRIEF, "margin": 0.1, "basis": "estimate"}
    assert one(rule, brief_gain([-0.05] * N)).verdict == "pass"
    assert one(rule, brief_gain([-0.15] * N)).verdict == "fail"


def test_non_inferior_on_a_grader() -> None:
    losses = [(-0.02, 0.01, -0.03, 0.0, -0.01)[i % 5] for i in range(N)]
    comparison = brief_gain(losses)
    low, high = scipy_bounded(losses)
    assert -0.1 < low < -0.05 and high < 0.1
    result = one({"type": "non-inferior", "figure": BRIEF, "margin": 0.1}, comparison)
    assert result.verdict == "pass" and "rules out a loss of" in result.reason
    # the pseudo-cases keep the interval wide: a margin of 0.05 is not ruled out
    result = one({"type": "non-inferior", "figure": BRIEF, "margin": 0.05}, comparison)
    assert result.verdict == "inconclusive"
    far = brief_gain([-0.4 - 0.05 * (i % 2) for i in range(N)])
    result = one({"type": "non-inferior", "figure": BRIEF, "margin": 0.05}, far)
    assert result.verdict == "fail" and "lies wholly past a loss" in result.reason


WALL_NEAR = [(1010, 1040, 980, 1030, 1020, 990, 1050, 1000, 1010, 1020)[i % 10] for i in range(N)]
"""Candidate wall times: mean 1015 ms against the baseline's 1000."""
SPREAD = (-250, 200, -150, 300, 0, -100, 50, 250, -200, -100)


def test_relative_margin_on_a_lower_is_better_metric() -> None:
    rule = {"type": "non-inferior", "figure": "wall_time_ms", "margin": "10%"}
    comparison = brief_gain(BRIEF_GAIN, WALL_NEAR)
    wall = comparison.metric("wall_time_ms")
    assert wall is not None and wall.better == "lower" and wall.delta == pytest.approx(15)
    low, high = scipy_paired([w - 1000 for w in WALL_NEAR])
    assert high < 100  # a loss of 10% of 1000 ms is ruled out
    result = one(rule, comparison)
    assert result.verdict == "pass"
    assert result.figures["margin"] == pytest.approx(100) and result.figures["better"] == "lower"
    assert result.figures["marginAsWritten"] == "10%"
    gain = result.figures["gainInterval"]
    assert gain == {"low": pytest.approx(-high), "high": pytest.approx(-low)}
    assert "lower is better" in result.reason
    # 30% slower: wholly past the loss allowed
    slow = brief_gain(BRIEF_GAIN, [w + 300 for w in WALL_NEAR])
    assert one(rule, slow).verdict == "fail"
    # about 10% slower with a spread: the interval straddles the margin
    straddles = brief_gain(BRIEF_GAIN, [1100 + SPREAD[i % 10] for i in range(N)])
    assert one(rule, straddles).verdict == "inconclusive"
    # improving by 10% means at least 100 ms faster, all of the interval
    faster = brief_gain(BRIEF_GAIN, [w - 300 for w in WALL_NEAR])
    assert one({"type": "improves", "figure": "wall_time_ms", "by": "10%"}, faster).verdict == (
        "pass"
    )
    assert one({"type": "improves", "figure": "wall_time_ms", "by": "10%"}, comparison).verdict == (
        "fail"
    )


def test_a_margin_rule_without_an_interval_is_inconclusive() -> None:
    comparison = scored([0.5], [0.9], wall=([1000], [1000]))
    result = one({"type": "improves", "figure": BRIEF, "by": 0.1}, comparison)
    assert result.verdict == "inconclusive" and result.figures["interval"] is None
    assert "1 paired cases" in result.reason
    # on the estimate alone one case is enough
    result = one({"type": "improves", "figure": BRIEF, "by": 0.1, "basis": "estimate"}, comparison)
    assert result.verdict == "pass"


# --------------------------------------------------------------------------- win rate


def test_win_rate() -> None:
    comparison = brief_gain(BRIEF_GAIN)
    rule = {"type": "win-rate", "at_least": 0.55}
    result = one(rule, comparison)
    assert result.verdict == "inconclusive" and "judge model" in result.reason
    evidence = WinRateEvidence(win_rate=0.7, interval=Interval(0.6, 0.8), pairs=20)
    result = one(rule, comparison, win_rate=evidence)
    assert result.verdict == "pass"
    assert result.figures["winRate"] == 0.7 and result.figures["pairs"] == 20
    assert one({**rule, "at_least": 0.85}, comparison, win_rate=evidence).verdict == "fail"
    assert one({**rule, "at_least": 0.65}, comparison, win_rate=evidence).verdict == (
        "inconclusive"
    )
    estimate = {**rule, "at_least": 0.65, "basis": "estimate"}
    assert one(estimate, comparison, win_rate=evidence).verdict == "pass"
    no_interval = WinRateEvidence(win_rate=0.7, interval=None, pairs=1)
    assert one(rule, comparison, win_rate=no_interval).verdict == "inconclusive"


# --------------------------------------------------------------------------- scopes


def scoped_runs() -> GradedComparison:
    """``golden`` regresses on g2; ``evidence`` regresses on e2; the hard cases of
    evidence are e1 and e2."""
    base, cand = [], []
    for eval_name, prefix in (("golden", "g"), ("evidence", "e")):
        for i in range(1, 4):
            tags = {"group": "hard" if prefix == "e" and i < 3 else "easy"}
            drop = 0.5 if i == 2 else 0.0
            kwargs = {"eval_name": eval_name, "tags": tags}
            base.append(trial(f"{prefix}{i}", 0, g(1, 0.8), run_id="base", **kwargs))
            cand.append(trial(f"{prefix}{i}", 0, g(1, 0.8 - drop), run_id="cand", **kwargs))
    cand[-1] = trial("e3", 0, None, run_id="cand", eval_name="evidence", tags={"group": "easy"})
    return compare_records(base, cand, by=["eval", "group"])


def test_scoped_rules_look_only_at_their_cases() -> None:
    comparison = scoped_runs()
    assert comparison.regressed == ["evidence/e2", "evidence/e3", "golden/g2"]
    golden = one({"type": "no-regressed-cases", "eval": "golden"}, comparison)
    assert (golden.verdict, golden.cases, golden.scope) == ("fail", ["golden/g2"], "eval=golden")
    assert golden.name == "no-regressed-cases [eval=golden]"
    hard = one({"type": "no-regressed-cases", "tag": {"group": "hard"}}, comparison)
    assert (hard.cases, hard.scope) == (["evidence/e2"], "group=hard")
    assert one({"type": "no-more-failed", "eval": "golden"}, comparison).verdict == "pass"
    evidence = one({"type": "no-more-failed", "eval": "evidence"}, comparison)
    assert (evidence.verdict, evidence.cases) == ("fail", ["evidence/e3"])
    rule = {"type": "no-regressed-cases", "tag": {"group": "easy"}, "name": "easy"}
    easy = one(rule, comparison)
    assert easy.name == "easy" and easy.cases == ["evidence/e3", "golden/g2"]
    rule = {"type": "improves", "figure": BRIEF, "eval": "golden", "basis": "estimate"}
    result = one(rule, comparison)
    assert result.figures["paired"] == 3 and result.figures["delta"] == pytest.approx(-0.5 / 3)


def test_unknown_names_raise_config_errors_naming_the_rule(scenario: GradedComparison) -> None:
    ok = {"type": "no-missing"}
    cases = [
        ({"type": "no-regressed-cases", "graders": ["tone"]}, "neither run has: tone"),
        ({"type": "improves", "figure": "tone", "by": 0.1}, "'tone'"),
        ({"type": "non-inferior", "figure": "latency", "margin": 1}, "'latency'"),
        ({"type": "no-missing", "eval": "other"}, "eval=other"),
        ({"type": "no-missing", "tag": {"group": "hard"}}, "group=hard"),
    ]
    for rule, words in cases:
        with pytest.raises(ConfigError) as raised:
            evaluate(rules(ok, rule), scenario)
        assert "promotion rule 2" in str(raised.value) and words in str(raised.value)


@pytest.mark.parametrize(
    "document",
    [
        {"rules": [{"type": "no-regressions"}]},
        {"rules": [{"type": "improves", "figure": BRIEF, "by": -0.1}]},
        {"rules": [{"type": "non-inferior", "figure": BRIEF, "margin": "-5%"}]},
        {"rules": [{"type": "non-inferior", "figure": BRIEF, "margin": "5 percent"}]},
        {"rules": [{"type": "non-inferior", "figure": BRIEF, "margin": True}]},
        {"rules": [{"type": "non-inferior", "figure": BRIEF}]},
        {"rules": [{"type": "no-missing", "tag": {"group": "hard", "lang": "en"}}]},
        {"rules": [{"type": "no-missing", "tag": {}}]},
        {"rules": [{"type": "no-missing", "eval": "a", "tag": {"group": "hard"}}]},
        {"rules": [{"type": "no-regressed-cases", "tolerance": -0.1}]},
        {"rules": [{"type": "no-regressed-cases", "max": -1}]},
        {"rules": [{"type": "no-missing", "colour": "red"}]},
        {"rules": [{"type": "win-rate", "at_least": 1.5}]},
        {"rules": []},
        {},
        {"rules": [{"type": "no-missing"}], "confidence_level": 1.0},
    ],
)
def test_invalid_rule_files_fail_validation(document: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        PromotionRules.model_validate(document)


def test_margins_as_written() -> None:
    parsed = rules(
        {"type": "improves", "figure": BRIEF},
        {"type": "improves", "figure": BRIEF, "by": "12.5%"},
        {"type": "non-inferior", "figure": BRIEF, "margin": 0},
    )
    by_default, relative, zero = parsed.rules
    assert by_default.by.value == 0 and not by_default.by.relative  # type: ignore[union-attr]
    assert relative.by.relative and relative.by.value == pytest.approx(0.125)  # type: ignore[union-attr]
    assert relative.by.amount(-80.0) == pytest.approx(10.0)  # type: ignore[union-attr]
    assert relative.by.amount(None) is None  # type: ignore[union-attr]
    assert zero.margin.text() == "0"  # type: ignore[union-attr]


# --------------------------------------------------------------------------- verdict


def test_promote_only_when_every_rule_passes(scenario: GradedComparison) -> None:
    passing = [{"type": "no-more-failed"}, {"type": "no-regressed-cases", "max": 3}]
    result = evaluate(rules(*passing, confidence_level=0.9), scenario)
    assert isinstance(result, PromotionResult)
    assert [r.verdict for r in result.rules] == ["pass", "pass"]
    assert (result.verdict, result.exit_code) == ("promote", 0)
    assert result.confidence_level == scenario.confidence_level
    failing = evaluate(rules(*passing, {"type": "no-missing"}), scenario)
    assert [r.verdict for r in failing.rules] == ["pass", "pass", "fail"]
    assert (failing.verdict, failing.exit_code) == ("hold", 1)
    inconclusive = evaluate(rules(*passing, {"type": "win-rate", "at_least": 0.5}), scenario)
    assert inconclusive.rules[-1].verdict == "inconclusive"
    assert (inconclusive.verdict, inconclusive.exit_code) == ("hold", 1)
