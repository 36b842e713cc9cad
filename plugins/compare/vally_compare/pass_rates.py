"""Pass rates compared at the stimulus level, as the experiment table and report show them.

Each variant's pass rate on a stimulus is ``passed / graded`` over its graded trials:
errored trials (an agent that crashed, a grader that errored) are left out, never counted
as failures. A treatment's difference from the baseline is the mean over the stimuli
graded on both sides of ``rate_treatment - rate_baseline``; the sign-flip test decides
whether it differs from zero, Holm-adjusted across the treatments sharing the baseline, and
the bounded interval in [-1, 1] describes it (see :mod:`vally_compare.statistics.estimates`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from vally import TrialResultRecord, is_graded
from vally_compare.statistics.estimates import SCORE_BOUNDS, Estimate, tested_mean
from vally_compare.statistics.multiplicity import holm

StimulusKey = tuple[str, str, str | None]
"""(eval name, stimulus name, model)."""


def stimulus_pass_rates(records: Sequence[TrialResultRecord]) -> dict[StimulusKey, float]:
    """Pass rate per stimulus over its graded trials; stimuli without one are absent."""
    counts: dict[StimulusKey, list[int]] = {}
    for record in records:
        if not is_graded(record):
            continue
        passed = record.grade_result is not None and record.grade_result.passed
        tally = counts.setdefault((record.eval_name, record.stimulus_name, record.model), [0, 0])
        tally[0] += int(passed)
        tally[1] += 1
    return {key: passed / graded for key, (passed, graded) in counts.items()}


def mean_rate(rates: Mapping[StimulusKey, float]) -> float | None:
    """The mean of the per-stimulus pass rates (None with none)."""
    return math.fsum(rates.values()) / len(rates) if rates else None


def pass_rate_deltas(
    baseline: Mapping[StimulusKey, float], treatments: Mapping[str, Mapping[StimulusKey, float]]
) -> dict[str, Estimate]:
    """Each treatment's tested mean per-stimulus difference from the baseline, with the
    p-values Holm-adjusted across the treatments (in ``treatments`` order)."""
    estimates = {}
    for name, rates in treatments.items():
        pairs = [(key, rates[key] - base) for key, base in baseline.items() if key in rates]
        estimates[name] = tested_mean(pairs, SCORE_BOUNDS)
    adjusted = holm([e.p_value for e in estimates.values()])
    return {
        name: _with_adjusted(estimate, p)
        for (name, estimate), p in zip(estimates.items(), adjusted, strict=True)
    }


def _with_adjusted(estimate: Estimate, p: float | None) -> Estimate:
    from dataclasses import replace

    return replace(estimate, p_adjusted=p)
