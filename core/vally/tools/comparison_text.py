"""The text report of a comparison, as ``vally compare`` prints it.

:func:`comparison_lines` gives the standard-output lines of one treatment (win rate,
mean score with its interval, McNemar, metric deltas, failed pairs);
:func:`cleanup_warnings` gives the notes about judge evidence folders, which belong on
standard error.
"""

from __future__ import annotations

from vally.tools.compare import ComparisonResult, PairKey, PairResult


def fmt(value: float | None, signed: bool = True, digits: int = 2) -> str:
    """``value`` with ``digits`` decimals (a sign when ``signed``), ``n/a`` for None."""
    if value is None:
        return "n/a"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _trial(key: PairKey) -> str:
    return f"{key[0]}/{key[1]} #{key[2]}"


def comparison_lines(result: ComparisonResult, verbose: bool) -> list[str]:
    """Every standard-output line of one treatment's comparison."""
    judged = len(result.judged)
    matched = len(result.pairing.pairs)
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
            f"⚠ Judged {judged} of {matched} matched pairs — {len(result.failed)} failed "
            "during judging.",
            "    All statistics below — score, CI, grader pass/fail, and metric deltas —",
            f"    cover only the {judged} judged pairs.",
        ]
    lines += _statistics_lines(result)
    if verbose:
        lines += [_pair_line(pair) for pair in result.results]
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


def _statistics_lines(result: ComparisonResult) -> list[str]:
    rate, score = result.win_rate, result.score
    interval = (
        "insufficient data for a CI"
        if score.ci is None
        else f"95% CI [{fmt(score.ci.low)}, {fmt(score.ci.high)}]"
    )
    lines = [
        f"Win rate: {rate.wins} W / {rate.ties} T / {rate.losses} L "
        f"({fmt((rate.win_rate or 0) * 100, False, 0)}% wins over {rate.total} pairs)",
        f"Mean score: {fmt(score.mean)}  {interval}  "
        f"({score.n_stimuli} stimuli, {score.n_pairs} pairs)",
    ]
    if result.significant_regression:
        lines.append("Significant regression: the whole 95% CI is below zero.")
    if result.mcnemar is not None:
        mc = result.mcnemar
        ties = f", {mc.n_ties} tied stimuli left out" if mc.n_ties else ""
        lines.append(
            f"McNemar: {mc.b} pass→fail, {mc.c} fail→pass, "
            f"p = {fmt(mc.p_value, False, 3)} ({mc.n_units} stimuli{ties})"
        )
    lines.append("Metric deltas (treatment - baseline):")
    for delta in result.deltas:
        est = delta.delta
        ci = (
            "insufficient data"
            if est.ci is None
            else f"95% CI [{fmt(est.ci.low, digits=1)}, {fmt(est.ci.high, digits=1)}]"
        )
        relative = "" if delta.relative is None else f" ({delta.relative * 100:+.0f}%)"
        flag = "  ⚠ high variance" if delta.high_variance else ""
        lines.append(f"  {delta.metric:<13} {fmt(est.mean, digits=1)}{relative}  {ci}{flag}")
    return lines


def _pair_line(pair: PairResult) -> str:
    key = pair.pair.key
    if pair.failure is not None:
        return f"  {_trial(key)}: failed ({pair.failure.error_class})"
    return f"  {_trial(key)}: {pair.verdict} ({fmt(pair.score, digits=1)})"


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
