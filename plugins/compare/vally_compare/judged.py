"""The judged pairwise comparison's results: the pairs of trials and how they are matched,
what became of each pair, and one treatment's figures over its judged pairs (adjusted across
the treatments that share a baseline), with the caveats a reader must know and the exit code.

How the pairs are judged is :mod:`vally_compare.judged_pairs`; the ``--output`` record is
:mod:`vally_compare.judged_record`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from vally import ConfigError, JudgeSpend, TrialResultRecord
from vally_compare.statistics import estimates as stats
from vally_compare.statistics.agreement import OrderAgreement, SelfConsistency
from vally_compare.statistics.multiplicity import holm

if TYPE_CHECKING:
    from vally_compare.judged_tally import PairTally

METRICS: tuple[tuple[str, Callable[[TrialResultRecord], float | None]], ...] = (
    (
        "tokens",
        lambda r: float(r.trajectory.metrics.token_usage.total_tokens) if r.trajectory else None,
    ),
    ("turns", lambda r: float(r.trajectory.metrics.turn_count) if r.trajectory else None),
    ("tool_calls", lambda r: float(r.trajectory.metrics.tool_call_count) if r.trajectory else None),
    ("wall_time_ms", lambda r: float(r.trajectory.metrics.wall_time_ms) if r.trajectory else None),
    ("errors", lambda r: float(r.trajectory.metrics.error_count) if r.trajectory else None),
)
"""Each metric and how to read it from a trial; None when the trial has no trajectory (it
errored before running), so that the pair is left out of that metric instead of read as 0."""

PairKey = tuple[str, str, int]
"""(eval name, stimulus name, trial index)."""


@dataclass(frozen=True)
class Pair:
    """A baseline trial and the treatment trial it is compared with.

    Its ``repr`` shows the key only: asyncio formats the finished main task's result when
    ``asyncio.run`` ends, and the records of every pair would make that string huge.
    """

    key: PairKey
    baseline: TrialResultRecord = field(repr=False)
    treatment: TrialResultRecord = field(repr=False)


@dataclass(frozen=True)
class Pairing:
    """Matched pairs and the trials without a partner on the other side."""

    pairs: list[Pair]
    only_baseline: list[PairKey]
    only_treatment: list[PairKey]


@dataclass(frozen=True)
class Failure:
    """Why a pair could not be judged."""

    error_class: str
    retryable: bool
    attempts: int
    message: str
    model: str | None
    other_messages: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The ``failure`` object of ``--output`` records: every field always present
        (``otherMessages`` empty when the passes failed alike)."""
        return {
            "errorClass": self.error_class,
            "retryable": self.retryable,
            "attempts": self.attempts,
            "message": self.message,
            "model": self.model,
            "otherMessages": list(self.other_messages),
        }


@dataclass(frozen=True)
class PairResult:
    """The outcome of one pair: a score, or a failure."""

    pair: Pair
    score: float | None
    verdict: str | None
    passes: tuple[dict[str, Any], ...] = ()
    failure: Failure | None = None
    cleanup: tuple[str, ...] = ()
    votes: tuple[tuple[str | None, float], ...] = ()
    """Each panel member's (model, score) when a panel judged the pair; empty otherwise."""
    metadata: dict[str, Any] = field(default_factory=dict, compare=False)
    """For library callers only (never in ``--output``): ``evidence_usage``, one entry per
    pass of the attempt that settled the pair (``pass``, ``judge_model``, ``a``, ``b``,
    ``delivery``, ``reads`` (None for a pass that failed), ``read_budget``), and
    ``judge_cleanup``, what became of the shared evidence directories: ``status``
    (``removed``, ``pending`` while a pass still runs, ``failed``: the worst of its
    directories'), ``directories`` (one per attempt and judge: ``judge_model``,
    ``attempt``, ``directory``, ``status``, ``error``; a pending one is updated once its
    passes settle) and ``session_failures`` (each failed pass: ``pass``, ``judge_model``,
    ``attempt``, ``error_class``, ``message``, ``settled``: False when the pass was still
    running at the deadline, so that its judge session cannot be confirmed stopped). See
    :mod:`vally_compare.judged_pairs`."""


@dataclass(frozen=True)
class ComparisonResult:
    """Everything printed and written for one treatment."""

    baseline: str
    treatment: str
    pairing: Pairing
    results: list[PairResult]
    win_rate: stats.WinRate
    score: stats.Estimate
    mcnemar: stats.McNemarResult | None
    deltas: list[stats.MetricDelta]
    judge_model: str | None
    error: str | None = None
    agreement: dict[str | None, OrderAgreement] = field(default_factory=dict)
    """Order agreement per judge model (one entry, or one per panel member)."""
    panel_alpha: float | None = None
    """Krippendorff's alpha (interval) between the panel members' scores; None without a
    panel or without variation."""
    consistency: SelfConsistency | None = None
    """The re-judged sample's agreement with the first verdicts (``--rejudge``)."""
    judge_spend: JudgeSpend | None = None
    """The judge calls, tokens, cost and cache hits of this comparison."""
    tally: PairTally | None = None
    """The running sums the figures came from (counts, per-stimulus scores)."""
    matched: int | None = None
    """Matched pairs of a streamed comparison, whose ``pairing`` lists no pairs and whose
    ``results`` keeps only the failed pairs (every pair with ``keep_results``); None:
    ``pairing.pairs`` and ``results`` hold every pair."""
    trials_file: Path | None = None
    """A streamed comparison's ``trials`` entries for ``--output`` (JSON values separated
    by ``, ``, in key order), written as its pairs finished; None: built from ``results``."""

    @property
    def judged(self) -> list[PairResult]:
        """Pairs with a verdict (of those kept in ``results``)."""
        return [r for r in self.results if r.score is not None]

    @property
    def failed(self) -> list[PairResult]:
        """Pairs that failed after retries."""
        return [r for r in self.results if r.failure is not None]

    @property
    def n_matched(self) -> int:
        """How many pairs were matched."""
        return len(self.pairing.pairs) if self.matched is None else self.matched

    @property
    def n_judged(self) -> int:
        """How many pairs have a verdict."""
        return len(self.judged) if self.tally is None else self.tally.judged

    @property
    def n_failed(self) -> int:
        """How many pairs failed after retries."""
        return len(self.failed) if self.tally is None else self.tally.failed

    @property
    def status(self) -> Literal["complete", "partial", "no-signal"]:
        """complete: every matched pair judged; partial: some failed; no-signal: none judged."""
        if self.error is not None or not self.n_judged:
            return "no-signal"
        return "partial" if self.n_failed else "complete"

    @property
    def significant_regression(self) -> bool:
        """A complete verdict whose mean is negative and whose sign-flip test (Holm-adjusted
        across the treatments sharing the baseline) rejects at 5% two-sided."""
        return self.status == "complete" and stats.is_significant_regression(self.score)

    @property
    def decision(self) -> Literal["better", "worse", "no detectable difference", "n/a"]:
        """The verdict the test supports (``n/a`` without a complete comparison)."""
        if self.status != "complete":
            return "n/a"
        direction = self.score.direction
        return (
            "better"
            if direction > 0
            else "worse"
            if direction < 0
            else ("no detectable difference")
        )

    @property
    def overall_agreement(self) -> OrderAgreement:
        """Order agreement over every judge."""
        return sum(self.agreement.values(), OrderAgreement(0, 0, 0, 0, 0))


# ------------------------------------------------------------------------------------ input


def pair_records(
    baseline: Sequence[TrialResultRecord], treatment: Sequence[TrialResultRecord]
) -> Pairing:
    """Match trials by (eval, stimulus, trial index).

    Raises:
        ConfigError: One side holds two trials with the same key (for example a run over
            several models), which would make pairing ambiguous.
    """

    def index(records: Sequence[TrialResultRecord], side: str) -> dict[PairKey, TrialResultRecord]:
        out: dict[PairKey, TrialResultRecord] = {}
        for record in records:
            key = (record.eval_name, record.stimulus_name, record.trial_index)
            if key in out:
                raise ConfigError(
                    f"the {side} has two trials for eval {key[0]!r}, stimulus {key[1]!r}, "
                    f"trial {key[2]} (models {out[key].model!r} and {record.model!r})",
                    hint="compare runs of one model each, or split the run by model first",
                )
            out[key] = record
        return out

    base = index(baseline, "baseline")
    treat = index(treatment, "treatment")
    pairs = [Pair(key, base[key], treat[key]) for key in sorted(base) if key in treat]
    return Pairing(
        pairs,
        sorted(k for k in base if k not in treat),
        sorted(k for k in treat if k not in base),
    )


def summarize(
    baseline_name: str,
    treatment_name: str,
    pairing: Pairing,
    results: list[PairResult],
    judge_model: str | None,
    error: str | None = None,
) -> ComparisonResult:
    """Compute the figures over the judged pairs only."""
    tally = new_tally()
    for result in results:
        tally.add(result.pair.key[:2], result, result.pair.baseline, result.pair.treatment)
    return summarize_tally(
        baseline_name, treatment_name, pairing, results, tally, judge_model, error
    )


def new_tally() -> PairTally:
    """An empty tally of this module's figures (its :data:`METRICS`)."""
    from vally_compare.judged_tally import PairTally

    return PairTally(METRICS)


def summarize_tally(
    baseline_name: str,
    treatment_name: str,
    pairing: Pairing,
    results: list[PairResult],
    tally: PairTally,
    judge_model: str | None,
    error: str | None = None,
    *,
    matched: int | None = None,
) -> ComparisonResult:
    """The figures of a tally fed every judged pair; ``results`` are the pairs kept."""
    return ComparisonResult(
        baseline=baseline_name,
        treatment=treatment_name,
        pairing=pairing,
        results=results,
        win_rate=tally.win_rate(),
        score=tally.score(),
        mcnemar=tally.mcnemar(),
        deltas=tally.deltas(),
        judge_model=judge_model,
        error=error,
        agreement=dict(tally.agreement),
        panel_alpha=tally.panel_alpha(),
        tally=tally,
        matched=matched,
    )


def adjust(results: Sequence[ComparisonResult]) -> list[ComparisonResult]:
    """Holm-adjust the treatments sharing one baseline: the score tests form one family (the
    regression gate and the labels), and every metric delta of every treatment another."""
    score_p = holm([r.score.p_value if r.status == "complete" else None for r in results])
    metric_p = holm([d.delta.p_value for r in results for d in r.deltas])
    out: list[ComparisonResult] = []
    position = 0
    for result, p in zip(results, score_p, strict=True):
        deltas = []
        for delta in result.deltas:
            deltas.append(replace(delta, delta=replace(delta.delta, p_adjusted=metric_p[position])))
            position += 1
        out.append(replace(result, score=replace(result.score, p_adjusted=p), deltas=deltas))
    return out


def caveats(result: ComparisonResult) -> list[str]:
    """What a reader must know before trusting the figures: too few stimuli for the test, a
    judge no better than chance, a panel that disagrees."""
    from vally_compare.statistics.power import min_stimuli

    notes = []
    n = result.score.n_stimuli
    if result.n_judged and n < min_stimuli():
        notes.append(
            f"only {n} stimuli: the sign-flip test cannot reach p <= 0.05 with fewer than "
            f"{min_stimuli()}, so no difference can be declared; add stimuli"
        )
    for model, agreement in sorted(result.agreement.items(), key=lambda item: str(item[0])):
        if agreement.no_better_than_chance:
            notes.append(
                f"judge {model or 'n/a'}: its two orders agreed on "
                f"{(agreement.rate or 0) * 100:.0f}% of pairs, no better than a judge answering "
                f"at random with the same answer frequencies ({(agreement.chance or 0) * 100:.0f}%"
                f"; it answered A in {(agreement.position_a_share or 0) * 100:.0f}% of decided "
                "passes): its verdicts carry no signal"
            )
    if result.panel_alpha is not None and result.panel_alpha < 0.4:
        notes.append(
            f"the panel's judges agree poorly (Krippendorff's alpha {result.panel_alpha:.2f} < "
            "0.4): treat the verdict with caution"
        )
    return notes


def exit_code(results: Sequence[ComparisonResult], *, fail_on_regression: bool) -> int:
    """0 when every treatment is complete (and, when gating, none regressed); else 1."""
    for result in results:
        if result.status != "complete":
            return 1
        if fail_on_regression and result.significant_regression:
            return 1
    return 0
