"""Sealed shards: a finished shard seals what its results add up to, and a merge of sealed
shards copies their files and adds their tallies, giving the same merged folder as reading
every record; a file changed after sealing sends the merge back to reading every record."""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.scoring.test_tally import mixed_records
from vally.engine.records.record_log import WrittenRecords
from vally.engine.records.trial_facts import TrialFacts
from vally.engine.trials.summaries import PlanTallies
from vally.models.records import TrialResultRecord
from vally_experiment import merge as merge_module, seal as shard_seal
from vally_experiment.merge import MergeRequest, merge, read_shards
from vally_experiment.seal import SEAL_FILE, place_ranges, read_sealed_shards
from vally_experiment.seal_state import absorb_plan, plan_state

from .conftest import read_jsonl, vally
from .test_shards import RUN_ID, run_shard, sharded, without_render_line

__all__ = ["sharded"]  # the fixture, used by name


def _shards(root: Path, total: int = 3) -> list[Path]:
    return [run_shard(root, i, total) for i in range(1, total + 1)]


def _without_seals(root: Path, shards: list[Path]) -> list[Path]:
    copies = []
    for shard in shards:
        copy = root / "unsealed" / RUN_ID / shard.name
        shutil.copytree(shard, copy)
        (copy / SEAL_FILE).unlink()
        copies.append(copy)
    return copies


def _merged(root: Path, shards: list[Path], out: str) -> tuple[Path, str]:
    """The merged folder and what the merge printed (its path and duration taken out)."""
    res = vally("experiment", "merge", *map(str, shards), "-o", out, cwd=root)
    assert res.code == 0, res.text
    printed = res.stdout.replace(str(root / out), "<merged>")
    return root / out, re.sub(r" in [0-9.]+s ", " in <time> ", printed)  # the merge's own


def test_a_finished_shard_is_sealed(sharded: Path) -> None:
    shards = _shards(sharded)
    for index, shard in enumerate(shards, start=1):
        seal = json.loads((shard / SEAL_FILE).read_text())
        manifest = json.loads((shard / "shard-manifest.json").read_text())
        assert seal["shard"] == manifest["shard"] and seal["planDigest"] == manifest["planDigest"]
        assert seal["trials"] == len(manifest["selectedKeys"])
        [(start, stop, step)] = seal["selected"]  # round-robin: one range
        assert list(range(start, stop, step)) == list(range(index - 1, 16, 3))
        for variant in ("base", "quiet"):
            data = (shard / variant / "results.jsonl").read_bytes()
            assert seal["results"][variant]["bytes"] == len(data)
            assert seal["results"][variant]["records"] == data.count(b"\n")
        assert seal["tallies"]["count"] == seal["trials"]


def test_a_sealed_merge_equals_the_merge_that_reads_every_record(sharded: Path) -> None:
    shards = _shards(sharded)
    sealed, sealed_out = _merged(sharded, shards, "sealed")
    unsealed, unsealed_out = _merged(sharded, _without_seals(sharded, shards), "unsealed")
    assert "Δ vs baseline" in sealed_out and sealed_out == unsealed_out
    for variant in ("base", "quiet"):
        assert (sealed / variant / "results.jsonl").read_bytes() == (
            unsealed / variant / "results.jsonl"
        ).read_bytes()
        assert read_jsonl(sealed / variant / "run-summary.jsonl") == read_jsonl(
            unsealed / variant / "run-summary.jsonl"
        )
    assert (sealed / "plan-snapshot.json").read_bytes() == (
        unsealed / "plan-snapshot.json"
    ).read_bytes()
    assert without_render_line((sealed / "report.md").read_text()) == without_render_line(
        (unsealed / "report.md").read_text()
    )
    manifests = [
        json.loads((m / "experiment-manifest.json").read_text()) for m in (sealed, unsealed)
    ]
    for manifest in manifests:
        manifest.pop("mergedAt")
    assert manifests[0] == manifests[1]


def _as_version_1(seal: dict[str, object]) -> dict[str, object]:
    """``seal`` as version 1 wrote it: the tallies' stimuli as one object each."""
    tallies = seal["tallies"]
    assert isinstance(tallies, dict)
    for item in tallies["evals"]:
        columns = item["tally"].pop("stimuli")
        rows = zip(*columns.values(), strict=True)
        item["tally"]["groups"] = [dict(zip(columns, row, strict=True)) for row in rows]
    return {**seal, "schemaVersion": 1}


def test_seals_of_version_1_are_still_read(sharded: Path) -> None:
    shards = _shards(sharded)
    current, current_out = _merged(sharded, shards, "current")
    for shard in shards:
        seal = json.loads((shard / SEAL_FILE).read_text())
        assert seal["schemaVersion"] == 2 and "stimuli" in seal["tallies"]["evals"][0]["tally"]
        (shard / SEAL_FILE).write_text(json.dumps(_as_version_1(seal)))
    read = read_sealed_shards(shards)
    assert read is not None and all(shard.seal is not None for shard in read)
    older, older_out = _merged(sharded, shards, "older")
    assert older_out == current_out and "seal does not match" not in older_out
    summaries = sorted(current.glob("*/run-summary.jsonl"))
    assert summaries
    for path in summaries:
        assert read_jsonl(older / path.parent.name / path.name) == read_jsonl(path)


def test_a_sealed_merge_reads_no_record(
    sharded: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shards = _shards(sharded)

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a sealed merge read the records")

    monkeypatch.setattr(merge_module, "stream_shard_records", refuse)
    monkeypatch.setattr(WrittenRecords, "__iter__", refuse)  # nor do its reporters
    monkeypatch.chdir(sharded)
    request = MergeRequest([str(s) for s in shards], str(sharded / "m"))
    read = read_shards(request)
    assert all(shard.seal is not None for shard in read)
    result = merge(request, read)
    assert result.warnings == [] and sum(s.trials for s in result.summaries) == 16
    assert "Δ vs baseline" in capsys.readouterr().out
    monkeypatch.undo()
    assert len(read_jsonl(sharded / "m" / "base" / "results.jsonl")) == 8
    assert "Failed graders and errors:" in (sharded / "m" / "report.md").read_text()


def test_an_unsealed_merge_counts_for_its_reporters_in_its_one_pass(
    sharded: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The merge of unsealed shards feeds each record, read once, to the reporters'
    counters: the report and the console read no merged record again."""
    shards = _without_seals(sharded, _shards(sharded))

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a reporter read the merged records again")

    monkeypatch.setattr(WrittenRecords, "__iter__", refuse)
    monkeypatch.chdir(sharded)
    request = MergeRequest([str(s) for s in shards], str(sharded / "m"))
    read = read_shards(request)
    assert all(shard.seal is None for shard in read)
    result = merge(request, read)
    assert result.warnings == [] and sum(s.trials for s in result.summaries) == 16
    assert "Δ vs baseline" in capsys.readouterr().out
    assert "Failed graders and errors:" in (sharded / "m" / "report.md").read_text()


def test_a_results_file_changed_after_sealing_is_read_in_full(sharded: Path) -> None:
    shards = _shards(sharded)
    path = shards[1] / "base" / "results.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    record = json.loads(lines[0])
    record["gradeResult"]["passed"] = not record["gradeResult"]["passed"]
    lines[0] = json.dumps(record) + "\n"
    path.write_text("".join(lines))
    res = vally("experiment", "merge", *map(str, shards), "-o", "m", cwd=sharded)
    assert res.code == 0, res.text
    assert "seal does not match its files" in res.stderr
    merged = read_jsonl(sharded / "m" / "base" / "results.jsonl")
    assert json.loads(lines[0]) in merged  # the changed line, passed through

    # a change that breaks the shard still fails the merge, naming the problem
    path.write_text("".join(lines) + lines[0])
    res = vally("experiment", "merge", *map(str, shards), "-o", "m2", cwd=sharded)
    assert res.code == 1 and "more than once" in res.stderr
    assert not (sharded / "m2" / "base" / "results.jsonl").exists()


def test_an_edited_manifest_or_snapshot_ignores_the_seals(sharded: Path) -> None:
    shards = _shards(sharded, 2)
    assert read_sealed_shards(shards) is not None
    manifest = shards[0] / "shard-manifest.json"
    manifest.write_text(manifest.read_text() + " ")
    assert read_sealed_shards(shards) is None
    manifest.write_text(manifest.read_text()[:-1])
    assert read_sealed_shards(shards) is not None
    snapshot = shards[1] / "plan-snapshot.json"
    snapshot.write_text(snapshot.read_text().replace('"greet"', '"other"'))
    assert read_sealed_shards(shards) is None
    assert read_sealed_shards([shards[0]]) is None  # shard 2/2 missing
    assert read_sealed_shards([shards[0], shards[0], shards[1]]) is None


@pytest.mark.parametrize("damage", ["blank line", "torn last line", "another record type"])
def test_a_shard_whose_lines_a_merge_would_change_is_not_sealed(sharded: Path, damage: str) -> None:
    shard = _shards(sharded, 2)[0]
    path = shard / "quiet" / "results.jsonl"
    text = path.read_text()
    if damage == "blank line":
        text += "\n"
    elif damage == "torn last line":
        text += '{"type": "trial-res'
    else:
        text += json.dumps({"type": "run-summary"}) + "\n"
    path.write_text(text)
    manifest = json.loads((shard / "shard-manifest.json").read_text())
    snapshot = json.loads((shard / "plan-snapshot.json").read_text())
    assert shard_seal.shard_seal(shard, manifest, snapshot) is None
    assert shard_seal.shard_seal(shard, {**manifest, "finished": False}, snapshot) is None


def test_a_shard_run_again_replaces_its_seal(sharded: Path) -> None:
    shard = _shards(sharded, 2)[0]
    (shard / SEAL_FILE).write_text('{"schemaVersion": 1, "stale": true}')
    again = run_shard(sharded, 1, 2)
    assert again == shard
    assert "stale" not in json.loads((shard / SEAL_FILE).read_text())


def test_place_ranges_give_back_the_places() -> None:
    rng = random.Random(7)
    for _ in range(300):
        places = sorted(rng.sample(range(60), rng.randint(0, 30)))
        ranges = place_ranges(places)
        assert [p for start, stop, step in ranges for p in range(start, stop, step)] == places
    assert place_ranges(list(range(2, 1000, 16))) == [[2, 995, 16]]


def test_tallies_added_from_states_summarise_as_counting_every_record() -> None:
    records = mixed_records()
    snapshot = {
        "evals": [{"variant": r.variant or "", "name": r.eval_name} for r in records],
        "trials": [f"k{i}" for i in range(len(records))],
    }
    whole = PlanTallies(snapshot)
    for place, record in enumerate(records):
        whole.add_facts(TrialFacts.of_record(record), place)
    rng = random.Random(3)
    parts = [PlanTallies(snapshot) for _ in range(3)]
    for place, record in enumerate(records):
        parts[rng.randrange(3)].add_facts(TrialFacts.of_record(record), place)
    added = PlanTallies(snapshot)
    for part in parts:
        absorb_plan(added, json.loads(json.dumps(plan_state(part))))
    assert added.count == whole.count and added.unsuccessful == whole.unsuccessful
    for key, tally in whole.evals.items():
        expected = tally.summary(run_id="r", eval_name=key[1]).model_dump()
        got = added.evals[key].summary(run_id="r", eval_name=key[1]).model_dump()
        for summary in (expected, got):
            summary.pop("completed_at")
        assert got == expected


def test_a_shard_with_offloaded_texts_is_not_sealed_and_merges_in_full(tmp_path: Path) -> None:
    """A long output is offloaded to the trial's folder; the merge must rewrite the path
    in the record, which only the path that reads every record does."""
    from .conftest import make_project

    long_output = "x" * 70_000
    make_project(
        tmp_path,
        experiment=f"""
        name: long
        evals: [evals/*/eval.yaml]
        vary: [/defaults/executor/config/output]
        baseline: base
        variants:
          base: {{}}
          long: {{defaults: {{executor: {{config: {{output: "hello {long_output}"}}}}}}}}
        """,
    )
    shards = [run_shard(tmp_path, i, 2) for i in (1, 2)]
    assert not any((shard / SEAL_FILE).exists() for shard in shards)
    merged, _ = _merged(tmp_path, shards, "m")
    records = read_jsonl(merged / "long" / "results.jsonl")
    assert len(records) == 2 and all(r["offloaded"] for r in records)
    for record in records:
        text = merged / record["offloaded"][0]["path"]
        assert text.read_text().startswith("hello xxx")


@pytest.mark.parametrize("damage", ["tallies", "schema"])
def test_a_damaged_seal_is_not_trusted(sharded: Path, damage: str) -> None:
    """A seal whose tallies are not of the plan (or of another version) is not used: the
    merge reads every record and gives what the unsealed merge gives."""
    shards = _shards(sharded, 2)
    path = shards[1] / SEAL_FILE
    seal = json.loads(path.read_text())
    if damage == "tallies":
        seal["tallies"]["evals"][0]["name"] = "no-such-eval"
    else:
        seal["schemaVersion"] = 99
    path.write_text(json.dumps(seal))
    res = vally("experiment", "merge", *map(str, shards), "-o", "m", cwd=sharded)
    assert res.code == 0, res.text
    assert ("seal does not match its files" in res.stderr) == (damage == "tallies")
    unsealed, _ = _merged(sharded, _without_seals(sharded, shards), "unsealed")
    for variant in ("base", "quiet"):
        assert read_jsonl(sharded / "m" / variant / "run-summary.jsonl") == read_jsonl(
            unsealed / variant / "run-summary.jsonl"
        )


KINDS = """
name: greet
evals: ["evals/*/eval.yaml"]
vary: [/defaults/executor/config/output, /defaults/executor/config/error,
       /defaults/executor/config/tokens]
baseline: base
variants:
  base: {defaults: {executor: {config: {tokens: {input: 12, output: 5}}}}}
  quiet: {defaults: {executor: {config: {output: "bye {prompt}"}}}}
  broken: {defaults: {executor: {config: {error: boom}}}}
"""
"""Passed, failed and errored trials of three variants, with token usage."""


class _RecordsOnly:
    """A counter as a third party writes it: ``add`` and ``state`` only."""

    def __init__(self, counter: Any) -> None:
        self.counter = counter

    def add(self, record: Any) -> None:
        self.counter.add(record)

    def state(self) -> Any:
        return self.counter.state()


def _merge_in_process(
    root: Path, shards: list[Path], out: str, capsys: pytest.CaptureFixture[str]
) -> tuple[dict[str, str], str, dict[str, int]]:
    """What a merge writes (each file's text, the render line and time left out), what it
    prints (its timing left out) and the trials it could not run."""
    request = MergeRequest([str(s) for s in shards], str(root / out))
    result = merge(request, read_shards(request))
    assert result.warnings == []
    files = {}
    for path in sorted((root / out).rglob("*")):
        if path.is_file():
            text = without_render_line(path.read_text())
            if path.name == "experiment-manifest.json":
                text = re.sub(r'"mergedAt": "[^"]*"', "", text)
            files[str(path.relative_to(root / out))] = text
    printed = capsys.readouterr().out.replace(str(root / out), "<merged>")
    return files, re.sub(r" in [0-9.]+s ", " in <time> ", printed), result.unsuccessful


def test_counters_fed_facts_give_the_merge_of_counters_fed_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The report's and the console's counters fed each trial's facts give the merged
    folder, report and console output they give fed whole records, for passed, failed and
    errored trials of several variants with usage; and no record is validated whole."""
    from .conftest import make_project

    make_project(tmp_path, evals=("one", "two"), runs=2, experiment=KINDS)
    for index in (1, 2, 3):  # each shard has errored trials: exit 1
        res = vally("experiment", "run", "experiment.yaml", "--shard", f"{index}/3",
                    "--run-id", RUN_ID, "--output-dir", "out", cwd=tmp_path)  # fmt: skip
        assert res.code == 1 and "failed to run (status: error)" in res.text, res.text
    shards = _without_seals(tmp_path, sorted((tmp_path / "out" / RUN_ID).glob("shard-*")))
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a record was validated whole")

    with monkeypatch.context() as patched:
        patched.setattr(TrialResultRecord, "model_validate_json", refuse)
        patched.setattr(WrittenRecords, "__iter__", refuse)
        by_facts = _merge_in_process(tmp_path, shards, "facts", capsys)

    collect = merge_module.merge_counters

    def records_only(session: Any, run: Any) -> dict[str, Any]:
        return {key: _RecordsOnly(c) for key, c in collect(session, run).items()}

    monkeypatch.setattr(merge_module, "merge_counters", records_only)
    by_records = _merge_in_process(tmp_path, shards, "records", capsys)
    files, printed, unsuccessful = by_facts
    assert unsuccessful == {"error": 8} and by_records[2] == unsuccessful
    assert "broken" in printed and "Δ vs baseline" in printed and printed == by_records[1]
    assert "error in execute" in files["report.md"] and "failed:" in files["report.md"]
    assert files == by_records[0]
