"""The streamed comparison (two results files, pair by pair) gives the figures and
``--output`` trials of the whole-list formulas, on a seeded data set."""

from __future__ import annotations

import asyncio
import json
import math
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.compare.records import record
from vally.contracts.protocols import JudgeSettings, PairwiseContext, PairwiseVerdict
from vally.errors import ConfigError
from vally_compare import judged as compare, judged_pairs, judged_record
from vally_compare.judged_stream import TrialWriter, compare_indexed
from vally_compare.output import splice_output as _splice_output
from vally_compare.pair_index import index_pairs
from vally_compare.statistics import estimates as stats


class SeededJudge:
    """A verdict drawn from the two outputs it reads (the same pair, the same verdict)."""

    async def judge_pair(self, context: PairwiseContext) -> PairwiseVerdict:
        a = (context.evidence_dir / context.a / "output.md").read_text()
        b = (context.evidence_dir / context.b / "output.md").read_text()
        draw = random.Random(a + "|" + b).random()
        if draw < 0.3:
            return PairwiseVerdict("tie", None)
        return PairwiseVerdict("A" if draw < 0.6 else "B", "much" if draw > 0.8 else "slightly")


def _write(path: Path, records: list[Any]) -> None:
    path.write_text("".join(r.to_json_line() + "\n" for r in records), encoding="utf-8")


def _runs(seed: int) -> tuple[list[Any], list[Any]]:
    rng = random.Random(seed)
    base, treat = [], []
    for stimulus in range(23):
        for trial in range(rng.randint(1, 4)):
            for side in (base, treat):
                side.append(
                    record(
                        f"s{stimulus:02d}",
                        trial,
                        output="x" * rng.randint(1, 60),
                        passed=rng.choice([True, False, None]),
                        tokens=rng.randint(10, 900),
                    )
                )
    base.append(record("only-base"))
    treat.append(record("only-treat", 2))
    rng.shuffle(treat)  # pairing does not depend on the order of the lines
    return base, treat


def _options() -> judged_pairs.CompareOptions:
    return judged_pairs.CompareOptions(JudgeSettings(model="judge-1"), None, backoff_base=0.0)


def test_streamed_figures_equal_the_whole_list_formulas(tmp_path: Path) -> None:
    base, treat = _runs(7)
    _write(tmp_path / "base.jsonl", base)
    _write(tmp_path / "treat.jsonl", treat)
    index = index_pairs(tmp_path / "base.jsonl", tmp_path / "treat.jsonl")
    writer = TrialWriter(tmp_path / "trials.part")
    streamed = asyncio.run(
        compare_indexed("b", "t", index, SeededJudge(), _options(), trials=writer)
    )
    writer.close()
    whole = asyncio.run(judged_pairs.compare_runs("b", base, "t", treat, SeededJudge(), _options()))

    # the old formulas, over every judged pair held in memory
    judged = [r for r in whole.results if r.score is not None]
    scores = [(r.pair.key[:2], r.score) for r in judged if r.score is not None]
    expected_score = stats.tested_mean(scores, stats.SCORE_BOUNDS)
    assert streamed.score == expected_score
    assert streamed.win_rate == replace_ci(scores)
    for delta, (name, get) in zip(streamed.deltas, compare.METRICS, strict=True):
        old = stats.metric_delta(
            name, [(r.pair.key[:2], get(r.pair.baseline), get(r.pair.treatment)) for r in judged]
        )
        assert (delta.delta.mean, delta.delta.ci, delta.delta.test) == (
            old.delta.mean,
            old.delta.ci,
            old.delta.test,
        )
        assert (delta.baseline_mean, delta.treatment_mean, delta.missing) == (
            old.baseline_mean,
            old.treatment_mean,
            old.missing,
        )
    assert streamed.n_matched == len(whole.pairing.pairs) == len(judged)
    assert streamed.results == []  # no pair is kept once judged

    # the --output record, trials included, is the one of the in-memory comparison
    record_streamed = judged_record.to_record(streamed)
    record_streamed["trials"] = json.loads("[" + writer.path.read_text() + "]")
    assert record_streamed == judged_record.to_record(whole)

    # --output splices the trials file in: the bytes of dumping the whole record
    output = tmp_path / "out.jsonl"
    _splice_output(output, [replace(streamed, trials_file=writer.path)])
    whole_line = json.dumps(judged_record.to_record(whole), ensure_ascii=False) + "\n"
    assert output.read_text(encoding="utf-8") == whole_line


def replace_ci(scores: list[tuple[Any, float]]) -> stats.WinRate:
    """The win rate as the whole-list code computed it."""
    counts = stats.win_tie_loss(s for _, s in scores)
    return stats.WinRate(counts.wins, counts.ties, counts.losses, stats.win_rate_interval(scores))


def test_a_side_with_a_repeated_key_is_refused(tmp_path: Path) -> None:
    _write(tmp_path / "base.jsonl", [record("a", model="x"), record("a", model="y")])
    _write(tmp_path / "treat.jsonl", [record("a")])
    with pytest.raises(ConfigError, match="two trials for eval 'ev', stimulus 'a', trial 0"):
        index_pairs(tmp_path / "base.jsonl", tmp_path / "treat.jsonl")


def test_a_line_nested_too_deep_is_a_clear_error_not_a_recursion_error(tmp_path: Path) -> None:
    _write(tmp_path / "base.jsonl", [record("a")])
    deep = "[" * 100_000 + "]" * 100_000
    (tmp_path / "treat.jsonl").write_text(deep + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"treat.jsonl:1: not JSON \(JSON nested deeper than"):
        index_pairs(tmp_path / "base.jsonl", tmp_path / "treat.jsonl")


def test_trial_entries_finishing_out_of_order_are_written_in_key_order(tmp_path: Path) -> None:
    writer = TrialWriter(tmp_path / "trials.part")
    for position in (2, 0, 3, 1):
        writer.add(position, {"at": position})
    writer.close()
    assert writer.path.read_text() == '{"at": 0}, {"at": 1}, {"at": 2}, {"at": 3}'


def test_the_cli_output_leaves_no_trials_file_behind(tmp_path: Path) -> None:
    from tests.compare.test_cli import compare_pair, judge, treatment_better
    from tests.llm.chat_server import ChatServer

    base, treat = _runs(3)
    _write(tmp_path / "base.jsonl", base)
    _write(tmp_path / "treat.jsonl", treat)
    out = tmp_path / "out" / "cmp.jsonl"
    with ChatServer() as server:
        server.default = judge(treatment_better)
        proc = compare_pair(
            server,
            tmp_path / "base.jsonl",
            tmp_path / "treat.jsonl",
            *("--judge-model", "j", "--judge-workers", "4", "--output", str(out)),
            cwd=tmp_path,
        )
    assert proc.returncode in (0, 1), proc.stderr
    assert [p.name for p in out.parent.iterdir()] == ["cmp.jsonl"]
    record = json.loads(out.read_text(encoding="utf-8"))
    keys = [(t["evalName"], t["stimulus"], t["trialIndex"]) for t in record["trials"]]
    assert keys == sorted(keys) and len(keys) == record["matchedPairs"] == len(base) - 1
    assert record["judgedPairs"] == len(keys)


class CountingJudge(SeededJudge):
    """A :class:`SeededJudge` that counts the times each pair of outputs is judged."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    async def judge_pair(self, context: PairwiseContext) -> PairwiseVerdict:
        a = (context.evidence_dir / context.a / "output.md").read_text()
        b = (context.evidence_dir / context.b / "output.md").read_text()
        key = "|".join(sorted((a, b)))
        self.seen[key] = self.seen.get(key, 0) + 1
        return await super().judge_pair(context)


def test_rejudging_takes_the_same_sample_as_the_whole_comparison(tmp_path: Path) -> None:
    base, treat = _runs(11)
    _write(tmp_path / "base.jsonl", base)
    _write(tmp_path / "treat.jsonl", treat)
    index = index_pairs(tmp_path / "base.jsonl", tmp_path / "treat.jsonl")
    streamed_judge, whole_judge = CountingJudge(), CountingJudge()
    options = replace(_options(), rejudge=6)
    streamed = asyncio.run(compare_indexed("b", "t", index, streamed_judge, options))
    whole = asyncio.run(judged_pairs.compare_runs("b", base, "t", treat, whole_judge, options))
    assert streamed.consistency == whole.consistency
    assert streamed.consistency is not None and streamed.consistency.pairs == 6
    assert streamed_judge.seen == whole_judge.seen  # the same six pairs judged twice


def test_an_exact_sum_is_the_fsum_of_its_values() -> None:
    from vally_compare.judged_tally import ExactSum

    rng = random.Random(5)
    cases = [[1e16, 1.0, -1e16], [0.1] * 10, [rng.uniform(-1e6, 1e6) for _ in range(5000)]]
    for values in cases:
        total = ExactSum()
        for value in values:
            total.add(value)
        assert (total.value, total.count) == (math.fsum(values), len(values))
    assert sum([1e16, 1.0, -1e16]) != math.fsum([1e16, 1.0, -1e16])  # a plain sum would not do
