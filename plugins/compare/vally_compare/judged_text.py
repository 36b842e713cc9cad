"""The text report of a comparison, as ``vally compare`` prints it.

:func:`comparison_lines` gives the standard-output lines of one treatment (win rate,
mean score with its interval, McNemar, metric deltas, failed pairs);
:func:`cleanup_warnings` gives the notes about judge evidence folders, which belong on
standard error.
"""

from __future__ import annotations

from vally_compare.judged import ComparisonResult, PairKey, PairResult, caveats
from vally_compare.statistics.estimates import Estimate, Interval, McNemarResult


def fmt(value: float | None, signed: bool = True, digits: int = 2) -> str:
    """``value`` with ``digits`` decimals (a sign when ``signed``), ``n/a`` for None."""
    if value is None:
        return "n/a"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _trial(key: PairKey) -> str:
    return f"{key[0]}/{key[1]} #{key[2]}"


def comparison_lines(result: ComparisonResult, verbose: bool) -> list[str]:
    """Every standard-output line of one treatment's comparison."""
    judged = result.n_judged
    matched = result.n_matched
    lines = [
        f"━━━ {result.treatment} vs {result.baseline} ━━━",
        f"Judge: {result.judge_model or 'n/a'}   Matched pairs: {matched}",
        *_unmatched_lines(result, verbose),
    ]
    if result.error:
        lines.append(f"Comparison failed: {result.error}")
    if not judged:
        lines.append("No statistics available — every matched pair failed")
        return lines + _failure_lines(result)
    if result.failed:
        lines += [
            f"⚠ Judged {judged} of {matched} matched pairs — {result.n_failed} failed "
            "during judging.",
            "    All statistics below — score, CI, grader pass/fail, and metric deltas —",
            f"    cover only the {judged} judged pairs.",
        ]
    lines += _statistics_lines(result)
    if verbose:
        lines += [line for pair in result.results for line in pair_lines(pair)]
    return lines + _failure_lines(result)


def _unmatched_lines(result: ComparisonResult, verbose: bool) -> list[str]:
    pairing = result.pairing
    if not pairing.only_baseline and not pairing.only_treatment:
        return []
    lines = [
        f"Unmatched: {len(pairing.only_baseline)} only in baseline, "
        f"{len(pairing.only_treatment)} only in treatment"
    ]
    if verbose:
        sides = (("baseline", pairing.only_baseline), ("treatment", pairing.only_treatment))
        for side, keys in sides:
            lines += [f"  only in {side}: {_trial(key)}" for key in keys]
    return lines


def fmt_p(value: float | None) -> str:
    """A p-value as printed: three decimals, ``< 0.001`` below that, ``n/a`` for None."""
    if value is None:
        return "n/a"
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


def _interval(ci: Interval | None, digits: int = 2, scale: float = 1.0, signed: bool = True) -> str:
    if ci is None:
        return "insufficient data for a CI"
    low, high = fmt(ci.low * scale, signed, digits), fmt(ci.high * scale, signed, digits)
    return f"{ci.level:.0%} CI [{low}, {high}]"


def _p_text(estimate: Estimate) -> str:
    text = f"p = {fmt_p(estimate.p_value)}"
    if estimate.p_adjusted is not None and estimate.p_adjusted != estimate.p_value:
        text += f", Holm-adjusted {fmt_p(estimate.p_adjusted)}"
    return text


def _decision_line(result: ComparisonResult) -> str:
    """The test behind the verdict, and what it could have detected."""
    score = result.score
    test = score.test
    kind = "exact" if test is None or test.exact else "Monte Carlo, fixed seed"
    mde = mde_text(score)
    decision = result.decision
    if decision == "n/a":
        status = result.status
        return f"Verdict: withheld (the comparison is {status}); sign-flip test {_p_text(score)}"
    if decision == "no detectable difference":
        return (
            f"Verdict: no detectable difference ({mde}); sign-flip test ({kind}) {_p_text(score)}"
        )
    return f"Verdict: {decision}; sign-flip test ({kind}) {_p_text(score)} ({mde})"


def mde_text(score: Estimate) -> str:
    """The smallest detectable difference as printed, or why none is detectable at this n:
    too few stimuli for the test to reach 0.05, or a figure beyond the scale (not even
    the largest possible difference would be detected with 80% power)."""
    from vally_compare.statistics.power import min_stimuli

    if score.mde is not None:
        return f"smallest detectable at 80% power: ±{score.mde:.2f}"
    if score.n_stimuli < min_stimuli():
        return f"not detectable at this n: fewer than {min_stimuli()} stimuli"
    return (
        f"not detectable at this n: with {score.n_stimuli} stimuli this spread hides even "
        "the largest possible difference"
    )


def _agreement_lines(result: ComparisonResult) -> list[str]:
    """Order agreement per judge (and the panel's alpha, the re-judged sample)."""
    lines = []
    disagreeing = result.tally.disagreeing if result.tally is not None else 0
    for model, agreement in sorted(result.agreement.items(), key=lambda item: str(item[0])):
        kappa = "n/a" if agreement.kappa is None else f"{agreement.kappa:.2f}"
        lines.append(
            f"Judge order agreement{'' if len(result.agreement) == 1 else f' ({model})'}: "
            f"{fmt((agreement.rate or 0) * 100, False, 0)}% of {agreement.pairs} pairs "
            f"(chance {fmt((agreement.chance or 0) * 100, False, 0)}%, kappa {kappa})"
        )
    if disagreeing:
        lines.append(f"  {disagreeing} of the ties are pairs whose two orders disagreed")
    if result.panel_alpha is not None:
        lines.append(f"Panel agreement: Krippendorff's alpha {result.panel_alpha:.2f}")
    if result.consistency is not None and result.consistency.pairs:
        c = result.consistency
        alpha = "n/a" if c.alpha is None else f"{c.alpha:.2f}"
        lines.append(
            f"Self-consistency: same verdict on {c.same} of {c.pairs} re-judged pairs "
            f"(Krippendorff's alpha {alpha})"
        )
    return lines


def _mcnemar_line(mc: McNemarResult) -> str:
    ties = f", {mc.n_ties} tied stimuli left out" if mc.n_ties else ""
    errored = (
        f", {mc.n_errored} pairs left out for an errored trial or grade" if mc.n_errored else ""
    )
    line = (
        f"McNemar: {mc.b} pass→fail, {mc.c} fail→pass, "
        f"p = {fmt_p(mc.p_value)} ({mc.n_units} stimuli{ties}{errored})"
    )
    if mc.min_p_value > 0.05:
        line += f"; with {mc.discordant} discordant stimuli p cannot fall below 0.05 (needs 6)"
    return line


def _statistics_lines(result: ComparisonResult) -> list[str]:
    rate, score = result.win_rate, result.score
    lines = [
        f"Win rate: {rate.wins} W / {rate.ties} T / {rate.losses} L "
        f"({fmt((rate.win_rate or 0) * 100, False, 0)}% wins over {rate.total} pairs)"
        + (
            ""
            if rate.ci is None
            else f"  {rate.ci.level:.0%} CI [{rate.ci.low:.0%}, {rate.ci.high:.0%}]"
        ),
        f"Mean score: {fmt(score.mean)}  {_interval(score.decision_ci or score.ci)}  "
        f"({score.n_stimuli} stimuli, {score.n_pairs} pairs)",
        _decision_line(result),
    ]
    if result.significant_regression:
        lines.append("Significant regression: the sign-flip test rejects at 5% (one-sided 2.5%).")
    lines += _agreement_lines(result)
    if result.mcnemar is not None:
        lines.append(_mcnemar_line(result.mcnemar))
    lines.append("Metric deltas (treatment - baseline; p Holm-adjusted across metrics):")
    for delta in result.deltas:
        est = delta.delta
        shown = est.decision_ci or est.ci
        ci = "insufficient data" if shown is None else _interval(shown, 1)
        relative = "" if delta.relative is None else f" ({delta.relative * 100:+.0f}%)"
        p = "" if est.test is None else f"  p = {fmt_p(est.decision_p)}"
        flag = "  ⚠ high variance" if delta.high_variance else ""
        missing = f"  ({delta.missing} pairs without metrics left out)" if delta.missing else ""
        lines.append(
            f"  {delta.metric:<13} {fmt(est.mean, digits=1)}{relative}  {ci}{p}{flag}{missing}"
        )
    lines += [f"⚠ {note}" for note in caveats(result)]
    return lines


BASELINE_FOLDER = "run-1"
"""The evidence folder holding the baseline's run (see :mod:`vally_compare.judged_pairs`)."""


def pair_lines(pair: PairResult) -> list[str]:
    """A pair's lines under ``--verbose``: its verdict, then each judge pass (which run was
    A, the winner and magnitude it gave) with the judge's full reasoning indented below."""
    key = pair.pair.key
    if pair.failure is not None:
        return [f"  {_trial(key)}: failed ({pair.failure.error_class})"]
    lines = [f"  {_trial(key)}: {pair.verdict} ({fmt(pair.score, digits=1)})"]
    panel = len({p.get("judgeModel") for p in pair.passes}) > 1
    for number, judged in enumerate(pair.passes):
        order = number % 2 + 1
        a, b = (
            ("baseline", "treatment")
            if judged["a"] == BASELINE_FOLDER
            else ("treatment", "baseline")
        )
        judge = f"judge {judged.get('judgeModel')}, " if panel else ""
        magnitude = f", {judged['magnitude']}" if judged.get("magnitude") else ""
        lines.append(f"    order {order} ({judge}A = {a}, B = {b}): {judged['winner']}{magnitude}")
        reasoning = str(judged.get("reasoning") or "").strip()
        text = reasoning.splitlines() if reasoning else ["(the judge gave no reasoning)"]
        lines += [f"      {line}".rstrip() for line in text]
    return lines


def _failure_lines(result: ComparisonResult) -> list[str]:
    lines = []
    for pair in result.failed:
        failure = pair.failure
        assert failure is not None
        lines.append(
            f"  ✘ {_trial(pair.pair.key)}: {failure.error_class} after "
            f"{failure.attempts} attempt(s): {failure.message}"
        )
    return lines


def cleanup_warnings(result: ComparisonResult) -> list[str]:
    """Notes about judge evidence folders that were kept or could not be removed."""
    return [note for pair in result.results for note in pair.cleanup]
