"""Every ``vally compare --output`` record carries every field, in every case: a judged
pair and a failed one, a complete comparison and one that errored, with grades or none."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.compare.records import record
from tests.compare.test_engine import ScriptedJudge, longer_wins, options
from vally.errors import LLMError
from vally_compare import judged as compare, judged_pairs as judging, judged_record
from vally_compare.output import write_output

FAILURE_KEYS = {"errorClass", "retryable", "attempts", "message", "model", "otherMessages"}


def _partial() -> compare.ComparisonResult:
    base = [record("a"), record("b")]
    treat = [record("a", output="a longer one"), record("b", output="a longer one")]
    failing = LLMError("bad request", error_class="bad_request", retryable=False)
    judge = ScriptedJudge(longer_wins, failures=[failing])
    return asyncio.run(
        judging.compare_runs("base", base, "treat", treat, judge, options(judge_workers=1))
    )


def test_a_failed_pair_with_one_message_has_every_failure_field() -> None:
    rec = judged_record.to_record(_partial())
    failed = next(t for t in rec["trials"] if t["errored"])
    judged = next(t for t in rec["trials"] if not t["errored"])
    assert set(failed["failure"]) == FAILURE_KEYS
    assert failed["failure"]["otherMessages"] == []
    assert set(failed) == set(judged)
    assert judged["failure"] is None


def test_an_errored_comparison_has_the_fields_of_a_complete_one(tmp_path: Path) -> None:
    errored = compare.summarize(
        "base", "broken", compare.Pairing([], [], []), [], None, error="boom"
    )
    complete = _partial()
    out = tmp_path / "cmp.jsonl"
    write_output(out, [complete, errored], {"treat": {"type": "graded-comparison"}})
    first, second = (json.loads(line) for line in out.read_text().splitlines())
    assert list(first) == list(second)  # the same fields, in the same order
    for name in ("winRate", "meanScore", "judging", "unmatched"):
        assert list(first[name]) == list(second[name]), name
    assert [list(d) for d in first["metricDeltas"]] == [list(d) for d in second["metricDeltas"]]
    assert second["graded"] is None and second["mcnemar"] is None
    assert second["error"] == "boom" and second["trials"] == []
