"""Judging pairs: the engine behind ``vally compare`` and ``experiment run --compare``.

For each (baseline, treatment) pair of trials, matched by eval, stimulus name and trial
index, the evidence of both runs (captured output, recorded timeline events, metrics) is
copied once into a fresh temporary directory outside every agent workspace, under the
neutral names ``run-1`` and ``run-2``. A pairwise judge then judges two passes with the
positions swapped. Disagreement on the winner is a tie; agreement scores on the five-bucket
scale from the treatment's side (see ``docs/statistics.md``).

A failed pair is retried (up to ``max_retries`` times, exponential backoff) only when every
failed pass is retryable; each retry gets a new evidence directory. A pair that recovers
leaves no trace. Figures cover judged pairs only (:mod:`vally_compare.judged`).
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from vally import (
    JudgeSettings,
    LLMError,
    LLMProvider,
    PairwiseContext,
    PairwiseJudge,
    TrialResultRecord,
    VallyError,
    bypass_cache,
)
from vally_compare.judged import (
    ComparisonResult,
    Failure,
    Pair,
    PairResult,
    pair_records,
    summarize,
)
from vally_compare.statistics.agreement import SelfConsistency, self_consistency

SCORES = {("much", 1): 1.0, ("slightly", 1): 0.4, ("much", -1): -1.0, ("slightly", -1): -0.4}
DEFAULT_RUBRIC = (
    "The response accomplishes the task completely and correctly.",
    "The response is clear, well organised and free of unnecessary content.",
    "The agent used its tools sensibly, without errors or wasted steps.",
)
CLEANUP_PENDING = "VALLY_JUDGE_WORKSPACE_CLEANUP_PENDING"
CLEANUP_FAILED = "VALLY_JUDGE_WORKSPACE_CLEANUP_FAILED"


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
    a :class:`TimeoutError`), and each pass's task (those still running are not done)."""
    tasks: list[asyncio.Future[Any]] = [
        asyncio.ensure_future(judge.judge_pair(c)) for c in contexts
    ]
    done, _ = await asyncio.wait(tasks, timeout=timeout)
    outcomes = [
        (task.exception() or task.result()) if task in done else TimeoutError() for task in tasks
    ]
    return outcomes, tasks


CLEANUP_ORDER = ("removed", "pending", "failed")
"""Cleanup statuses from best to worst: ``judge_cleanup["status"]`` is the worst of its
directories'."""


def _restatus(report: dict[str, Any]) -> None:
    """Set a ``judge_cleanup`` report's status to the worst of its directories'."""
    statuses = [d["status"] for d in report["directories"]] or ["removed"]
    report["status"] = max(statuses, key=CLEANUP_ORDER.index)


def _release_evidence(
    evidence: Path,
    pending: list[asyncio.Future[Any]],
    entry: dict[str, Any],
    report: dict[str, Any],
) -> str | None:
    """Remove the evidence folder now, or once the passes still running settle; a note
    when it is kept or could not be removed. ``entry`` (the folder's line in ``report``,
    the pair's ``judge_cleanup``) says what became of it, and is updated when a kept
    folder is removed later."""
    if pending:
        entry["status"] = "pending"
        _restatus(report)
        _cleanup_when_settled(pending, evidence, entry, report)
        return f"{CLEANUP_PENDING}: evidence kept at {evidence} until the judge settles"
    error = _remove(evidence)
    entry["status"], entry["error"] = ("failed", error) if error else ("removed", None)
    _restatus(report)
    return f"{CLEANUP_FAILED}: {evidence}: {error}" if error else None


def _pass_reports(
    contexts: list[PairwiseContext],
    outcomes: list[Any],
    running: Sequence[bool],
    settings: JudgeSettings,
    attempt: int,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Each pass's ``evidence_usage`` entry, and the ``session_failures`` of the passes
    that failed or were still running at the deadline (``running``), labelled by pass."""
    usage, failures = [], []
    for number, (context, outcome) in enumerate(zip(contexts, outcomes, strict=True), 1):
        failed = isinstance(outcome, BaseException)
        usage.append(
            {
                "pass": number,
                "judge_model": settings.model,
                "a": context.a,
                "b": context.b,
                "delivery": context.delivery,
                "reads": None if failed else int(getattr(outcome, "reads", 0)),
                "read_budget": context.read_budget,
            }
        )
        if failed:
            error_class, _, message, _ = _classify(outcome, settings.model)
            failures.append(
                {
                    "pass": number,
                    "judge_model": settings.model,
                    "attempt": attempt,
                    "error_class": error_class,
                    "message": message,
                    "settled": not running[number - 1],
                }
            )
    return usage, failures


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
    usage: tuple[dict[str, Any], ...] = ()
    """``evidence_usage`` of the attempt that settled the pair, one entry per pass."""


async def _judge_member(
    pair: Pair,
    judge: PairwiseJudge,
    options: CompareOptions,
    settings: JudgeSettings,
    sleep: Callable[[float], Awaitable[None]],
    report: dict[str, Any],
) -> _Outcome:
    """One judge's two position-swapped passes over a pair, with retries; each attempt's
    evidence folder and failed passes go into ``report`` (the pair's ``judge_cleanup``)."""
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
        outcomes, tasks = await _run_passes(judge, contexts, options.pass_timeout)
        pending = [task for task in tasks if not task.done()]
        entry: dict[str, Any] = {
            "judge_model": settings.model,
            "attempt": attempts,
            "directory": str(evidence),
            "status": "pending",
            "error": None,
        }
        report["directories"].append(entry)
        running = [task in pending for task in tasks]
        usage, failures = _pass_reports(contexts, outcomes, running, settings, attempts)
        report["session_failures"] += failures
        note = _release_evidence(evidence, pending, entry, report)
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
            return _Outcome(score, label, passes, None, tuple(cleanup_notes), tuple(usage))
        failure = _failure(errors, attempts, settings.model)
        if failure.retryable and attempts <= options.max_retries:
            delay = options.backoff_base * (2 ** (attempts - 1)) * (1 + random.random() * 0.25)
            await sleep(delay)
            continue
        return _Outcome(None, None, (), failure, tuple(cleanup_notes), tuple(usage))


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
    report: dict[str, Any] = {"status": "removed", "directories": [], "session_failures": []}
    outcomes = await asyncio.gather(
        *(_judge_member(pair, judge, options, m, sleep, report) for m in members)
    )
    cleanup = tuple(note for o in outcomes for note in o.cleanup)
    passes = tuple(p for o in outcomes for p in o.passes)
    metadata = {
        "evidence_usage": [dict(u) for o in outcomes for u in o.usage],
        "judge_cleanup": report,
    }
    failed = next((o.failure for o in outcomes if o.failure is not None), None)
    if failed is not None:
        return PairResult(pair, None, None, (), failed, cleanup, metadata=metadata)
    if len(members) == 1:
        first = outcomes[0]
        return PairResult(pair, first.score, first.label, passes, None, cleanup, metadata=metadata)
    scores = sorted(o.score for o in outcomes if o.score is not None)
    middle = len(scores) // 2
    score = scores[middle] if len(scores) % 2 else (scores[middle - 1] + scores[middle]) / 2
    votes = tuple((m.model, o.score or 0.0) for m, o in zip(members, outcomes, strict=True))
    return PairResult(
        pair, score, score_label(score), passes, None, cleanup, votes, metadata=metadata
    )


def _remove(folder: Path) -> str | None:
    try:
        shutil.rmtree(folder)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return str(exc)
    return None


def _cleanup_when_settled(
    pending: list[asyncio.Future[Any]],
    folder: Path,
    entry: dict[str, Any],
    report: dict[str, Any],
) -> None:
    """Remove ``folder`` once every pass in ``pending`` has settled, and record in
    ``entry`` (and the status of ``report``) whether that worked."""
    remaining = {"n": len(pending)}

    def settled(future: asyncio.Future[Any]) -> None:
        if not future.cancelled():
            future.exception()  # consume, so asyncio does not warn
        remaining["n"] -= 1
        if remaining["n"] == 0:
            error = _remove(folder)
            entry["status"], entry["error"] = ("failed", error) if error else ("removed", None)
            _restatus(report)

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
