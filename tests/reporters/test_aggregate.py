"""The markdown and console reporters aggregate records as trials end: at the end of a run
they render from their counters, never from a list of every record."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, overload

import pytest

from tests.reporters.reporter_helpers import Driver, make_record, make_run
from vally.contracts.events import RunOutcome
from vally.contracts.protocols import TrialKey
from vally.models.records import TrialError, TrialResultRecord
from vally_builtin.reporters import facts_outcome, group_records, stimulus_stats
from vally_builtin.reporters.aggregate import FAILURES_KEPT, ReportAggregate
from vally_builtin.reporters.console import ConsoleConfig, ConsoleReporter
from vally_builtin.reporters.markdown import MarkdownReporter, render_report


class Unread(Sequence[TrialResultRecord]):
    """The records of a run that must not be read again: only their number is known."""

    def __init__(self, count: int) -> None:
        self.count_ = count

    def __len__(self) -> int:
        return self.count_

    def __iter__(self) -> Iterator[TrialResultRecord]:
        raise AssertionError("the reporter read every record again at the end of the run")

    @overload
    def __getitem__(self, index: int) -> TrialResultRecord: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[TrialResultRecord]: ...

    def __getitem__(self, index: int | slice) -> Any:
        raise AssertionError("the reporter looked records up at the end of the run")


def _mixed() -> list[TrialResultRecord]:
    error = TrialError(phase="execute", code="VALLY_TIMEOUT", message="timed out")
    return [
        make_record("b", trial=2, passed=False),
        make_record("a", trial=0),
        make_record("b", trial=0),
        make_record("a", trial=1, passed=False),
        make_record("b", trial=1, error=error),
        make_record("a", trial=2, model=None),
    ]


def _drive(reporter: Any, run_dir: Path, records: list[TrialResultRecord]) -> None:
    """Run events for ``records``; the run-end outcome cannot be read."""
    driver = Driver(reporter)
    run = make_run(run_dir, planned=len(records))
    driver.emitter.emit("vally_run_start", run=run)
    for record in records:
        key = TrialKey("", record.eval_name, record.stimulus_name, record.model or "", 0)
        driver.emitter.emit("vally_trial_start", run=run, key=key)
        driver.emitter.emit("vally_trial_end", run=run, record=record)
    outcome = RunOutcome(records=Unread(len(records)), summaries=[])
    driver.emitter.emit("vally_run_end", run=run, outcome=outcome)
    assert not driver.emitter.failures, driver.emitter.failures[0].error


def test_row_counters_match_the_statistics_of_the_row_records() -> None:
    records = _mixed()
    aggregate = ReportAggregate.of(records)
    for key, trials in group_records(records).items():
        expected = stimulus_stats(trials)
        got = aggregate.rows[key].stats()
        assert got == type(expected)(**{**expected.__dict__, "outcomes": []})


def test_markdown_report_is_rendered_from_the_records_that_went_by(tmp_path: Path) -> None:
    records = _mixed()
    reporter = MarkdownReporter()
    _drive(reporter, tmp_path, records)
    text = (tmp_path / "report.md").read_text(encoding="utf-8")
    expected = render_report(make_run(tmp_path), records, rendered_at="x")
    strip = lambda t: [line for line in t.splitlines() if not line.startswith("_Rendered")]  # noqa: E731
    assert strip(text) == strip(expected)
    assert "| a | gpt-test, default |" not in text  # rows are per requested model
    assert "`VALLY_TIMEOUT`" in text


def test_console_summary_is_rendered_from_the_records_that_went_by(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reporter = ConsoleReporter(ConsoleConfig(progress=False))
    _drive(reporter, tmp_path, _mixed())
    out = capsys.readouterr().out
    assert "Failures (3 of 6 trials" in out
    assert "6 trials: 3 passed, 2 failed, 1 errored" in out
    assert "Summary" in out


def test_records_that_did_not_go_by_are_read_from_the_outcome(tmp_path: Path) -> None:
    """A resumed run's earlier trials (or a merge) reach the reporters only at the end."""
    records = _mixed()
    driver = Driver(MarkdownReporter())
    run = make_run(tmp_path, planned=len(records))
    driver.emitter.emit("vally_run_start", run=run)
    driver.emitter.emit("vally_trial_end", run=run, record=records[0])
    outcome = RunOutcome(records=records, summaries=[])
    driver.emitter.emit("vally_run_end", run=run, outcome=outcome)
    assert "- **Trials:** 6" in (tmp_path / "report.md").read_text(encoding="utf-8")


def test_a_row_lists_its_first_failures_and_counts_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = 5
    records = [
        make_record("s", trial=i, passed=False) for i in reversed(range(FAILURES_KEPT + extra))
    ]
    _drive(MarkdownReporter(), tmp_path, records)
    text = (tmp_path / "report.md").read_text(encoding="utf-8")
    listed = [line for line in text.splitlines() if "`output-contains` failed" in line]
    assert len(listed) == FAILURES_KEPT
    assert listed[0].startswith("- **s** [gpt-test] trial 0:")
    assert listed[-1].startswith(f"- **s** [gpt-test] trial {FAILURES_KEPT - 1}:")
    assert f"{extra} more failed or errored trial(s) not listed" in text

    _drive(ConsoleReporter(ConsoleConfig(progress=False, quiet=True)), tmp_path, records)
    out = capsys.readouterr().out
    assert f"Failures ({FAILURES_KEPT + extra} of {FAILURES_KEPT + extra} trials" in out
    total = FAILURES_KEPT + extra
    assert out.count("✘ quickstart/s [gpt-test]") == 1  # one line for the stimulus
    assert f"✘ quickstart/s [gpt-test]: {total}/{total} trials failed · {total} with " in out


def test_variant_counts_take_one_pass_over_the_records() -> None:
    """The console's comparison of an experiment reads the run's records once."""
    from vally_builtin.reporters.experiment import variant_stats
    from vally_compare import stimulus_pass_rates

    records = [
        make_record(f"s{i % 3}", trial=i, passed=i % 2 == 0, variant=v)
        for v in ("base", "new")
        for i in range(6)
    ]
    stats = variant_stats(["base", "new", "absent"], iter(records))
    assert [s.name for s in stats] == ["base", "new"]
    for item in stats:
        own = [r for r in records if r.variant == item.name]
        assert (item.trials, item.graded, item.passed, item.failed) == (6, 6, 3, 3)
        assert dict(item.rates) == stimulus_pass_rates(own)
        assert list(item.rates) == list(stimulus_pass_rates(own))


def test_the_console_comparison_counts_variants_as_records_go_by() -> None:
    """The report aggregate's variant counts are those of one pass over the same records in
    the same order (so the console compares variants without reading the records again)."""
    from vally_builtin.reporters.experiment import variant_stats

    error = TrialError(phase="execute", code="VALLY_TIMEOUT", message="timed out")
    records = [
        make_record(
            f"s{i % 4}",
            trial=i,
            passed=i % 3 != 0,
            variant=v,
            error=error if i == 5 else None,
        )
        for i in range(12)
        for v in ("new", "base")
    ]
    aggregate = ReportAggregate.of(records)
    names = ["base", "new", "absent"]
    assert aggregate.variant_stats(names) == variant_stats(names, records)
    assert [s.name for s in aggregate.variant_stats(names)] == ["base", "new"]


def test_an_experiment_run_reports_from_the_records_that_went_by(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An experiment run's report and console comparison come from the records counted as
    trials ended, and are what reading the records once at the end gives."""
    from dataclasses import replace

    from tests.reporters.test_experiment_report import VARIANTS, _plan, _records
    from vally_builtin.reporters.experiment_report import render_experiment_report

    records = _records(stimuli=3, runs=4)
    snapshot = {"experiment": "x", "baseline": "base", "variants": VARIANTS, "trials": _plan(3, 4)}
    run = replace(
        make_run(tmp_path, planned=len(records)),
        command="experiment.run",
        experiment="x",
        baseline="base",
        variants=tuple(VARIANTS),
        snapshot=snapshot,
    )
    driver = Driver(
        MarkdownReporter(), ConsoleReporter(ConsoleConfig(progress=False, style="lines"))
    )
    driver.emitter.emit("vally_run_start", run=run)
    for record in records:
        driver.emitter.emit("vally_trial_end", run=run, record=record)
    outcome = RunOutcome(records=Unread(len(records)), summaries=[])
    driver.emitter.emit("vally_run_end", run=run, outcome=outcome)
    assert not driver.emitter.failures, driver.emitter.failures[0].error
    text = (tmp_path / "report.md").read_text(encoding="utf-8")
    expected = render_experiment_report(run, records, [], rendered_at="x")
    strip = lambda t: [line for line in t.splitlines() if not line.startswith("Rendered")]  # noqa: E731
    assert strip(text) == strip(expected)
    assert "Planned trials: 24; finished: 24" in text
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[1:6] for line in out.splitlines() if "  " in line}
    for variant in VARIANTS:
        own = [r for r in records if r.variant == variant]
        errored = sum(r.error is not None for r in own)
        passed = sum(r.error is None and r.grade_result.passed for r in own)  # type: ignore[union-attr]
        counts = [str(len(own)), str(passed), str(len(own) - errored - passed), str(errored)]
        row = rows[variant][1:] if variant == "base" else rows[variant][:4]
        assert row[:4] == counts, (variant, out)


def _split(
    records: list[TrialResultRecord], parts: int, seed: int
) -> list[list[TrialResultRecord]]:
    """``records`` dealt at random into ``parts`` lists (each keeping their order), as a
    sharded run's shards hold them."""
    import random

    rng = random.Random(seed)
    out: list[list[TrialResultRecord]] = [[] for _ in range(parts)]
    for record in records:
        out[rng.randrange(parts)].append(record)
    return out


def _through_json(state: dict[str, Any]) -> dict[str, Any]:
    import json

    loaded: dict[str, Any] = json.loads(json.dumps(state))
    return loaded


@pytest.mark.parametrize("seed", range(4))
def test_report_aggregates_added_from_states_equal_one_pass(seed: int) -> None:
    """What sealed shards counted, added up in shard order, is what one pass over the
    shards' records one after the other gives (a merge of sealed shards reads none)."""
    from tests.reporters.test_experiment_report import _records

    many_failures = [
        make_record("s", trial=i, passed=False, variant="base")
        for i in reversed(range(FAILURES_KEPT + 7))
    ]
    shards = _split(_records(stimuli=3, runs=5, seed=seed) + many_failures, 3, seed)
    whole = ReportAggregate.of(record for shard in shards for record in shard)
    added = ReportAggregate.of_states(
        _through_json(ReportAggregate.of(shard).state()) for shard in shards
    )
    names = ["base", "new"]
    assert added.variant_stats(names) == whole.variant_stats(names)
    assert (added.trials, added.outcomes, added.completed_at) == (
        whole.trials,
        whole.outcomes,
        whole.completed_at,
    )
    assert added.usage == whole.usage and added.cost.line() == whole.cost.line()
    assert list(added.rows) == list(whole.rows)
    for key, row in whole.rows.items():
        other = added.rows[key]
        assert other.stats() == row.stats()
        assert other.failed_records() == row.failed_records()
        assert other.failures_left_out == row.failures_left_out
        assert other.model_label(key) == row.model_label(key)


@pytest.mark.parametrize("seed", range(4))
def test_experiment_figures_added_from_states_equal_one_pass(seed: int) -> None:
    from tests.reporters.test_experiment_report import VARIANTS, _plan, _records
    from vally_builtin.reporters.experiment_aggregate import ExperimentAggregate
    from vally_builtin.reporters.experiment_report import render_report

    snapshot = {"experiment": "x", "baseline": "base", "variants": VARIANTS, "trials": _plan(4, 40)}
    shards = _split(_records(stimuli=4, runs=40, seed=seed), 4, seed)
    planned = snapshot["trials"]
    whole = ExperimentAggregate.of(VARIANTS, planned, [r for s in shards for r in s])
    added = ExperimentAggregate.of_states(
        VARIANTS,
        planned,
        (_through_json(ExperimentAggregate.of(VARIANTS, planned, s).state()) for s in shards),
    )

    def report(aggregate: ExperimentAggregate) -> str:
        return render_report(snapshot, {}, (), run_id="r", rendered_at="now", aggregate=aggregate)

    assert report(added) == report(whole)
    assert added.variant_stats() == whole.variant_stats()
    for variant in VARIANTS:
        lines = whole.failure_lines(variant, "ev", "f")
        assert added.failure_lines(variant, "ev", "f") == lines
    assert any("more trial(s)" in line for line in whole.failure_lines("base", "ev", "f"))


def test_collecting_sealed_counts_leaves_out_failing_and_malformed_reporters(
    tmp_path: Path,
) -> None:
    """``vally_seal_counters`` answers are merged by key; a reporter that raises or answers
    something other than a mapping with string keys is recorded as failed and left out,
    and the others still answer."""
    from tests.reporters.reporter_helpers import Driver
    from vally import hookimpl

    class Answers:
        def __init__(self, answer: Any) -> None:
            self.answer = answer

        @hookimpl
        def vally_seal_counters(self, run: Any) -> Any:
            if isinstance(self.answer, Exception):
                raise self.answer
            return self.answer

    driver = Driver(
        Answers({"a": 1}),
        Answers(RuntimeError("boom")),
        Answers([1]),
        Answers({2: 2}),
        Answers(None),
        Answers({"b": 2}),
    )
    run = make_run(tmp_path, planned=0)
    assert driver.emitter.collect("vally_seal_counters", run=run) == {"a": 1, "b": 2}
    failed = {(f.observer, type(f.error).__name__) for f in driver.emitter.failures}
    assert failed == {
        ("reporter-1", "RuntimeError"),
        ("reporter-2", "TypeError"),
        ("reporter-3", "TypeError"),
    }


@pytest.mark.parametrize("keep_failures", [False, True])
def test_a_trial_outcome_is_worked_out_once_a_trial(
    keep_failures: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The aggregate classifies each trial it is fed once, whether it counts the facts, is
    given the whole record, or declines the facts of a failure it keeps for listings."""
    from vally import TrialFacts
    from vally_builtin.reporters import aggregate as aggregate_module

    records = _mixed()
    classified: list[object] = []

    def counted(facts: TrialFacts) -> Any:
        classified.append(facts)
        return facts_outcome(facts)

    monkeypatch.setattr(aggregate_module, "facts_outcome", counted)
    fed = ReportAggregate(keep_failures)
    for record in records:
        fed.add_facts(TrialFacts.of_record(record))
    assert len(classified) == len(records)
    classified.clear()
    added = ReportAggregate(keep_failures)
    for record in records:
        added.add(record)
    assert len(classified) == len(records)
    assert added.state() == ReportAggregate.of(records, keep_failures).state()


def test_a_passing_stimulus_costs_the_aggregate_under_780_bytes() -> None:
    """Each report row is held once, keyed by its :class:`GroupKey` and looked up by the
    plain tuple of the key's fields, and counts its trials of each outcome in slots: one
    aggregate of 10^4 passing stimuli holds about 747 bytes a stimulus (891 while each row
    counted its outcomes in a dictionary, 976 while the rows were held again in a
    dictionary keyed by that tuple)."""
    import gc
    import tracemalloc

    from vally import TrialFacts

    stimuli = 10_000
    facts = [TrialFacts.of_record(make_record(f"s{i}")) for i in range(stimuli)]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        aggregate = ReportAggregate()
        for one in facts:
            assert aggregate.add_facts(one)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(aggregate.rows) == stimuli
    assert held / stimuli < 780


def test_a_row_counts_its_outcomes_and_keeps_those_it_does_not_know() -> None:
    from vally_builtin.reporters.aggregate import RowAggregate

    row = RowAggregate()
    assert row.outcomes == {}
    for outcome in ["failed", "passed", "failed", "ungraded"]:
        row.add_outcome(outcome, 1)
    assert row.outcomes == {"passed": 1, "failed": 2, "ungraded": 1}
    state = row.state()
    state["outcomes"] = {**state["outcomes"], "timed-out": 2}  # a later version's outcome
    again = RowAggregate()
    again.absorb(state)
    again.absorb(state)
    assert again.outcomes == {"passed": 2, "failed": 4, "ungraded": 2, "timed-out": 4}
    assert again.stats().failed == 4 and again.stats().passed == 2


def test_a_run_without_a_baseline_counts_no_comparison_of_variants() -> None:
    """A plain eval compares no variants: its shared aggregate keeps the same rows and
    totals without each stimulus's comparison counts (about 250 bytes a stimulus)."""
    import gc
    import tracemalloc

    from vally import TrialFacts
    from vally_builtin.reporters.aggregate import run_aggregate

    records = [make_record(f"s{i}") for i in range(2_000)]
    facts = [TrialFacts.of_record(record) for record in records]

    def held(aggregate: ReportAggregate) -> int:
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for one in facts:
                assert aggregate.add_facts(one)
            return tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()

    compared, plain = ReportAggregate(), ReportAggregate(compare_variants=False)
    saved = (held(compared) - held(plain)) / len(facts)
    assert saved > 200, saved
    assert plain.variants == {} and plain.variant_stats([""]) == []
    assert plain.state() == {**compared.state(), "variants": []}
    eval_run = make_run(None)
    assert not run_aggregate(eval_run, keep_failures=False).compare_variants
    experiment = dataclasses.replace(make_run(None), variants=("a", "b"), baseline="a")
    assert run_aggregate(experiment, keep_failures=False).compare_variants
