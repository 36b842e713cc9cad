"""Records that always read back: every record model's record with every optional field
set, and with every optional field unset, written as vally writes them and read back by
every reader: :func:`vally.read_run` and :func:`vally.iter_records`, ``vally grade`` (saved
records on stdin), ``vally compare`` (graded, no judge), ``vally experiment merge`` (the
shard folders of a real sharded run, its lines replaced by these records), ``vally
ingest`` into a SQLite store, and ``vally serve``'s REST API over that store.

The records come from :mod:`tests.integrity.record_filler`, which walks the models, so a
field added later is covered, and the first test fails when the filler leaves one unset.
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tests.experiments.conftest import EVAL_SPEC, EXPERIMENT
from tests.history.serving import Served
from tests.integrity.conftest import vally
from tests.integrity.record_filler import filled, minimal, unset_fields
from vally import iter_records, read_run
from vally.models.records import RunSummaryRecord, TrialResultRecord
from vally_experiment.seal import SEAL_FILE, read_sealed_shards, seal

pytestmark = pytest.mark.slow

EVAL = "readback"
STIMULUS = "greet"
RUN = "readback-run"

SPEC = f"""\
name: {EVAL}
stimuli:
  - name: {STIMULUS}
    prompt: Say hello.
    graders:
      - type: output-contains
        config: {{substring: Trajectory.output}}
"""


FULL, ALTERNATE, MINIMAL = "full", "alternate", "minimal"
KINDS = (FULL, ALTERNATE, MINIMAL)
"""Every field set (first union member, last other ``Literal`` choice); every field set the
other way (last union member, first other choice); every optional field unset."""


def _data(model: type[BaseModel], kind: str) -> dict[str, Any]:
    if kind == MINIMAL:
        return minimal(model)
    return filled(model, alternate=kind == ALTERNATE)


def trial(kind: str, index: int, **keys: Any) -> TrialResultRecord:
    """The trial record of ``kind`` (see :data:`KINDS`) as trial ``index`` of stimulus
    ``greet`` of eval ``readback`` (``keys`` override more)."""
    data = _data(TrialResultRecord, kind)
    data.update(
        run_id=RUN,
        eval_name=EVAL,
        stimulus_name=STIMULUS,
        model="gpt-test",
        variant=None,
        trial_index=index,
        trial_id=f"trial-{index}",
    )
    data.update(keys)
    data["stimulus"]["name"] = data["stimulus_name"]
    return TrialResultRecord.model_validate(data)


def summary(kind: str, **keys: Any) -> RunSummaryRecord:
    """The run summary of ``kind`` of eval ``readback``."""
    data = _data(RunSummaryRecord, kind)
    data.update({"run_id": RUN, "eval_name": EVAL, "variant": None, **keys})
    return RunSummaryRecord.model_validate(data)


def all_trials() -> list[TrialResultRecord]:
    """A trial record of each kind, trials 0, 1 and 2."""
    return [trial(kind, index) for index, kind in enumerate(KINDS)]


def write_run_folder(folder: Path) -> tuple[list[TrialResultRecord], list[RunSummaryRecord]]:
    """A run folder holding a trial record and a summary of each kind, as vally writes them."""
    folder.mkdir(parents=True)
    # a run has one summary per eval, variant (and shard): one eval per kind
    records = all_trials()
    summaries = [summary(kind, eval_name=f"{EVAL}-{kind}") for kind in KINDS]
    (folder / "results.jsonl").write_text(
        "".join(r.to_json_line() + "\n" for r in records), encoding="utf-8"
    )
    (folder / "run-summary.jsonl").write_text(
        "".join(s.to_json_line() + "\n" for s in summaries), encoding="utf-8"
    )
    return records, summaries


def test_the_filler_sets_every_field_of_every_model() -> None:
    full, alternate, bare = (
        TrialResultRecord.model_validate(_data(TrialResultRecord, kind)) for kind in KINDS
    )
    # only the field the full stimulus cannot have with its turns is left to the minimal one
    assert unset_fields(full) == unset_fields(alternate) == {"Stimulus.prompt"}
    assert unset_fields(full, bare) == set()
    for kind in (FULL, ALTERNATE):
        assert unset_fields(RunSummaryRecord.model_validate(_data(RunSummaryRecord, kind))) == set()
    # the alternate one takes the other union members (a tool call's arguments as text)
    assert full.trajectory is not None and alternate.trajectory is not None
    assert full.trajectory.events[0].data != alternate.trajectory.events[0].data
    # the minimal records leave every optional field unset
    assert bare.error is None and bare.trajectory is None and bare.grade_result is None
    assert bare.offloaded == [] and bare.experiment is None and bare.stimulus.turns is None
    assert summary(MINIMAL).experiment is None and summary(MINIMAL).graders == []


def test_read_run_and_iter_records_give_back_what_was_written(tmp_path: Path) -> None:
    records, summaries = write_run_folder(tmp_path / "run")
    run = read_run(tmp_path / "run")
    assert run.records == records
    assert run.summaries == summaries
    assert run.warnings == []
    assert list(iter_records(tmp_path / "run")) == records
    # and the JSON form, key for key
    assert [r.to_json_dict() for r in run.records] == [r.to_json_dict() for r in records]


def test_grade_regrades_saved_records_from_stdin(tmp_path: Path) -> None:
    (tmp_path / "eval.yaml").write_text(SPEC, encoding="utf-8")
    saved = tmp_path / "saved.jsonl"
    saved.write_text("".join(r.to_json_line() + "\n" for r in all_trials()), encoding="utf-8")
    done = vally("grade", "-e", "eval.yaml", "-v", cwd=tmp_path, stdin=saved)
    # the full records are graded again (their output holds the substring); the minimal one
    # has no trajectory to grade, which is reported, not a crash
    found = "✔ output-contains: 'Trajectory.output' found in output"
    assert done.stdout.count(found) == 2, done.stdout
    assert "#2: error: the record holds no trajectory to grade" in done.stdout, done.stdout
    assert "Graded 3 trials" in done.stdout, done.stdout


def test_compare_counts_both_records(tmp_path: Path) -> None:
    for side in ("base", "treat"):
        write_run_folder(tmp_path / side)
    out = tmp_path / "comparison.jsonl"
    done = vally(
        "compare", "--baseline", "base", "--treatment", "treat", "--no-judge",
        "--output", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert done.code == 0, done.stdout + done.stderr
    (comparison,) = (json.loads(line) for line in out.read_text(encoding="utf-8").splitlines())
    assert comparison["baseline"]["records"] == 3 and comparison["candidate"]["records"] == 3
    (case,) = comparison["cases"]
    assert case["id"] == f"{EVAL}/{STIMULUS}"
    assert case["baseline"]["trials"] == 3 and case["candidate"]["trials"] == 3


def _replace_shard_records(
    shards: list[Path], *, offloaded: bool = True
) -> dict[str, tuple[Path, TrialResultRecord]]:
    """Every results line of ``shards`` replaced by a record of each kind in turn, keeping
    its trial key (without offloaded texts unless ``offloaded``); returns the shard and the
    written record by trial id."""
    written: dict[str, tuple[Path, TrialResultRecord]] = {}
    files = [
        (shard, results) for shard in shards for results in sorted(shard.glob("*/results.jsonl"))
    ]
    number = 0
    for shard, results in files:
        lines = []
        for line in results.read_text(encoding="utf-8").splitlines():
            real = json.loads(line)
            keys = {
                "run_id": real["runId"],
                "eval_name": real["evalName"],
                "eval_file": real["evalFile"],
                "stimulus_name": real["stimulusName"],
                "variant": real["variant"],
                "model": real["model"],
                "trial_index": real["trialIndex"],
                "trial_id": real["trialId"],
            }
            kind = KINDS[number % len(KINDS)]
            number += 1
            if kind != MINIMAL:
                keys["experiment"] = real["experiment"]
            if not offloaded:
                keys["offloaded"] = []
            record = trial(kind, real["trialIndex"], **keys)
            written[record.trial_id] = (shard, record)
            lines.append(record.to_json_line() + "\n")
        results.write_text("".join(lines), encoding="utf-8")
    return written


def _sharded_run(root: Path) -> list[Path]:
    """A real run of a tiny experiment (two evals, two stimuli, two variants: 8 trials) in
    two shards, by ``vally experiment run --shard``; returns the shard folders."""
    (root / ".vally.yaml").write_text("paths: {evals: [evals]}\n", encoding="utf-8")
    for name in ("one", "two"):
        spec = root / "evals" / name / "eval.yaml"
        spec.parent.mkdir(parents=True)
        spec.write_text(EVAL_SPEC.format(name=name, runs=1), encoding="utf-8")
    (root / "experiment.yaml").write_text(EXPERIMENT, encoding="utf-8")
    shards = []
    for index in (1, 2):
        done = vally(
            "experiment", "run", "experiment.yaml", "--shard", f"{index}/2", "--run-id", RUN,
            "--output-dir", "out", cwd=root,
        )  # fmt: skip
        assert done.code == 0, done.stdout + done.stderr
        shard = root / "out" / RUN / f"shard-{index}-of-2"
        assert (shard / SEAL_FILE).is_file()  # a finished shard is sealed
        shards.append(shard)
    return shards


def _merge(shards: list[Path], target: Path) -> list[str]:
    """``vally experiment merge`` of ``shards`` into ``target``; its results lines."""
    done = vally("experiment", "merge", *map(str, shards), "-o", str(target), cwd=target.parent)
    assert done.code == 0, done.stdout + done.stderr
    return [
        line
        for results in sorted(target.glob("*/results.jsonl"))
        for line in results.read_text(encoding="utf-8").splitlines()
    ]


def test_merge_reads_every_record_of_the_shards(tmp_path: Path) -> None:
    shards = _sharded_run(tmp_path)
    written = _replace_shard_records(shards)  # the seals no longer match: records are read
    assert len(written) == 8
    kinds = [r.experiment is None for _s, r in written.values()]
    assert kinds.count(True) == 2  # every third line is a minimal record

    target = tmp_path / "merged"
    merged = _merge(shards, target)
    assert len(merged) == 8
    for line in merged:
        record = TrialResultRecord.model_validate_json(line)
        shard, original = written.pop(record.trial_id)
        if not original.offloaded:
            assert line == original.to_json_line()  # byte-identical
            continue
        # offloaded texts stay in the shard's folders (paths are relative to the run
        # folder, which holds the variant folders): their paths now lead there
        moved = [
            entry.model_copy(
                update={"path": Path(os.path.relpath(shard / entry.path, target)).as_posix()}
            )
            for entry in original.offloaded
        ]
        assert record == original.model_copy(update={"offloaded": moved})
    assert written == {}
    # and the merged folder reads back as an experiment folder
    run = read_run(target)
    assert [r.to_json_line() for r in run.records] == [
        TrialResultRecord.model_validate_json(line).to_json_line() for line in merged
    ]
    assert run.warnings == [] and len(run.summaries) == 4


def test_merge_of_sealed_shards_copies_them_as_the_read_merge_does(tmp_path: Path) -> None:
    shards = _sharded_run(tmp_path)
    written = _replace_shard_records(shards, offloaded=False)
    unsealed = []
    for shard in shards:  # seal the rewritten shards as a finished shard is sealed
        manifest = json.loads((shard / "shard-manifest.json").read_text(encoding="utf-8"))
        snapshot = json.loads((shard / "plan-snapshot.json").read_text(encoding="utf-8"))
        copy = tmp_path / "unsealed" / shard.name
        shutil.copytree(shard, copy)
        (copy / SEAL_FILE).unlink()
        unsealed.append(copy)
        assert seal(shard, manifest, snapshot), f"{shard} holds records a merge cannot seal"
    assert read_sealed_shards(shards) is not None  # the merge takes the sealed path

    sealed_lines = _merge(shards, tmp_path / "merged-sealed")
    read_lines = _merge(unsealed, tmp_path / "merged-read")
    assert sealed_lines == read_lines
    assert sorted(sealed_lines) == sorted(r.to_json_line() for _s, r in written.values())
    for folder in ("base", "quiet"):
        name = f"{folder}/run-summary.jsonl"
        assert (tmp_path / "merged-sealed" / name).read_text(encoding="utf-8") == (
            tmp_path / "merged-read" / name
        ).read_text(encoding="utf-8"), name
    reports = [
        [
            line
            for line in (tmp_path / merged / "report.md").read_text(encoding="utf-8").splitlines()
            if not line.startswith("Rendered: ")
        ]
        for merged in ("merged-sealed", "merged-read")
    ]
    assert reports[0] == reports[1]


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as response:  # the test's own server
        assert response.status == 200
        return json.loads(response.read())


def test_ingest_stores_them_and_serve_returns_them(tmp_path: Path) -> None:
    pytest.importorskip("sqlalchemy", reason="needs the serve extra: pip install 'vally[serve]'")
    records, summaries = write_run_folder(tmp_path / "run")
    store = str(tmp_path / "history.db")
    done = vally("ingest", "run", "--store", store, cwd=tmp_path)
    assert done.code == 0, done.stdout + done.stderr
    assert "3 outcomes added" in done.stdout and "0 lines skipped" in done.stdout, done.stdout

    with Served("--store", store, cwd=tmp_path) as served:
        assert served.url, "".join(served.output)
        base = served.url.rstrip("/")
        run = _get(f"{base}/api/runs/{RUN}")
        assert run["run"]["trials"] == 3
        written = [s.to_json_dict() for s in summaries]
        # The run's summaries come without their per-stimulus lists, which a paged
        # endpoint serves in the same order.
        trimmed = [
            {
                **{k: v for k, v in w.items() if k != "stimuli"},
                "stimulusSummaries": len(w["stimuli"]),
            }
            for w in written
        ]
        shown = sorted(json.dumps(s, sort_keys=True) for s in run["summaries"])
        assert shown == sorted(json.dumps(t, sort_keys=True) for t in trimmed)
        paged = _get(f"{base}/api/runs/{RUN}/stimulus-summaries?limit=500")["stimulusSummaries"]
        by_eval = {w["evalName"]: w["stimuli"] for w in written}
        origin = ("evalName", "variant", "shard", "index")
        for entry in paged:
            assert {k: v for k, v in entry.items() if k not in origin} in by_eval[entry["evalName"]]
        assert len(paged) == sum(len(w["stimuli"]) for w in written)
        outcomes = _get(f"{base}/api/runs/{RUN}/outcomes")["outcomes"]
        assert sorted(o["trialId"] for o in outcomes) == ["trial-0", "trial-1", "trial-2"]
        for outcome in outcomes:
            original = next(r for r in records if r.trial_id == outcome["trialId"])
            expected = original.to_json_dict()
            detail = _get(f"{base}/api/outcomes/{outcome['id']}")
            events = _get(f"{base}/api/outcomes/{outcome['id']}/trajectory")["events"]
            record = detail["record"]
            if expected["trajectory"] is not None:
                expected_events = expected["trajectory"].pop("events")
                assert [{k: v for k, v in e.items() if k != "index"} for e in events] == (
                    expected_events
                )
                assert detail["eventCount"] == len(expected_events)
            assert record == expected
        assert served.stop() in (0, 130)
