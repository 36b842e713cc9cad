"""Comparing two results files pair by pair, in memory that does not grow with the pairs.

:func:`compare_indexed` judges the pairs of a :class:`vally_compare.pair_index.PairIndex`
with ``judge_workers`` workers, each reading one pair's two records, judging it, adding
its outcome to a :class:`vally_compare.judged_tally.PairTally` and handing its ``trials``
entry to a :class:`TrialWriter`, then dropping it. Its figures are those of
:func:`vally_compare.judged_pairs.compare_runs` over the same records.
"""

from __future__ import annotations

import asyncio
import json
import random
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from vally import PairwiseJudge, bypass_cache
from vally_compare import judged as compare, judged_pairs as judging
from vally_compare.judged_record import trial_json
from vally_compare.pair_index import PairIndex
from vally_compare.statistics.agreement import SelfConsistency, self_consistency


class TrialWriter:
    """Writes the ``trials`` entries of one ``--output`` record to a file as pairs finish,
    in key order (an entry finished early waits for the ones before it)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle: IO[str] = path.open("w", encoding="utf-8")
        self._next = 0
        self._waiting: dict[int, str] = {}

    def add(self, position: int, entry: dict[str, Any]) -> None:
        """Queue the entry of the pair at ``position`` and write every ready entry."""
        self._waiting[position] = json.dumps(entry, ensure_ascii=False)
        while self._next in self._waiting:
            text = self._waiting.pop(self._next)
            self._handle.write(text if self._next == 0 else ", " + text)
            self._next += 1

    def close(self) -> None:
        """Close the file."""
        self._handle.close()


async def compare_indexed(
    baseline_name: str,
    treatment_name: str,
    index: PairIndex,
    judge: PairwiseJudge,
    options: judging.CompareOptions,
    *,
    on_pair: Callable[[compare.PairResult], None] | None = None,
    trials: TrialWriter | None = None,
    keep_results: bool = False,
) -> compare.ComparisonResult:
    """Compare one treatment with the baseline, pair by pair (see module docstring).

    The result keeps the failed pairs and those with cleanup notes (every pair with
    ``keep_results``); its counts and figures cover every pair.
    """
    tally = compare.new_tally()
    kept: list[tuple[int, compare.PairResult]] = []
    judged = (array("q"), array("d"))
    positions = iter(range(len(index)))
    limit = asyncio.Semaphore(max(1, options.judge_workers))
    with index.reader() as read:

        async def judge_at(position: int) -> compare.PairResult:
            pair = read(position)
            async with limit:
                result = await judging.judge_pair(pair, judge, options)
            if on_pair is not None:
                on_pair(result)
            return result

        async def worker() -> None:
            for position in positions:
                result = await judge_at(position)
                pair = result.pair
                tally.add(pair.key[:2], result, pair.baseline, pair.treatment)
                if trials is not None:
                    trials.add(position, trial_json(result))
                if keep_results or result.failure is not None or result.cleanup:
                    kept.append((position, result))
                if options.rejudge > 0 and result.score is not None:
                    judged[0].append(position)
                    judged[1].append(result.score)

        await asyncio.gather(*(worker() for _ in range(max(1, options.judge_workers))))
        consistency = None
        if options.rejudge > 0:
            consistency = await _rejudge(judged, options, judge_at)
    pairing = compare.Pairing([], index.only_baseline, index.only_treatment)
    model = options.judge.model
    if options.panel:
        model = ",".join(str(m.model) for m in options.panel)
    results = [result for _, result in sorted(kept, key=lambda item: item[0])]
    summary = compare.summarize_tally(
        baseline_name, treatment_name, pairing, results, tally, model, matched=len(index)
    )
    if consistency is None:
        return summary
    from dataclasses import replace

    return replace(summary, consistency=consistency)


async def _rejudge(
    judged: tuple[array[int], array[float]],
    options: judging.CompareOptions,
    judge: Callable[[int], Any],
) -> SelfConsistency:
    """Judge the seeded sample :func:`vally_compare.judged_pairs.compare_runs` takes again (the same
    positions among the judged pairs in key order) and compare the scores."""
    population = sorted(zip(judged[0], judged[1], strict=True))
    sample = random.Random(judging.REJUDGE_SEED).sample(
        population, min(options.rejudge, len(population))
    )
    with bypass_cache():  # a cached answer would agree with itself by construction
        again = await asyncio.gather(*(judge(position) for position, _ in sample))
    return self_consistency(
        [
            (score, second.score)
            for (_, score), second in zip(sample, again, strict=True)
            if second.score is not None
        ]
    )
