"""Promotion rules applied to a graded comparison: a verdict per rule, and promote or hold.

Each rule (see :class:`vally.PromotionRules`) is read against the comparison of its scope
(every case, one eval, or one tag value) and gives ``pass``, ``fail`` or ``inconclusive``
with its evidence: the cases that broke it, or the figure, its interval and the margin. A
rule with a margin reads the same interval the comparison prints for that figure
(:mod:`vally_compare.statistics.decisions`), so a verdict never contradicts its printed
interval.
The candidate is promoted only when every rule passes; an inconclusive rule holds it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from vally import (
    ConfigError,
    Improves,
    NoMissing,
    NoMoreFailed,
    NonInferior,
    NoRegressedCases,
    PromotionRules,
    SameSuite,
    WinRate,
)
from vally_compare.graded import EPSILON, FigureDelta, GradedComparison
from vally_compare.statistics.decisions import Verdict, non_inferiority, oriented, superiority
from vally_compare.statistics.estimates import Interval, interval_json

Rule = NoRegressedCases | NoMoreFailed | Improves | NonInferior | WinRate | NoMissing | SameSuite
"""One promotion rule: an item of ``PromotionRules.rules`` (mypy checks the two agree)."""


@dataclass(frozen=True)
class WinRateEvidence:
    """The judged pairwise comparison's win rate (wins over judged pairs) and its
    interval."""

    win_rate: float | None
    interval: Interval | None
    pairs: int


@dataclass(frozen=True)
class RuleResult:
    """One rule's verdict and why.

    Attributes:
        name: The rule's name (as written, else made from its type and figure).
        type: The rule's type.
        scope: ``""`` for every case, else ``eval=NAME`` or ``TAG=VALUE``.
        verdict: pass, fail or inconclusive.
        reason: What decided it, in one sentence.
        cases: The cases that broke it (empty when none did or it is not about cases).
        figures: The numbers it read (estimate, interval, margin, counts).
    """

    name: str
    type: str
    scope: str
    verdict: Verdict
    reason: str
    cases: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PromotionResult:
    """Every rule's result and the overall verdict."""

    rules: list[RuleResult]
    confidence_level: float

    @property
    def verdict(self) -> Literal["promote", "hold"]:
        """promote when every rule passed, else hold."""
        return "promote" if all(r.verdict == "pass" for r in self.rules) else "hold"

    @property
    def exit_code(self) -> int:
        """0 to promote, 1 to hold."""
        return 0 if self.verdict == "promote" else 1


def _scope_text(scope: tuple[str, str]) -> str:
    return "" if scope == ("", "") else f"{scope[0]}={scope[1]}"


def _default_name(rule: Rule) -> str:
    figure = getattr(rule, "figure", None)
    name = f"{rule.type} {figure}" if figure else rule.type
    scope = _scope_text(rule.scope)
    return f"{name} [{scope}]" if scope else name


def _listed(ids: Sequence[str], limit: int = 10) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def evaluate(
    rules: PromotionRules,
    comparison: GradedComparison,
    win_rate: WinRateEvidence | None = None,
) -> PromotionResult:
    """Every rule against the comparison (and the judged win rate, when there is one).

    Raises:
        ConfigError: A rule names a grader, metric, eval or tag value that neither run has.
    """
    results = []
    for number, rule in enumerate(rules.rules, start=1):
        scoped = comparison.restricted(rule.scope)
        if scoped is None:
            known = sorted({f"{s[0]}={s[1]}" for s in (g.scope for g in comparison.groups)})
            raise ConfigError(
                f"promotion rule {number} ({rule.type}) is scoped to "
                f"{_scope_text(rule.scope)}, which no case of either run has",
                hint="scopes the runs have: " + (", ".join(known) or "none (only every case)"),
            )
        if isinstance(rule, SameSuite):  # a suite is the whole runs', never one group's
            scoped = comparison
        results.append(_evaluate_one(number, rule, scoped, win_rate))
    return PromotionResult(results, comparison.confidence_level)


def _result(rule: Rule, verdict: Verdict, reason: str, **extra: Any) -> RuleResult:
    return RuleResult(
        name=rule.name or _default_name(rule),
        type=rule.type,
        scope=_scope_text(rule.scope),
        verdict=verdict,
        reason=reason,
        cases=list(extra.pop("cases", [])),
        figures=extra,
    )


def _evaluate_one(
    number: int, rule: Rule, comparison: GradedComparison, win_rate: WinRateEvidence | None
) -> RuleResult:
    if isinstance(rule, NoRegressedCases):
        return _no_regressed(number, rule, comparison)
    if isinstance(rule, NoMoreFailed):
        base, cand = comparison.failed["baseline"], comparison.failed["candidate"]
        verdict: Verdict = "pass" if cand <= base else "fail"
        started = [c.id for c in comparison.cases if not c.baseline.errored and c.candidate.errored]
        return _result(
            rule,
            verdict,
            f"cases with errored trials: {base} in the baseline, {cand} in the candidate",
            cases=started if verdict == "fail" else [],
            baseline=base,
            candidate=cand,
        )
    if isinstance(rule, (Improves, NonInferior)):
        return _margin_rule(number, rule, comparison)
    if isinstance(rule, WinRate):
        return _win_rate(rule, win_rate, comparison.confidence_level)
    if isinstance(rule, NoMissing):
        ids = [m.id for m in comparison.missing]
        return _result(
            rule,
            "fail" if ids else "pass",
            f"{len(ids)} cases only one run has" + (f": {_listed(ids)}" if ids else ""),
            cases=ids,
        )
    assert isinstance(rule, SameSuite)
    b, c = comparison.baseline.suite_hash, comparison.candidate.suite_hash
    if comparison.changed_cases:
        return _result(
            rule,
            "fail",
            f"{len(comparison.changed_cases)} cases differ in content: "
            + _listed(comparison.changed_cases),
            cases=comparison.changed_cases,
            baseline=b,
            candidate=c,
        )
    if not comparison.suite_same:
        return _result(rule, "fail", f"suite {b} against {c}", baseline=b, candidate=c)
    reason = (
        f"suite {b} in both runs"
        if b == c
        else "the cases both runs have are the same in content"
        + (f"; {len(comparison.missing)} cases only one run has" if comparison.missing else "")
    )
    return _result(rule, "pass", reason, baseline=b, candidate=c)


def _no_regressed(number: int, rule: NoRegressedCases, comparison: GradedComparison) -> RuleResult:
    known = {g.name for g in comparison.graders}
    unknown = [g for g in rule.graders if g not in known]
    if unknown:
        raise ConfigError(
            f"promotion rule {number} (no-regressed-cases) names graders neither run has: "
            + ", ".join(unknown),
            hint="graders in the runs: " + (", ".join(sorted(known)) or "none"),
        )
    regressed: list[str] = []
    for case in comparison.cases:
        if not case.baseline.errored and case.candidate.errored:
            regressed.append(case.id)
            continue
        if case.baseline.errored and not case.candidate.errored:
            continue  # its errors went away: improved, whatever its scores did
        if rule.graders:
            if any(case.deltas.get(g, 0.0) < -rule.tolerance - EPSILON for g in rule.graders):
                regressed.append(case.id)
        elif case.deltas:
            mean = sum(case.deltas.values()) / len(case.deltas)
            if mean < -rule.tolerance - EPSILON:
                regressed.append(case.id)
    on = "on " + ", ".join(rule.graders) if rule.graders else "by mean grader change"
    tolerance = f" beyond a tolerance of {rule.tolerance:g}" if rule.tolerance else ""
    verdict: Verdict = "pass" if len(regressed) <= rule.max else "fail"
    allowed = f" (at most {rule.max} allowed)" if rule.max else ""
    reason = f"{len(regressed)} of {len(comparison.cases)} cases regressed {on}{tolerance}{allowed}"
    if regressed:
        reason += ": " + _listed(regressed)
    return _result(rule, verdict, reason, cases=regressed, regressed=len(regressed))


def _figure_of(
    number: int, rule: Improves | NonInferior, comparison: GradedComparison
) -> FigureDelta:
    figure = comparison.figure(rule.figure)
    if figure is None:
        raise ConfigError(
            f"promotion rule {number} ({rule.type}) names {rule.figure!r}, which is neither "
            "a grader nor a metric of these runs",
            hint="graders: "
            + (", ".join(g.name for g in comparison.graders) or "none")
            + "; metrics: "
            + ", ".join(m.name for m in comparison.metrics),
        )
    return figure


def _margin_rule(
    number: int, rule: Improves | NonInferior, comparison: GradedComparison
) -> RuleResult:
    figure = _figure_of(number, rule, comparison)
    margin_spec = rule.by if isinstance(rule, Improves) else rule.margin
    margin = margin_spec.amount(figure.baseline_mean)
    figures: dict[str, Any] = {
        "figure": figure.name,
        "better": figure.better,
        "delta": figure.delta,
        "interval": interval_json(figure.interval),
        "intervalMethod": figure.method,
        "margin": margin,
        "marginAsWritten": margin_spec.text(),
        "paired": figure.paired,
        "basis": rule.basis,
    }
    way = "higher" if figure.better == "higher" else "lower"
    if margin is None:
        return _result(
            rule,
            "inconclusive",
            f"{figure.name}: a relative margin needs a baseline mean, and the baseline has none",
            **figures,
        )
    if figure.delta is None:
        return _result(
            rule, "inconclusive", f"{figure.name}: no case has a value in both runs", **figures
        )
    gain = figure.delta if figure.better == "higher" else -figure.delta
    if rule.basis == "estimate":
        threshold = margin if isinstance(rule, Improves) else -margin
        verdict: Verdict = "pass" if gain >= threshold - EPSILON else "fail"
        what = (
            f"improvement of {_num(gain)} against the {_amount(margin)} required"
            if isinstance(rule, Improves)
            else f"change of {_num(figure.delta)} against an allowed loss of {_amount(margin)}"
        )
        return _result(
            rule, verdict, f"{figure.name} ({way} is better): {what} (estimate)", **figures
        )
    interval = figure.interval
    if interval is None:
        return _result(
            rule,
            "inconclusive",
            f"{figure.name}: no interval ({figure.paired} paired cases; two are needed"
            + (", and two repeats per run" if figure.method == "repeats" else "")
            + ")",
            **figures,
        )
    low, high = oriented(interval, figure.better)
    level = f"{interval.level:.0%}"
    text = f"[{_num(interval.low)}, {_num(interval.high)}]"
    if isinstance(rule, Improves):
        verdict = superiority(interval, figure.better, margin)
        reason = {
            "pass": f"the {level} interval {text} lies wholly past an improvement of "
            f"{_amount(margin)}",
            "fail": f"the {level} interval {text} rules out an improvement of {_amount(margin)}",
            "inconclusive": f"the {level} interval {text} does not establish an improvement "
            f"of {_amount(margin)}",
        }[verdict]
    else:
        verdict = non_inferiority(interval, figure.better, margin)
        reason = {
            "pass": f"the {level} interval {text} rules out a loss of {_amount(margin)} or more",
            "fail": f"the {level} interval {text} lies wholly past a loss of {_amount(margin)}",
            "inconclusive": f"the {level} interval {text} does not rule out a loss of "
            f"{_amount(margin)}",
        }[verdict]
    figures["gainInterval"] = {"low": low, "high": high}
    return _result(rule, verdict, f"{figure.name} ({way} is better): {reason}", **figures)


def _win_rate(rule: WinRate, evidence: WinRateEvidence | None, level: float) -> RuleResult:
    if evidence is None or evidence.win_rate is None:
        return _result(
            rule,
            "inconclusive",
            "no complete judged pairwise comparison: a win rate needs every pair judged "
            "(give a judge model with --judge-model)",
            atLeast=rule.at_least,
        )
    figures: dict[str, Any] = {
        "winRate": evidence.win_rate,
        "interval": interval_json(evidence.interval),
        "atLeast": rule.at_least,
        "pairs": evidence.pairs,
        "basis": rule.basis,
    }
    if rule.basis == "estimate":
        verdict: Verdict = "pass" if evidence.win_rate >= rule.at_least else "fail"
        return _result(
            rule,
            verdict,
            f"win rate {evidence.win_rate:.1%} against at least {rule.at_least:.1%} (estimate)",
            **figures,
        )
    interval = evidence.interval
    if interval is None:
        return _result(
            rule, "inconclusive", "win rate: no interval (two stimuli are needed)", **figures
        )
    verdict = (
        "pass"
        if interval.low >= rule.at_least
        else ("fail" if interval.high < rule.at_least else "inconclusive")
    )
    return _result(
        rule,
        verdict,
        f"win rate {evidence.win_rate:.1%}, {interval.level:.0%} interval "
        f"[{interval.low:.1%}, {interval.high:.1%}], against at least {rule.at_least:.1%}",
        **figures,
    )


def _num(value: float) -> str:
    return f"{value:+.4g}" if value else "0"


def _amount(value: float) -> str:
    return f"{value:.4g}"
