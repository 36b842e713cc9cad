"""The report's and the console's counters count a trial from its facts
(``vally.TrialFacts``) as from its whole record: the facts read from a results line are
those of the validated record, and every built-in counter fed facts reaches the state it
reaches fed records, for passed, failed, errored, cancelled and ungraded trials of several
variants and models, with graders, metrics, usage and cost. ``CounterFeed`` hands facts to
counters that take them and whole records, validated once, only to the others."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any, Literal

import pytest

from tests.reporters.reporter_helpers import make_record
from vally import FactCounter, RecordCounter, TrialFacts
from vally.engine.records.trial_facts import _checked_facts, _plain_facts, facts_from_json
from vally.models.cost import Cost
from vally.models.records import GraderResult, TrialError, TrialResultRecord
from vally.models.usage import JudgeCacheCounts, TokenTotals, Usage
from vally_builtin.reporters import facts_outcome, trial_outcome
from vally_builtin.reporters.aggregate import ReportAggregate, failure_reason
from vally_builtin.reporters.cost import CostTotals
from vally_builtin.reporters.experiment import VariantCounter
from vally_builtin.reporters.experiment_aggregate import problem_lines
from vally_builtin.reporters.experiment_report import experiment_aggregate
from vally_experiment.seal import CounterFeed

VARIANTS = ("base", "new", "")
MODELS = (None, "m1", "m2")


def _grader(
    name: str, *, passed: bool, status: Literal["success", "error"] = "success", evidence: str = ""
) -> GraderResult:
    said = "ok" if passed else "expected PASS\nnot found"
    return GraderResult(
        name=name,
        type="output-contains" if name != "judge" else "prompt",
        passed=passed,
        score=1.0 if passed else 0.25,
        evidence=evidence or f"{name}: {said}",
        status=status,
    )


def _one(index: int) -> TrialResultRecord:
    """A record of one of every kind of trial, picked by ``index``."""
    kind = index % 8
    variant, model = VARIANTS[index % 3], MODELS[(index // 3) % 3]
    record = make_record(
        f"s{index % 5}",
        eval_name=("one", "two")[index % 2],
        trial=index // 10,
        passed=kind != 1,
        model=model,
        variant=variant or None,
        error=TrialError(phase="execute", code="VALLY_TIMEOUT", message=f"timed out {index}")
        if kind == 2
        else None,
    )
    grade = record.grade_result
    update: dict[str, Any] = {}
    if kind == 3 and grade is not None:  # a grader errored: no operational error
        details = [*grade.details, _grader("judge", passed=False, status="error")]
        update["grade_result"] = grade.model_copy(update={"errored": True, "details": details})
    elif kind == 4:
        update.update(status="cancelled", grade_result=None, trajectory=None)
    elif kind == 5 and grade is not None:  # ungraded: no graders, no constraints
        update["grade_result"] = grade.model_copy(
            update={"has_graders": False, "details": [], "mode": "no-graders"}
        )
    elif kind == 6 and grade is not None:  # failed by its constraints, one grader failed too
        update["grade_result"] = grade.model_copy(
            update={
                "passed": False,
                "constraint_violations": ["max_turns exceeded", "no tool 'rm'"],
                "details": [*grade.details, _grader("judge", passed=False, evidence="")],
            }
        )
    elif kind == 7 and grade is not None:  # passed, though one grader failed
        update["grade_result"] = grade.model_copy(
            update={"details": [*grade.details, _grader("style", passed=False)]}
        )
    if index % 4 == 0:
        update["usage"] = Usage(
            agent=TokenTotals(calls=2, input_tokens=30 + index, output_tokens=7, total_tokens=40),
            judge=TokenTotals(calls=1, input_tokens=5, output_tokens=1, total_tokens=6),
            judge_cache=JudgeCacheCounts(hits=index % 3, misses=1),
        )
    if index % 3 == 0:
        priced = index % 6 == 0
        update["cost"] = Cost(
            agent_usd=0.001 * index if priced else None,
            judge_usd=0.0005,
            total_usd=0.001 * index + 0.0005 if priced else None,
            agent_source="reported" if priced else None,
            unpriced_trials=0 if priced else 1,
        )
    return record.model_copy(update=update)


def mixed_kinds(count: int = 120, seed: int = 5) -> list[TrialResultRecord]:
    """``count`` records of every kind of trial, in an order that mixes them."""
    records = [_one(i) for i in range(count)]
    random.Random(seed).shuffle(records)
    return records


def _from_line(record: TrialResultRecord) -> TrialFacts:
    return facts_from_json(json.loads(record.to_json_line()))


def test_every_kind_of_trial_is_there() -> None:
    outcomes = {trial_outcome(record) for record in mixed_kinds()}
    assert outcomes == {"passed", "failed", "errored", "cancelled", "ungraded"}


def test_facts_of_a_line_are_those_of_its_record_and_classify_it_alike() -> None:
    for record in mixed_kinds():
        facts = _from_line(record)
        assert facts == TrialFacts.of_record(record)
        assert facts_outcome(facts) == trial_outcome(record)
        assert failure_reason(record) == failure_reason(record, trial_outcome(record))
        assert problem_lines(facts) == problem_lines(record)
    failing = [f for f in map(_from_line, mixed_kinds()) if f.failed_graders]
    assert failing and all(isinstance(g, GraderResult) for f in failing for g in f.failed_graders)


def test_the_quick_and_the_checked_reading_of_a_line_agree() -> None:
    for record in mixed_kinds():
        data = json.loads(record.to_json_line())
        quick = _plain_facts(data)
        assert quick is not None and quick == _checked_facts(data)
        assert quick._asdict() == _checked_facts(data)._asdict()


def test_facts_are_frozen() -> None:
    facts = _from_line(mixed_kinds()[0])
    with pytest.raises(AttributeError):
        facts.status = "error"  # type: ignore[misc]
    assert facts._replace(status="error").status == "error" and facts.status != "error"


def _plan(records: list[TrialResultRecord]) -> dict[str, Any]:
    keys = sorted({TrialFacts.of_record(r).key_id for r in records})
    return {"variants": ["base", "new"], "baseline": "base", "trials": keys}


COUNTERS: dict[str, Callable[[list[TrialResultRecord]], Any]] = {
    "console rows": lambda _records: ReportAggregate(keep_failures=False),
    "report rows": lambda _records: ReportAggregate(keep_failures=True),
    "experiment report": lambda records: experiment_aggregate(_plan(records)),
    "cost": lambda _records: CostTotals(),
    "variant": lambda _records: VariantCounter(),
}


@pytest.mark.parametrize("name", sorted(COUNTERS))
def test_counters_fed_facts_reach_the_state_of_those_fed_records(name: str) -> None:
    records = mixed_kinds()
    by_record, by_facts = COUNTERS[name](records), COUNTERS[name](records)
    asked = 0
    for record in records:
        by_record.add(record)
        if by_facts.add_facts(_from_line(record)) is False:  # it keeps this one whole
            asked += 1
            by_facts.add(record)
    assert json.dumps(by_facts.state()) == json.dumps(by_record.state())
    assert by_facts.state() != COUNTERS[name](records).state()  # it counted something
    kept = name == "report rows"
    assert (asked > 0) == kept  # only a counter keeping failed trials asks for records


def test_built_in_counters_take_facts() -> None:
    records = mixed_kinds(8)
    for name, make in COUNTERS.items():
        if name in ("console rows", "report rows", "experiment report"):
            assert isinstance(make(records), FactCounter)


class _Records:
    """A third party's counter: only ``add``, so it is handed whole records."""

    def __init__(self) -> None:
        self.seen: list[TrialResultRecord] = []

    def add(self, record: TrialResultRecord) -> None:
        self.seen.append(record)

    def state(self) -> Any:
        return len(self.seen)


class _Facts(_Records):
    """A counter that takes facts, asking for the whole record of failed trials."""

    def __init__(self) -> None:
        super().__init__()
        self.facts = 0

    def add_facts(self, facts: TrialFacts) -> bool:
        if facts.failed_graders:
            return False
        self.facts += 1
        return True


def _feed(records: list[TrialResultRecord], counters: dict[str, RecordCounter]) -> CounterFeed:
    feed = CounterFeed(counters)
    for record in records:
        line = record.to_json_line()
        feed.add(line, facts_from_json(json.loads(line)))
    return feed


def test_the_feed_validates_a_record_only_for_a_counter_that_needs_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    records = mixed_kinds(40)
    validated = 0
    validate = TrialResultRecord.model_validate_json

    def counting(line: str | bytes) -> TrialResultRecord:
        nonlocal validated
        validated += 1
        return validate(line)

    monkeypatch.setattr(TrialResultRecord, "model_validate_json", counting)
    console = ReportAggregate(keep_failures=False)
    _feed(records, {"console": console, "report": experiment_aggregate(_plan(records))})
    assert validated == 0 and console.trials == len(records)

    facts, plain = _Facts(), _Records()
    feed = _feed(records, {"facts": facts, "records": plain})
    assert validated == len(records)  # once a line, though both counters asked
    assert [r.trial_id for r in plain.seen] == [r.trial_id for r in records]
    failing = [r for r in records if TrialFacts.of_record(r).failed_graders]
    assert failing and [r.trial_id for r in facts.seen] == [r.trial_id for r in failing]
    assert facts.facts + len(facts.seen) == len(records)
    assert feed.states() == {"facts": len(failing), "records": len(records)}


def test_a_counter_that_fails_is_left_out_and_the_others_go_on() -> None:
    class Broken(_Facts):
        def add_facts(self, facts: TrialFacts) -> bool:
            raise RuntimeError("broken")

    records = mixed_kinds(10)
    console = ReportAggregate(keep_failures=False)
    feed = _feed(records, {"broken": Broken(), "console": console, "records": _Records()})
    assert sorted(feed.states()) == ["console", "records"] and console.trials == 10


def test_a_line_that_is_no_record_drops_the_counters_that_needed_it() -> None:
    records = mixed_kinds(3)
    feed = CounterFeed({"records": _Records(), "console": ReportAggregate(keep_failures=False)})
    feed.add(records[0].to_json_line(), TrialFacts.of_record(records[0]))
    feed.add('{"type": "trial-result"}', TrialFacts.of_record(records[1]))
    assert feed.states() == {}  # as before: the reporters then read the records themselves
