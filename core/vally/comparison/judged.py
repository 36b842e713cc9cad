"""The comparison engine behind ``vally compare`` and ``experiment run --compare``.

For each (baseline, treatment) pair of trials, matched by eval, stimulus name and trial
index, the evidence of both runs (captured output, recorded timeline events, metrics) is
copied once into a fresh temporary directory outside every agent workspace, under the
neutral names ``run-1`` and ``run-2``. A pairwise judge then judges two passes with the
positions swapped. Disagreement on the winner is a tie; agreement scores on the five-bucket
scale from the treatment's side (see ``docs/statistics.md``).

A failed pair is retried (up to ``max_retries`` times, exponential backoff) only when every
failed pass is retryable; each retry gets a new evidence directory. A pair that recovers
leaves no trace. Figures cover judged pairs only.
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from vally.contracts.llm import LLMProvider
from vally.contracts.protocols import JudgeSettings, PairwiseContext, PairwiseJudge
from vally.engine.trials.judge_cache import JudgeSpend, bypass_cache
from vally.errors import ConfigError, LLMError, VallyError
from vally.models.records import TrialResultRecord
from vally.statistics import estimates as stats
from vally.statistics.agreement import (
    OrderAgreement,
    SelfConsistency,
    self_consistency,
)
from vally.statistics.multiplicity import holm

if TYPE_CHECKING:
    from vally.comparison.judged_tally import PairTally

SCORES = {("much", 1): 1.0, ("slightly", 1): 0.4, ("much", -1): -1.0, ("slightly", -1): -0.4}
DEFAULT_RUBRIC = (
    "The response accomplishes the task completely and correctly.",
    "The response is clear, well organised and free of unnecessary content.",
    "The agent used its tools sensibly, without errors or wasted steps.",
)
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
CLEANUP_PENDING = "VALLY_JUDGE_WORKSPACE_CLEANUP_PENDING"
CLEANUP_FAILED = "VALLY_JUDGE_WORKSPACE_CLEANUP_FAILED"

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
        """The ``failure`` object of ``--output`` records."""
        data: dict[str, Any] = {
            "errorClass": self.error_class,
            "retryable": self.retryable,
            "attempts": self.attempts,
            "message": self.message,
            "model": self.model,
        }
        if self.other_messages:
            data["otherMessages"] = self.other_messages
        return data


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


# --------------------------------------------------------------------------------- evidence


def write_evidence(folder: Path, record: TrialResultRecord) -> None:
    """Copy one run's evidence into ``folder``: output, timeline events and metrics."""
    folder.mkdir(parents=True)
    trajectory = record.trajectory
    output = trajectory.output if trajectory else ""
    (folder / "output.md").write_text(output, encoding="utf-8")
    with (folder / "timeline.jsonl").open("w", encoding="utf-8") as handle:
        for event in trajectory.events if trajectory else []:
            handle.write(event.to_json_line() + "\n")
    metrics = trajectory.metrics.to_json_dict() if trajectory else {}
    metrics["status"] = record.status
    metrics["endReason"] = trajectory.end_reason if trajectory else None
    (folder / "metrics.json").write_text(json.dumps(metrics, indent=2), encoding="utf-8")


def task_text(record: TrialResultRecord) -> str:
    """The task the agents were given: the prompt, or each turn's prompt in order."""
    prompts = record.stimulus.prompts
    if len(prompts) == 1:
        return prompts[0]
    return "\n\n".join(f"Turn {i + 1}: {p}" for i, p in enumerate(prompts))


# ---------------------------------------------------------------------------------- judging


@dataclass
class CompareOptions:
    """How to judge."""

    judge: JudgeSettings
    llm: LLMProvider | None
    rubric_override: dict[str, list[str]] | None = None
    delivery: Literal["tools", "inline"] = "tools"
    read_budget: int = 40
    max_retries: int = 2
    backoff_base: float = 1.0
    judge_workers: int = 4
    pass_timeout: float | None = None
    temp_root: Path | None = None
    panel: tuple[JudgeSettings, ...] = ()
    """Judges of a panel (one settings per model); empty: ``judge`` alone."""
    rejudge: int = 0
    """Judged pairs to judge again, to measure the judge's self-consistency."""


def combine(first: Any, second: Any) -> tuple[float, str]:
    """Score two passes (pass 1: A = baseline, pass 2: A = treatment) for the treatment.

    Returns the signed score and a verdict label.
    """

    def side(verdict: Any, treatment_letter: str) -> int:
        if verdict.winner == "tie":
            return 0
        return 1 if verdict.winner == treatment_letter else -1

    s1, s2 = side(first, "B"), side(second, "A")
    if s1 != s2 or s1 == 0:
        return 0.0, "tie"
    magnitude = "much" if first.magnitude == "much" and second.magnitude == "much" else "slightly"
    score = SCORES[(magnitude, s1)]
    return score, f"{magnitude} {'better' if s1 > 0 else 'worse'}"


def _classify(exc: BaseException, model: str | None) -> tuple[str, bool, str, str | None]:
    if isinstance(exc, LLMError):
        return exc.error_class, exc.retryable, exc.message, exc.model or model
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        return "timeout", True, "the judge pass did not finish in time", model
    retryable = bool(getattr(exc, "retryable", False))
    message = exc.message if isinstance(exc, VallyError) else f"{type(exc).__name__}: {exc}"
    return str(getattr(exc, "error_class", "judge_error")), retryable, message, model


def _contexts(
    evidence: Path, task: str, rubric: list[str], options: CompareOptions, settings: JudgeSettings
) -> list[PairwiseContext]:
    """The two passes over one evidence folder: baseline as A, then treatment as A."""
    return [
        PairwiseContext(
            evidence,
            a,
            b,
            task,
            rubric,
            settings,
            options.llm,
            options.delivery,
            options.read_budget,
        )
        for a, b in (("run-1", "run-2"), ("run-2", "run-1"))
    ]


async def _run_passes(
    judge: PairwiseJudge, contexts: list[PairwiseContext], timeout: float | None
) -> tuple[list[Any], list[asyncio.Future[Any]]]:
    """Each pass's verdict or exception (a pass still running after ``timeout`` counts as
    a :class:`TimeoutError`), and the passes still running."""
    tasks = [asyncio.ensure_future(judge.judge_pair(c)) for c in contexts]
    done, pending = await asyncio.wait(tasks, timeout=timeout)
    outcomes = [
        (task.exception() or task.result()) if task in done else TimeoutError() for task in tasks
    ]
    return outcomes, list(pending)


def _release_evidence(evidence: Path, pending: list[asyncio.Future[Any]]) -> str | None:
    """Remove the evidence folder now, or once the passes still running settle; a note
    when it is kept or could not be removed."""
    if pending:
        _cleanup_when_settled(pending, evidence)
        return f"{CLEANUP_PENDING}: evidence kept at {evidence} until the judge settles"
    error = _remove(evidence)
    return f"{CLEANUP_FAILED}: {evidence}: {error}" if error else None


def _failure(errors: list[BaseException], attempts: int, model: str | None) -> Failure:
    """The failure of a pair from its failed passes (the first one leads)."""
    classified = [_classify(e, model) for e in errors]
    first, *rest = classified
    return Failure(
        first[0],
        all(c[1] for c in classified),
        attempts,
        first[2],
        first[3],
        [c[2] for c in rest if c[2] != first[2]],
    )


@dataclass(frozen=True)
class _Outcome:
    """One judge's verdict on a pair (after retries), or its failure."""

    score: float | None
    label: str | None
    passes: tuple[dict[str, Any], ...]
    failure: Failure | None
    cleanup: tuple[str, ...]


async def _judge_member(
    pair: Pair,
    judge: PairwiseJudge,
    options: CompareOptions,
    settings: JudgeSettings,
    sleep: Callable[[float], Awaitable[None]],
) -> _Outcome:
    """One judge's two position-swapped passes over a pair, with retries."""
    rubric = _rubric(pair, options)
    task = task_text(pair.treatment)
    cleanup_notes: list[str] = []
    attempts = 0
    while True:
        attempts += 1
        evidence = Path(tempfile.mkdtemp(prefix="vally-judge-", dir=options.temp_root))
        write_evidence(evidence / "run-1", pair.baseline)
        write_evidence(evidence / "run-2", pair.treatment)
        contexts = _contexts(evidence, task, rubric, options, settings)
        outcomes, pending = await _run_passes(judge, contexts, options.pass_timeout)
        note = _release_evidence(evidence, pending)
        if note is not None:
            cleanup_notes.append(note)
        errors = [o for o in outcomes if isinstance(o, BaseException)]
        if not errors:
            score, label = combine(outcomes[0], outcomes[1])
            passes = tuple(
                {
                    "a": c.a,
                    "b": c.b,
                    "winner": o.winner,
                    "magnitude": o.magnitude,
                    "reasoning": o.reasoning,
                    "judgeModel": settings.model,
                }
                for c, o in zip(contexts, outcomes, strict=True)
            )
            return _Outcome(score, label, passes, None, tuple(cleanup_notes))
        failure = _failure(errors, attempts, settings.model)
        if failure.retryable and attempts <= options.max_retries:
            delay = options.backoff_base * (2 ** (attempts - 1)) * (1 + random.random() * 0.25)
            await sleep(delay)
            continue
        return _Outcome(None, None, (), failure, tuple(cleanup_notes))


def score_label(score: float) -> str:
    """The verdict label of a (panel) score on the five-bucket scale."""
    if score == 0:
        return "tie"
    return f"{'much' if abs(score) > 0.7 else 'slightly'} {'better' if score > 0 else 'worse'}"


async def judge_pair(
    pair: Pair,
    judge: PairwiseJudge,
    options: CompareOptions,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> PairResult:
    """Judge one pair in two position-swapped passes (per panel member), with retries.

    A panel's verdict is the median of its members' scores (the majority's side for an odd
    panel); the pair fails when any member fails after its retries.
    """
    members = options.panel or (options.judge,)
    outcomes = await asyncio.gather(
        *(_judge_member(pair, judge, options, m, sleep) for m in members)
    )
    cleanup = tuple(note for o in outcomes for note in o.cleanup)
    passes = tuple(p for o in outcomes for p in o.passes)
    failed = next((o.failure for o in outcomes if o.failure is not None), None)
    if failed is not None:
        return PairResult(pair, None, None, (), failed, cleanup)
    if len(members) == 1:
        return PairResult(pair, outcomes[0].score, outcomes[0].label, passes, None, cleanup)
    scores = sorted(o.score for o in outcomes if o.score is not None)
    middle = len(scores) // 2
    score = scores[middle] if len(scores) % 2 else (scores[middle - 1] + scores[middle]) / 2
    votes = tuple((m.model, o.score or 0.0) for m, o in zip(members, outcomes, strict=True))
    return PairResult(pair, score, score_label(score), passes, None, cleanup, votes)


def _remove(folder: Path) -> str | None:
    try:
        shutil.rmtree(folder)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return str(exc)
    return None


def _cleanup_when_settled(pending: list[asyncio.Future[Any]], folder: Path) -> None:
    remaining = {"n": len(pending)}

    def settled(future: asyncio.Future[Any]) -> None:
        if not future.cancelled():
            future.exception()  # consume, so asyncio does not warn
        remaining["n"] -= 1
        if remaining["n"] == 0:
            _remove(folder)

    for future in pending:
        future.add_done_callback(settled)


def _rubric(pair: Pair, options: CompareOptions) -> list[str]:
    if options.rubric_override is not None:
        override = options.rubric_override.get(pair.key[1])
        if override:
            return override
    return list(pair.treatment.stimulus.rubric or pair.baseline.stimulus.rubric or DEFAULT_RUBRIC)


async def compare_runs(
    baseline_name: str,
    baseline: Sequence[TrialResultRecord],
    treatment_name: str,
    treatment: Sequence[TrialResultRecord],
    judge: PairwiseJudge,
    options: CompareOptions,
    *,
    on_pair: Callable[[PairResult], None] | None = None,
) -> ComparisonResult:
    """Compare one treatment with the baseline and compute every figure (unadjusted for
    other treatments: see :func:`adjust`)."""
    pairing = pair_records(baseline, treatment)
    limit = asyncio.Semaphore(max(1, options.judge_workers))

    async def run(pair: Pair) -> PairResult:
        async with limit:
            result = await judge_pair(pair, judge, options)
        if on_pair is not None:
            on_pair(result)
        return result

    results = list(await asyncio.gather(*(run(p) for p in pairing.pairs)))
    consistency = None
    if options.rejudge > 0:
        consistency = await _rejudge(results, judge, options, run)
    model = options.judge.model
    if options.panel:
        model = ",".join(str(m.model) for m in options.panel)
    summary = summarize(baseline_name, treatment_name, pairing, results, model)
    return replace(summary, consistency=consistency)


REJUDGE_SEED = 0
"""Seed of the choice of pairs judged again for ``--rejudge``."""


async def _rejudge(
    results: list[PairResult],
    judge: PairwiseJudge,
    options: CompareOptions,
    run: Callable[[Pair], Awaitable[PairResult]],
) -> SelfConsistency:
    """Judge a seeded sample of judged pairs again and compare the scores."""
    judged = [r for r in results if r.score is not None]
    sample = random.Random(REJUDGE_SEED).sample(judged, min(options.rejudge, len(judged)))
    with bypass_cache():  # a cached answer would agree with itself by construction
        again = await asyncio.gather(*(run(r.pair) for r in sample))
    scores = [
        (first.score, second.score)
        for first, second in zip(sample, again, strict=True)
        if first.score is not None and second.score is not None
    ]
    return self_consistency(scores)


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
    from vally.comparison.judged_tally import PairTally

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


def caveats(result: ComparisonResult) -> list[str]:
    """What a reader must know before trusting the figures: too few stimuli for the test, a
    judge no better than chance, a panel that disagrees."""
    from vally.statistics.power import min_stimuli

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
