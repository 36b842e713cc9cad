"""``experiment merge`` reads only the fields it needs from each shard line: the facts it
counts match the full record's, a bad field fails with ``file:line`` and the field, and the
plan is held once however many shards carry a copy of it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.scoring.test_tally import mixed_records
from vally.engine.records.tally import EvalTally
from vally.engine.records.trial_facts import TrialFacts, facts_from_json
from vally.engine.shards.partition import ShardValidationError
from vally.engine.trials.summaries import VariantSummaries
from vally.models.records import TrialResultRecord
from vally.models.usage import TokenTotals, Usage
from vally_experiment.merge import stream_records
from vally_experiment.validation import (
    ShardInput,
    TrialIndex,
    read_run_shards,
    validate_shards,
)

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import merge_memory  # noqa: E402


def _facts(facts: TrialFacts) -> dict[str, object]:
    return facts._asdict()


def _records() -> list[TrialResultRecord]:
    usage = Usage(agent=TokenTotals(calls=2, input_tokens=5, output_tokens=3, total_tokens=8))
    records = mixed_records()
    records[0] = records[0].model_copy(update={"usage": usage})
    return records


def test_facts_read_from_a_line_are_those_of_the_validated_record() -> None:
    for item in _records():
        data = json.loads(item.to_json_line())
        assert _facts(facts_from_json(data)) == _facts(TrialFacts.of_record(item))


def test_counting_facts_read_from_lines_gives_the_records_summary() -> None:
    records = _records()
    from_records, from_lines = EvalTally(), EvalTally()
    for item in records:
        from_records.add(item)
        from_lines.add_facts(facts_from_json(json.loads(item.to_json_line())))
    expected = from_records.summary(run_id="r", eval_name="ev").model_dump()
    got = from_lines.summary(run_id="r", eval_name="ev").model_dump()
    for summary in (expected, got):
        summary.pop("completed_at")
    assert got == expected
    assert got["usage"]["agent"]["total_tokens"] == 8


def _shards(tmp_path: Path, records: int = 40) -> Path:
    merge_memory.generate(tmp_path, records, 2)
    return tmp_path


def _merge(folder: Path) -> None:
    shards = read_run_shards(sorted(folder.glob("shard-*")))
    validate_shards(shards)
    shards.sort(key=lambda s: s.index)
    snapshot = shards[0].snapshot
    index = TrialIndex(snapshot, shards, shards[0].plan_keys)
    tallies = VariantSummaries(snapshot, run_id="r", run_dir=None).tallies(index.position)
    stream_records(shards, {"a": "a"}, folder / "merged", tallies, print, index)


def _replace_line(path: Path, number: int, change: dict[str, object]) -> None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    data = json.loads(lines[number - 1])
    for dotted, value in change.items():
        *parents, last = dotted.split(".")
        target = data
        for name in parents:
            target = target[name]
        target[last] = value
    lines[number - 1] = json.dumps(data) + "\n"
    path.write_text("".join(lines), encoding="utf-8")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"gradeResult.passed": "yes"}, "gradeResult.passed must be true or false, not str"),
        ({"trialIndex": "3"}, "trialIndex must be an integer, not str"),
        ({"status": "done"}, "status must be one of cancelled, error, success, not 'done'"),
        ({"trajectory": {"metrics": {"turnCount": 1.5}}}, "trajectory.metrics.turnCount"),
        ({"usage": {"agent": {"calls": None}}}, "usage.agent.calls must be an integer"),
        ({"error": {"phase": "execute"}}, "error.code: Field required"),
        ({"gradeResult.details": [{"passed": "no"}]}, "gradeResult.details[0].passed must be"),
        (
            {"gradeResult.details": [{"name": "g", "type": "t", "passed": False, "score": 2}]},
            "gradeResult.details[0].score: Input should be less than or equal to 1",
        ),
        ({"gradeResult.constraintViolations": [3]}, "gradeResult.constraintViolations must be"),
        ({"trajectory": {"metadata": {"model": 4}}}, "trajectory.metadata.model must be a string"),
    ],
)
def test_a_bad_field_fails_the_merge_naming_file_line_and_field(
    tmp_path: Path, change: dict[str, object], expected: str
) -> None:
    folder = _shards(tmp_path)
    results = folder / "shard-2" / "a" / "results.jsonl"
    _replace_line(results, 3, change)
    with pytest.raises(ShardValidationError) as raised:
        _merge(folder)
    message = raised.value.message
    assert f"{results}:3: not a trial-result record: {expected}" in message, message
    assert not (folder / "merged" / "a" / "results.jsonl").exists()


def test_fields_the_merge_does_not_read_pass_through_as_written(tmp_path: Path) -> None:
    folder = _shards(tmp_path)
    results = folder / "shard-1" / "a" / "results.jsonl"
    _replace_line(results, 1, {"stimulus.prompt": "p\u00e9 \u2603", "tags": {"k": "v"}})
    _merge(folder)
    merged = (folder / "merged" / "a" / "results.jsonl").read_text(encoding="utf-8")
    assert merged.startswith(results.read_text(encoding="utf-8"))


def test_the_shards_share_one_copy_of_the_plan(tmp_path: Path) -> None:
    folder = _shards(tmp_path)
    shards = read_run_shards(sorted(folder.glob("shard-*")))
    first, second = shards
    assert first.snapshot is second.snapshot
    assert first.plan_keys is second.plan_keys
    planned = first.snapshot["trials"]
    for shard in shards:
        for field in ("selectedKeys", "completedKeys"):
            for key in shard.manifest[field]:
                assert key is planned[planned.index(key)], field


def test_a_shard_whose_snapshot_differs_is_still_refused(tmp_path: Path) -> None:
    folder = _shards(tmp_path)
    snapshot = folder / "shard-2" / "plan-snapshot.json"
    data = json.loads(snapshot.read_text(encoding="utf-8"))
    data["baseline"] = "other"
    snapshot.write_text(json.dumps(data), encoding="utf-8")
    shards = read_run_shards(sorted(folder.glob("shard-*")))
    assert shards[0].snapshot is not shards[1].snapshot
    with pytest.raises(ShardValidationError, match=r"plan snapshot of .*shard-2 differs"):
        validate_shards(shards)


def _select(folder: Path, shard: int, keys: list[str]) -> None:
    path = folder / f"shard-{shard}" / "shard-manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest["selectedKeys"] = manifest["completedKeys"] = keys
    path.write_text(json.dumps(manifest), encoding="utf-8")


def _owners(shards: list[ShardInput]) -> list[int]:
    return list(TrialIndex(shards[0].snapshot, shards, shards[0].plan_keys).owner)


def test_a_selection_at_even_steps_is_checked_as_one_slice_with_the_same_outcome(
    tmp_path: Path,
) -> None:
    """A round-robin shard's selection is a slice of the plan: the partition check and the
    trial index take it whole, and find what looking up each key finds."""
    folder = _shards(tmp_path, 12)
    shards = read_run_shards(sorted(folder.glob("shard-*")))
    assert [s.selected_range for s in shards] == [range(0, 12, 2), range(1, 12, 2)]
    validate_shards(shards)
    by_slices = _owners(shards)
    for shard in shards:
        shard.selected_range = None  # key by key, as a selection of any other shape
    validate_shards(shards)
    assert _owners(shards) == by_slices == [1, 2] * 6

    plan = json.loads((folder / "shard-1" / "plan-snapshot.json").read_text())["trials"]
    _select(folder, 1, [plan[0], plan[3], *plan[4::2]])  # not at even steps
    _select(folder, 2, [plan[1], plan[2], *plan[5::2]])
    shards = read_run_shards(sorted(folder.glob("shard-*")))
    assert [s.selected_range for s in shards] == [None, None]
    validate_shards(shards)
    assert _owners(shards)[:6] == [1, 2, 2, 1, 1, 2]


@pytest.mark.parametrize("second", ["the same slice", "one key of it"])
def test_overlapping_selections_are_refused_naming_a_trial(tmp_path: Path, second: str) -> None:
    folder = _shards(tmp_path, 12)
    plan = json.loads((folder / "shard-1" / "plan-snapshot.json").read_text())["trials"]
    taken = plan[0::2] if second == "the same slice" else [plan[4], *plan[1::2]]
    _select(folder, 2, taken)
    with pytest.raises(ShardValidationError) as raised:
        validate_shards(read_run_shards(sorted(folder.glob("shard-*"))))
    assert raised.value.message == (
        f"shards 1/2 and 2/2 both ran trial {taken[0]}: their slices overlap"
    )
