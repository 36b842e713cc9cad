"""The JSON form of a graded comparison: one ``graded-comparison`` record per candidate.

Every field is always present (``null`` where it does not apply), so scripts over the
``--output`` file never meet a missing key; the schema is documented in
``docs/reference/comparison-records.md`` and versioned by ``schemaVersion``.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from vally_compare.graded import (
    CaseDelta,
    CaseSide,
    FigureDelta,
    GradedComparison,
    RunIdentity,
)
from vally_compare.rules import PromotionResult, RuleResult
from vally_compare.statistics.estimates import interval_json

RECORD_TYPE = "graded-comparison"
SCHEMA_VERSION = 1


def figure_json(figure: FigureDelta) -> dict[str, Any]:
    """One grader's or metric's figures."""
    return {
        "name": figure.name,
        "kind": figure.kind,
        "judged": figure.judged,
        "unit": figure.unit,
        "better": figure.better,
        "baselineMean": figure.baseline_mean,
        "candidateMean": figure.candidate_mean,
        "baselineCases": figure.baseline_cases,
        "candidateCases": figure.candidate_cases,
        "delta": figure.delta,
        "relative": figure.relative,
        "paired": figure.paired,
        "interval": interval_json(figure.interval),
        "intervalMethod": figure.method,
        "caseInterval": interval_json(figure.case_interval),
        "repeatInterval": interval_json(figure.repeat_interval),
        "difference": figure.difference,
        "improvedCases": figure.improved,
        "regressedCases": figure.regressed,
    }


def _side_json(side: CaseSide) -> dict[str, Any]:
    return {
        "trials": side.trials,
        "errored": side.errored,
        "passRate": side.pass_rate,
        "state": side.state,
        "scores": side.scores,
        "metrics": side.metrics,
    }


def case_json(case: CaseDelta) -> dict[str, Any]:
    """One case both runs have."""
    return {
        "id": case.id,
        "eval": case.key[0],
        "stimulus": case.key[1],
        "tags": case.tags,
        "deltas": case.deltas,
        "outcome": case.outcome,
        "reason": case.reason,
        "flip": case.flip,
        "baseline": _side_json(case.baseline),
        "candidate": _side_json(case.candidate),
    }


def _identity_json(identity: RunIdentity) -> dict[str, Any]:
    return {
        "label": identity.label,
        "runIds": identity.run_ids,
        "variants": identity.variants,
        "models": identity.models,
        "suiteHash": identity.suite_hash,
        "evalHashes": identity.eval_hashes,
        "graders": identity.graders,
        "targets": identity.targets,
        "cases": identity.cases,
        "records": identity.records,
    }


def rule_json(result: RuleResult) -> dict[str, Any]:
    """One rule's verdict and evidence."""
    data = asdict(result)
    return {
        "name": data["name"],
        "type": data["type"],
        "scope": data["scope"] or None,
        "verdict": data["verdict"],
        "reason": data["reason"],
        "cases": data["cases"],
        "figures": data["figures"],
    }


def _figures_json(comparison: GradedComparison) -> dict[str, Any]:
    flips = comparison.flips
    return {
        "scope": None
        if comparison.scope == ("", "")
        else {
            "by": comparison.scope[0],
            "value": comparison.scope[1],
        },
        "graders": [figure_json(g) for g in comparison.graders],
        "metrics": [figure_json(m) for m in comparison.metrics],
        "improved": comparison.improved,
        "regressed": comparison.regressed,
        "failed": dict(comparison.failed),
        "missing": [
            {"id": m.id, "eval": m.key[0], "stimulus": m.key[1], "presentIn": m.present_in}
            for m in comparison.missing
        ],
        "flips": [
            {"id": c.id, "from": c.baseline.state, "to": c.candidate.state, "flip": c.flip}
            for c in flips
        ],
        "flipCounts": {
            "passToFail": sum(1 for c in flips if c.flip == "pass→fail"),
            "failToPass": sum(1 for c in flips if c.flip == "fail→pass"),
            "ties": len(comparison.ties),
        },
        "cases": [case_json(c) for c in comparison.cases],
        "warnings": comparison.warnings,
    }


def comparison_json(
    comparison: GradedComparison,
    promotion: PromotionResult | None = None,
    rules_source: str | None = None,
) -> dict[str, Any]:
    """The whole ``graded-comparison`` record."""
    return {
        "type": RECORD_TYPE,
        "schemaVersion": SCHEMA_VERSION,
        "baseline": _identity_json(comparison.baseline),
        "candidate": _identity_json(comparison.candidate),
        "confidenceLevel": comparison.confidence_level,
        "intervalMethod": comparison.method,
        "suite": {
            "same": comparison.suite_same,
            "baselineHash": comparison.baseline.suite_hash,
            "candidateHash": comparison.candidate.suite_hash,
            "changedCases": comparison.changed_cases,
        },
        **_figures_json(comparison),
        "groups": [_figures_json(g) for g in comparison.groups],
        "promotion": None
        if promotion is None
        else {
            "verdict": promotion.verdict,
            "source": rules_source,
            "rules": [rule_json(r) for r in promotion.rules],
        },
    }
