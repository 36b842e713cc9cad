"""The comparison engine: pairing, position swap, retries, failures, cleanup, records."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.compare.records import record
from vally.contracts.protocols import JudgeSettings, PairwiseContext, PairwiseVerdict
from vally.errors import ConfigError, GradingError, LLMError
from vally_compare import judged as compare, judged_pairs as judging, judged_record


class ScriptedJudge:
    """Decides from the evidence it reads; can fail on chosen attempts."""

    def __init__(self, decide: Any, failures: list[BaseException] | None = None) -> None:
        self.decide = decide
        self.failures = list(failures or [])
        self.contexts: list[PairwiseContext] = []
        self.dirs: set[Path] = set()

    async def judge_pair(self, context: PairwiseContext) -> PairwiseVerdict:
        self.contexts.append(context)
        self.dirs.add(context.evidence_dir)
        if self.failures:
            raise self.failures.pop(0)
        a = (context.evidence_dir / context.a / "output.md").read_text()
        b = (context.evidence_dir / context.b / "output.md").read_text()
        return self.decide(a, b)


def longer_wins(a: str, b: str) -> PairwiseVerdict:
    if len(a) == len(b):
        return PairwiseVerdict("tie", None)
    return PairwiseVerdict("A" if len(a) > len(b) else "B", "much")


def options(**kw: Any) -> judging.CompareOptions:
    return judging.CompareOptions(JudgeSettings(model="judge-1"), None, backoff_base=0.0, **kw)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_pairing_and_unmatched() -> None:
    base = [record("a"), record("b"), record("c", 1)]
    treat = [record("a"), record("b"), record("d")]
    pairing = compare.pair_records(base, treat)
    assert [p.key for p in pairing.pairs] == [("ev", "a", 0), ("ev", "b", 0)]
    assert pairing.only_baseline == [("ev", "c", 1)]
    assert pairing.only_treatment == [("ev", "d", 0)]
    with pytest.raises(ConfigError, match="two trials"):
        compare.pair_records([record("a", model="x"), record("a", model="y")], treat)


def test_swapped_passes_score_treatment_side_and_clean_up() -> None:
    base = [record("a", output="short"), record("b", output="long answer")]
    treat = [record("a", output="much longer answer"), record("b", output="x")]
    judge = ScriptedJudge(longer_wins)
    result = run(judging.compare_runs("base", base, "treat", treat, judge, options()))
    scores = {r.pair.key[1]: r.score for r in result.results}
    assert scores == {"a": 1.0, "b": -1.0}
    assert [(c.a, c.b) for c in judge.contexts[:2]] == [("run-1", "run-2"), ("run-2", "run-1")]
    assert all(not d.exists() for d in judge.dirs)
    assert result.status == "complete"
    assert (result.win_rate.wins, result.win_rate.losses) == (1, 1)


def test_position_biased_judge_gives_all_ties() -> None:
    base = [record(s, output="same") for s in "abc"]
    treat = [record(s, output="other") for s in "abc"]
    judge = ScriptedJudge(lambda a, b: PairwiseVerdict("A", "much"))
    result = run(judging.compare_runs("b", base, "t", treat, judge, options()))
    assert [r.score for r in result.results] == [0.0, 0.0, 0.0]
    assert result.win_rate.ties == 3
    assert result.score.mean == 0.0 and not result.significant_regression


def test_magnitude_is_much_only_when_both_passes_say_much() -> None:
    first = PairwiseVerdict("B", "much")
    second = PairwiseVerdict("A", "slightly")
    assert judging.combine(first, second) == (0.4, "slightly better")
    assert judging.combine(PairwiseVerdict("A", "much"), PairwiseVerdict("B", "much")) == (
        -1.0,
        "much worse",
    )
    assert judging.combine(PairwiseVerdict("tie", None), PairwiseVerdict("tie", None))[0] == 0.0


def test_retry_recovered_pair_is_byte_identical() -> None:
    base = [record("a", output="s"), record("b", output="s")]
    treat = [record("a", output="longer"), record("b", output="longer")]
    clean = run(judging.compare_runs("b", base, "t", treat, ScriptedJudge(longer_wins), options()))
    flaky_judge = ScriptedJudge(
        longer_wins,
        [LLMError("rate limited", retryable=True, error_class="rate_limit", status=429)],
    )
    flaky = run(judging.compare_runs("b", base, "t", treat, flaky_judge, options(judge_workers=1)))
    assert json.dumps(judged_record.to_record(clean)) == json.dumps(judged_record.to_record(flaky))
    assert len(flaky_judge.dirs) == 3  # the retry got a new evidence directory


def test_terminal_failure_is_not_retried_and_reported() -> None:
    base = [record("a"), record("b")]
    treat = [record("a", output="longer one"), record("b", output="longer one")]
    judge = ScriptedJudge(
        longer_wins,
        [
            LLMError(
                'Model "gpt-9" is not available',
                retryable=False,
                error_class="model_unavailable",
                status=404,
                model="gpt-9",
            ),
            LLMError("timed out", retryable=True, error_class="timeout"),
        ],
    )
    result = run(judging.compare_runs("b", base, "t", treat, judge, options(judge_workers=1)))
    assert result.status == "partial"
    failed = result.failed[0]
    assert failed.failure is not None
    assert failed.failure.attempts == 1 and failed.failure.retryable is False
    assert failed.failure.other_messages == ["timed out"]
    assert result.win_rate.total == 1
    rec = judged_record.to_record(result)
    errored = next(t for t in rec["trials"] if t["errored"])
    assert errored["failure"]["errorClass"] == "model_unavailable"
    assert errored["failure"]["otherMessages"] == ["timed out"]
    assert compare.exit_code([result], fail_on_regression=False) == 1


def test_retries_exhausted_counts_attempts() -> None:
    errors: list[BaseException] = [
        LLMError("slow", retryable=True, error_class="timeout") for _ in range(6)
    ]
    judge = ScriptedJudge(longer_wins, errors)
    result = run(judging.compare_runs("b", [record("a")], "t", [record("a")], judge, options()))
    assert result.status == "no-signal"
    failure = result.failed[0].failure
    assert failure is not None and failure.attempts == 3 and failure.retryable
    assert compare.exit_code([result], fail_on_regression=False) == 1


def test_unparseable_judge_error_is_terminal_unless_marked() -> None:
    judge = ScriptedJudge(longer_wins, [GradingError("judge answer was not JSON")] * 2)
    result = run(judging.compare_runs("b", [record("a")], "t", [record("a")], judge, options()))
    failure = result.failed[0].failure
    assert failure is not None and failure.attempts == 1
    assert failure.error_class == "judge_error"


def test_pending_judge_keeps_evidence_until_it_settles(tmp_path: Path) -> None:
    release = asyncio.Event()

    class SlowJudge:
        async def judge_pair(self, context: PairwiseContext) -> PairwiseVerdict:
            if context.a == "run-2":
                await release.wait()
            return PairwiseVerdict("tie", None)

    async def scenario() -> tuple[compare.PairResult, list[Path]]:
        opts = options(pass_timeout=0.05, max_retries=0, temp_root=tmp_path)
        pair = compare.pair_records([record("a")], [record("a")]).pairs[0]
        result = await judging.judge_pair(pair, SlowJudge(), opts)
        kept = list(tmp_path.iterdir())
        release.set()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return result, kept

    result, kept = run(scenario())
    assert result.failure is not None and result.failure.error_class == "timeout"
    assert any(judging.CLEANUP_PENDING in note for note in result.cleanup)
    assert len(kept) == 1
    assert list(tmp_path.iterdir()) == []


def test_fail_on_regression_gate() -> None:
    base = [record(s, output="a much longer answer") for s in "abcdef"]
    treat = [record(s, output="x") for s in "abcdef"]
    result = run(judging.compare_runs("b", base, "t", treat, ScriptedJudge(longer_wins), options()))
    assert result.significant_regression and result.decision == "worse"
    assert result.score.p_value == pytest.approx(2 / 64)
    assert compare.exit_code([result], fail_on_regression=False) == 0
    assert compare.exit_code([result], fail_on_regression=True) == 1
    three = run(
        judging.compare_runs("b", base[:3], "t", treat[:3], ScriptedJudge(longer_wins), options())
    )
    assert three.score.mean == -1.0 and not three.significant_regression
    assert three.decision == "no detectable difference"
    assert any("only 3 stimuli" in w for w in compare.caveats(three))
    assert compare.exit_code([three], fail_on_regression=True) == 0


def test_holm_across_treatments_holds_back_a_borderline_gate() -> None:
    base = [record(s, output="a much longer answer") for s in "abcdef"]
    treat = [record(s, output="x") for s in "abcdef"]
    judge = ScriptedJudge(longer_wins)
    worse = run(judging.compare_runs("b", base, "t1", treat, judge, options()))
    same = run(judging.compare_runs("b", base, "t2", base, judge, options()))
    alone = compare.adjust([worse])
    assert alone[0].significant_regression
    family = compare.adjust([worse, worse, same])
    # p = 1/32 twice and 1.0: Holm gives 3/32 and 3/32 (> 0.05), so no gate fires.
    assert family[0].score.p_adjusted == pytest.approx(3 / 32)
    assert not family[0].significant_regression
    assert compare.exit_code(family, fail_on_regression=True) == 0
    written = judged_record.to_record(family[0])
    assert written["meanScore"]["pValueAdjusted"] == pytest.approx(3 / 32)


def test_mcnemar_and_deltas_from_grades() -> None:
    base = [record(s, passed=True, tokens=100) for s in "abcd"]
    treat = [record(s, passed=s in "a", tokens=150) for s in "abcd"]
    result = run(judging.compare_runs("b", base, "t", treat, ScriptedJudge(longer_wins), options()))
    assert result.mcnemar is not None
    assert (result.mcnemar.b, result.mcnemar.c) == (3, 0)
    tokens = next(d for d in result.deltas if d.metric == "tokens")
    assert tokens.delta.mean == pytest.approx(50.0)
    assert tokens.delta.n_stimuli == 4


def test_no_pairs_is_no_signal() -> None:
    result = run(
        judging.compare_runs(
            "b", [record("a")], "t", [record("z")], ScriptedJudge(longer_wins), options()
        )
    )
    assert result.status == "no-signal"
    assert compare.exit_code([result], fail_on_regression=False) == 1


def test_a_pair_repr_names_its_key_not_its_records() -> None:
    # asyncio formats the finished main task's result (every pair) when asyncio.run ends.
    pair = compare.pair_records([record("a", output="x" * 500)], [record("a")]).pairs[0]
    assert repr(pair) == "Pair(key=('ev', 'a', 0))"
