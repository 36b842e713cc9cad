"""The ``--output`` record of a judged comparison: one JSON object per treatment, with an
entry per pair (see ``docs/reference/comparison-records.md``)."""

from __future__ import annotations

import json
from typing import Any

from vally_compare.judged import ComparisonResult, PairResult, caveats
from vally_compare.statistics import estimates as stats
from vally_compare.statistics.agreement import OrderAgreement

# ----------------------------------------------------------------------------------- output


def _estimate_json(estimate: stats.Estimate) -> dict[str, Any]:
    test = estimate.test
    return {
        "mean": estimate.mean,
        "ci95": None if estimate.ci is None else [estimate.ci.low, estimate.ci.high],
        "decisionInterval": None
        if estimate.decision_ci is None
        else {
            "low": estimate.decision_ci.low,
            "high": estimate.decision_ci.high,
            "level": estimate.decision_ci.level,
            "method": "sign-flip inversion",
        },
        "insufficientData": estimate.insufficient,
        "stimuli": estimate.n_stimuli,
        "pairs": estimate.n_pairs,
        "pValue": estimate.p_value,
        "pValueAdjusted": estimate.p_adjusted,
        "test": None
        if test is None
        else ("sign-flip exact" if test.exact else "sign-flip monte-carlo"),
        "significant": estimate.significant(),
        "smallestDetectable": estimate.mde,
    }


def agreement_json(agreement: OrderAgreement) -> dict[str, Any]:
    """The ``orderAgreement`` object of one judge (or of all judges together)."""
    return {
        "pairs": agreement.pairs,
        "agreed": agreement.agreed,
        "rate": agreement.rate,
        "chance": agreement.chance,
        "kappa": agreement.kappa,
        "positionAShare": agreement.position_a_share,
        "noBetterThanChance": agreement.no_better_than_chance,
    }


def _judging_json(result: ComparisonResult) -> dict[str, Any]:
    """Judge reliability: order agreement overall and per model, panel alpha, re-judging."""
    consistency = result.consistency
    return {
        "orderAgreement": agreement_json(result.overall_agreement),
        "orderAgreementByModel": {
            str(model): agreement_json(a) for model, a in result.agreement.items()
        },
        "panelAlpha": result.panel_alpha,
        "selfConsistency": None
        if consistency is None
        else {"pairs": consistency.pairs, "same": consistency.same, "alpha": consistency.alpha},
    }


def to_record(result: ComparisonResult) -> dict[str, Any]:
    """The ``--output`` JSONL record of one treatment. Deterministic: a pair recovered on
    retry is written exactly like a clean one."""
    if result.trials_file is not None:
        text = result.trials_file.read_text(encoding="utf-8")
        trials = json.loads(f"[{text}]")
    else:
        trials = [trial_json(r) for r in result.results]
    mc = result.mcnemar
    return {
        "type": "comparison",
        "baseline": result.baseline,
        "treatment": result.treatment,
        "judgeModel": result.judge_model,
        "status": result.status,
        "matchedPairs": result.n_matched,
        "judgedPairs": result.n_judged,
        "failedPairs": result.n_failed,
        "unmatched": {
            "baselineOnly": [list(k) for k in result.pairing.only_baseline],
            "treatmentOnly": [list(k) for k in result.pairing.only_treatment],
        },
        "winRate": {
            "wins": result.win_rate.wins,
            "ties": result.win_rate.ties,
            "losses": result.win_rate.losses,
            "rate": result.win_rate.win_rate,
            "ci95": None
            if result.win_rate.ci is None
            else [result.win_rate.ci.low, result.win_rate.ci.high],
        },
        "meanScore": _estimate_json(result.score),
        "significantRegression": result.significant_regression,
        "decision": result.decision,
        "judging": _judging_json(result),
        "warnings": caveats(result),
        "mcnemar": None
        if mc is None
        else {
            "b": mc.b,
            "c": mc.c,
            "units": mc.n_units,
            "ties": mc.n_ties,
            "pValue": mc.p_value,
            "minPValue": mc.min_p_value,
            "erroredLeftOut": mc.n_errored,
        },
        "metricDeltas": [
            {
                "metric": d.metric,
                "baselineMean": d.baseline_mean,
                "treatmentMean": d.treatment_mean,
                "delta": _estimate_json(d.delta),
                "relative": d.relative,
                "highVariance": d.high_variance,
                "missingPairs": d.missing,
            }
            for d in result.deltas
        ],
        "error": result.error,
        "judgeUsage": result.judge_spend.to_json() if result.judge_spend else None,
        "trials": trials,
    }


def trial_json(result: PairResult) -> dict[str, Any]:
    """One pair's entry in the ``trials`` list of an ``--output`` record."""
    return {
        "evalName": result.pair.key[0],
        "stimulus": result.pair.key[1],
        "trialIndex": result.pair.key[2],
        "errored": result.failure is not None,
        "score": result.score,
        "verdict": result.verdict,
        "passes": list(result.passes),
        "failure": result.failure.to_json() if result.failure else None,
        "votes": [{"judgeModel": model, "score": score} for model, score in result.votes],
    }
