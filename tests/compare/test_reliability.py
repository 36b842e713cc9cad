"""Judge reliability and the figures' edge cases: order agreement against chance, panels,
self-consistency, planning, missing metrics and errored grades."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.compare.records import record
from tests.compare.test_cli import compare_pair, is_preflight, write
from tests.compare.test_engine import ScriptedJudge, longer_wins, options
from tests.llm.chat_server import ChatServer, completion
from vally.contracts.protocols import JudgeSettings, PairwiseContext, PairwiseVerdict
from vally.models import GradeResult
from vally_compare import judged as compare, judged_pairs as judging, judged_record
from vally_compare.judged_text import comparison_lines
from vally_compare.plan import plan, plan_lines

NAMES = "abcdefgh"


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def _pairs(n: int = 8) -> tuple[list[Any], list[Any]]:
    base = [record(s, output="short") for s in NAMES[:n]]
    treat = [record(s, output="a longer answer") for s in NAMES[:n]]
    return base, treat


def test_a_judge_that_always_answers_a_is_flagged() -> None:
    base, treat = _pairs()
    always_a = ScriptedJudge(lambda a, b: PairwiseVerdict("A", "much"))
    result = _run(judging.compare_runs("b", base, "t", treat, always_a, options()))
    agreement = result.overall_agreement
    assert agreement.rate == 0.0 and agreement.no_better_than_chance
    assert result.score.mean == 0.0 and result.decision == "no detectable difference"
    notes = compare.caveats(result)
    assert any("agreed on 0% of pairs" in n and "answered A in 100%" in n for n in notes)
    text = "\n".join(comparison_lines(result, verbose=False))
    assert "Judge order agreement: 0% of 8 pairs" in text
    assert "8 of the ties are pairs whose two orders disagreed" in text
    reliability = judged_record.to_record(result)["judging"]
    assert reliability["orderAgreement"]["noBetterThanChance"] is True
    assert reliability["orderAgreementByModel"]["judge-1"]["positionAShare"] == 1.0


def test_a_judge_that_reads_the_content_is_not_flagged() -> None:
    base, treat = _pairs()
    result = _run(
        judging.compare_runs("b", base, "t", treat, ScriptedJudge(longer_wins), options())
    )
    assert result.overall_agreement.rate == 1.0
    assert result.overall_agreement.kappa == pytest.approx(1.0)
    assert compare.caveats(result) == []
    assert result.decision == "better" and result.score.p_value == pytest.approx(2 / 256)
    text = "\n".join(comparison_lines(result, verbose=False))
    assert "Verdict: better; sign-flip test (exact) p = 0.008" in text


class PanelJudge:
    """Judges by model: m1 and m2 read the content, m3 always answers A."""

    async def judge_pair(self, context: PairwiseContext) -> PairwiseVerdict:
        if context.judge.model == "m3":
            return PairwiseVerdict("A", "much")
        a = (context.evidence_dir / context.a / "output.md").read_text()
        b = (context.evidence_dir / context.b / "output.md").read_text()
        return longer_wins(a, b)


def test_panel_takes_the_majority_and_reports_alpha() -> None:
    base, treat = _pairs()
    panel = tuple(JudgeSettings(model=m) for m in ("m1", "m2", "m3"))
    result = _run(judging.compare_runs("b", base, "t", treat, PanelJudge(), options(panel=panel)))
    assert result.judge_model == "m1,m2,m3"
    assert all(r.score == 1.0 and r.verdict == "much better" for r in result.judged)
    assert result.judged[0].votes == (("m1", 1.0), ("m2", 1.0), ("m3", 0.0))
    assert set(result.agreement) == {"m1", "m2", "m3"}
    assert result.agreement["m3"].no_better_than_chance
    assert not result.agreement["m1"].no_better_than_chance
    # every pair's votes are (1, 1, 0): the members disagree on every pair
    assert result.panel_alpha is not None and result.panel_alpha < 0.4
    record_json = judged_record.to_record(result)
    assert record_json["trials"][0]["votes"][2] == {"judgeModel": "m3", "score": 0.0}
    assert {p["judgeModel"] for p in record_json["trials"][0]["passes"]} == {"m1", "m2", "m3"}
    assert any("m3" in n for n in compare.caveats(result))
    assert judging.score_label(0.7) == "slightly better"
    assert judging.score_label(-1.0) == "much worse"


def test_rejudging_measures_self_consistency() -> None:
    base, treat = _pairs()
    judge = ScriptedJudge(longer_wins)
    result = _run(judging.compare_runs("b", base, "t", treat, judge, options(rejudge=3)))
    assert result.consistency is not None
    assert (result.consistency.pairs, result.consistency.same) == (3, 3)
    assert len(judge.contexts) == 2 * (8 + 3)
    text = "\n".join(comparison_lines(result, verbose=False))
    assert "Self-consistency: same verdict on 3 of 3 re-judged pairs" in text


def test_plan_from_the_comparison() -> None:
    base = [record(s, trial=t, output="x" * (1 + (hash(s) + t) % 3)) for s in NAMES for t in (0, 1)]
    treat = [record(s, trial=t, output="xx") for s in NAMES for t in (0, 1)]
    result = _run(
        judging.compare_runs("b", base, "t", treat, ScriptedJudge(longer_wins), options())
    )
    rows = plan(result, 0.2)
    assert [runs for runs, _ in rows] == [1, 2, 3, 5]
    needed = [n for _, n in rows]
    assert all(n is not None for n in needed)
    assert needed == sorted(needed, reverse=True)  # more runs, fewer stimuli
    lines = plan_lines(result, 0.2)
    assert lines[0].startswith("Plan to detect ±0.20 with 80% power")
    single = _run(
        judging.compare_runs("b", base[:1], "t", treat[:1], ScriptedJudge(longer_wins), options())
    )
    assert plan(single, 0.2) == [] and "at least 2 judged stimuli" in plan_lines(single, 0.2)[0]


def test_metrics_of_errored_trials_and_errored_grades_are_left_out() -> None:
    base = [record(s, tokens=100) for s in NAMES[:6]]
    treat = [record(s, tokens=100) for s in NAMES[:6]]
    treat[0] = treat[0].model_copy(update={"trajectory": None, "status": "error"})
    errored_grade = GradeResult(
        passed=False, score=0.0, threshold=None, mode="binary", has_graders=True, errored=True
    )
    treat[1] = treat[1].model_copy(update={"grade_result": errored_grade})
    base[2] = base[2].model_copy(
        update={"grade_result": base[2].grade_result.model_copy(update={"passed": False})}
    )  # type: ignore[union-attr]
    result = _run(
        judging.compare_runs("b", base, "t", treat, ScriptedJudge(longer_wins), options())
    )
    tokens = next(d for d in result.deltas if d.metric == "tokens")
    assert tokens.missing == 1 and tokens.delta.mean == 0.0  # not -100 from a missing trial
    mc = result.mcnemar
    assert mc is not None
    # the errored trial and the errored grade are left out, not read as fails
    assert mc.n_errored == 2 and (mc.b, mc.c) == (0, 1)
    text = "\n".join(comparison_lines(result, verbose=False))
    assert "2 pairs left out for an errored trial or grade" in text
    assert "with 1 discordant stimuli p cannot fall below 0.05 (needs 6)" in text
    assert "(1 pairs without metrics left out)" in text
    rec = judged_record.to_record(result)
    assert rec["mcnemar"]["erroredLeftOut"] == 2 and rec["mcnemar"]["minPValue"] == 1.0
    assert rec["metricDeltas"][0]["missingPairs"] == 1


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with ChatServer() as server:
        yield server


def test_cli_panel_judges_with_every_model(chat: ChatServer, tmp_path: Path) -> None:
    def respond(request: Any) -> Any:
        if is_preflight(request):
            return completion("OK")
        content = request.messages[1]["content"]
        treatment_is_a = "Response A: run-2" in content
        winner = "A" if treatment_is_a or request.model == "biased" else "B"
        return completion(json.dumps({"winner": winner, "magnitude": "much", "reasoning": "r"}))

    chat.default = respond
    names = "abcdef"
    base = write(tmp_path / "base.jsonl", [record(s) for s in names])
    treat = write(tmp_path / "treat.jsonl", [record(s) for s in names])
    out = tmp_path / "cmp.jsonl"
    proc = compare_pair(
        chat,
        base,
        treat,
        "--judge-model",
        "good,biased,good2",
        "--output",
        str(out),
        "--plan",
        "0.3",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    models = {r.model for r in chat.requests}
    assert models == {"good", "biased", "good2"}
    assert "Judge order agreement (biased): 0% of 6 pairs" in proc.stdout
    assert "Panel agreement: Krippendorff's alpha" in proc.stdout
    assert "Plan to detect ±0.30" in proc.stdout
    rec = json.loads(out.read_text())
    assert rec["judgeModel"] == "good,biased,good2" and rec["decision"] == "better"
    bad = compare_pair(chat, base, treat, "--judge-model", "a,,b", cwd=tmp_path)
    assert bad.returncode != 0 and "distinct, non-empty models" in bad.stderr
    plan_bad = compare_pair(chat, base, treat, "--judge-model", "a", "--plan", "3", cwd=tmp_path)
    assert plan_bad.returncode != 0 and "--plan must be" in plan_bad.stderr


def test_mcnemar_counts_pairs_left_out_for_an_errored_agent() -> None:
    """A trial whose agent errored has no grade at all (``grade_result`` None): its pair is
    left out of McNemar for an error like one with an errored grade, on either side."""
    base = [record(s) for s in NAMES[:6]]
    treat = [record(s, passed=False) for s in NAMES[:6]]
    agent_error = {"trajectory": None, "status": "error", "grade_result": None}
    treat[0] = treat[0].model_copy(update=agent_error)
    base[1] = base[1].model_copy(update=agent_error)
    errored_grade = GradeResult(
        passed=False, score=0.0, threshold=None, mode="binary", has_graders=True, errored=True
    )
    base[2] = base[2].model_copy(update={"grade_result": errored_grade})
    result = _run(
        judging.compare_runs("b", base, "t", treat, ScriptedJudge(longer_wins), options())
    )
    mc = result.mcnemar
    assert mc is not None
    assert mc.n_errored == 3 and mc.n_units == 3 and (mc.b, mc.c) == (3, 0)
    assert judged_record.to_record(result)["mcnemar"]["erroredLeftOut"] == 3
    text = "\n".join(comparison_lines(result, verbose=False))
    assert "3 pairs left out for an errored trial or grade" in text


def test_mcnemar_of_a_run_whose_every_treatment_trial_errored() -> None:
    """Every treatment agent errored: McNemar is still shown, with every pair left out."""
    base = [record(s) for s in NAMES[:3]]
    treat = [
        record(s).model_copy(update={"trajectory": None, "status": "error", "grade_result": None})
        for s in NAMES[:3]
    ]
    result = _run(
        judging.compare_runs("b", base, "t", treat, ScriptedJudge(longer_wins), options())
    )
    mc = result.mcnemar
    assert mc is not None and mc.n_errored == 3 and mc.n_units == 0


def test_mcnemar_is_absent_for_ungraded_runs() -> None:
    """Trials without grades that did not error (graders skipped) leave McNemar out."""
    base = [record(s, passed=None) for s in NAMES[:3]]
    treat = [record(s, passed=None) for s in NAMES[:3]]
    result = _run(
        judging.compare_runs("b", base, "t", treat, ScriptedJudge(longer_wins), options())
    )
    assert result.mcnemar is None
