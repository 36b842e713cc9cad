"""What an experiment measured: its variants share the ``suiteHash`` (and each case its
``caseHash``) unless a variant changes the stimuli or graders, each summary names its
target, and a merge of shards, sealed or not, keeps all of it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from vally.engine.planning.variants import content_hash
from vally_experiment.seal import SEAL_FILE

from .conftest import make_project, only_run_dir, read_jsonl, vally
from .test_shards import RUN_ID, run_shard

HEX16 = re.compile(r"[0-9a-f]{16}")
IDENTITY = ("evalHash", "suiteHash", "graders", "target")

GRADER_MATRIX = """
name: graders
evals: ["evals/*/eval.yaml"]
matrix:
  check:
    path: /graders
    values:
      loose: [{type: output-contains, config: {substring: hello}}]
      strict: [{type: output-contains, config: {substring: hello a}}]
baseline: {check: loose}
"""


def _summaries(folder: Path, variants: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    out = {}
    for variant in variants:
        (summary,) = read_jsonl(folder / variant / "run-summary.jsonl")
        out[variant] = summary
    return out


def _identity(summary: dict[str, Any]) -> dict[str, Any]:
    return {key: summary[key] for key in IDENTITY}


def test_the_variants_share_the_suite_and_differ_in_their_target(project: Path) -> None:
    res = vally("experiment", "run", "experiment.yaml", "--output-dir", "out", cwd=project)
    assert res.code == 0, res.text
    run_dir = only_run_dir(project / "out")
    summaries = _summaries(run_dir, ("base", "quiet"))
    base, quiet = summaries["base"], summaries["quiet"]
    assert HEX16.fullmatch(base["suiteHash"]) and base["suiteHash"] == quiet["suiteHash"]
    assert base["evalHash"] == quiet["evalHash"]
    assert base["target"] == {
        "executor": "mock",
        "configDigest": content_hash({"output": "hello {prompt}"}),
        "model": None,
        "variant": "base",
    }
    assert quiet["target"] == {
        "executor": "mock",
        "configDigest": content_hash({"output": "bye {prompt}"}),
        "model": None,
        "variant": "quiet",
    }
    grader = {"name": "output-contains", "type": "output-contains", "judged": False, "model": None}
    assert base["graders"] == quiet["graders"] == [grader]
    cases = {
        variant: {
            record["stimulusName"]: record["caseHash"]
            for record in read_jsonl(run_dir / variant / "results.jsonl")
        }
        for variant in ("base", "quiet")
    }
    assert cases["base"] == cases["quiet"] and len(set(cases["base"].values())) == 2
    # The eval hash is the one a plain run of the same file records.
    plain = vally("eval", "-e", "evals/one/eval.yaml", "--output-dir", "plain", cwd=project)
    assert plain.code == 0, plain.text
    (summary,) = read_jsonl(only_run_dir(project / "plain") / "run-summary.jsonl")
    assert summary["evalHash"] == base["evalHash"]
    assert summary["suiteHash"] == base["suiteHash"]
    assert summary["target"] == {**base["target"], "variant": None}


def test_a_variant_that_changes_the_graders_changes_the_suite_hash(tmp_path: Path) -> None:
    make_project(tmp_path, experiment=GRADER_MATRIX)
    res = vally("experiment", "run", "experiment.yaml", "--output-dir", "out", cwd=tmp_path)
    assert res.code == 0, res.text
    run_dir = only_run_dir(tmp_path / "out")
    loose, strict = _summaries(run_dir, ("check=loose", "check=strict")).values()
    assert loose["suiteHash"] != strict["suiteHash"]
    assert loose["evalHash"] == strict["evalHash"]  # one eval as written
    assert loose["target"]["configDigest"] == strict["target"]["configDigest"]


def test_a_merged_sharded_experiment_keeps_what_it_measured(tmp_path: Path) -> None:
    make_project(tmp_path, evals=("one",), runs=2)
    shards = [run_shard(tmp_path, index, 2) for index in (1, 2)]
    snapshot = json.loads((shards[0] / "plan-snapshot.json").read_text())
    assert all(HEX16.fullmatch(item["suiteHash"]) for item in snapshot["evals"])
    full = vally(
        "experiment",
        "run",
        "experiment.yaml",
        "--run-id",
        RUN_ID,
        "--output-dir",
        "full",
        cwd=tmp_path,
    )
    assert full.code == 0, full.text
    full_dir = only_run_dir(tmp_path / "full")
    expected = {v: _identity(s) for v, s in _summaries(full_dir, ("base", "quiet")).items()}
    assert expected["base"]["suiteHash"] == expected["quiet"]["suiteHash"]
    for shard in shards:
        partial = _summaries(shard, ("base", "quiet"))
        assert {v: _identity(s) for v, s in partial.items()} == expected

    sealed = vally("experiment", "merge", *map(str, shards), "-o", "sealed", cwd=tmp_path)
    assert sealed.code == 0, sealed.text
    unsealed_dirs = []
    for shard in shards:
        copy = tmp_path / "unsealed" / RUN_ID / shard.name
        shutil.copytree(shard, copy)
        (copy / SEAL_FILE).unlink()
        unsealed_dirs.append(copy)
    unsealed = vally("experiment", "merge", *map(str, unsealed_dirs), "-o", "read", cwd=tmp_path)
    assert unsealed.code == 0, unsealed.text
    for merged in ("sealed", "read"):
        summaries = _summaries(tmp_path / merged, ("base", "quiet"))
        assert {v: _identity(s) for v, s in summaries.items()} == expected, merged
        records = read_jsonl(tmp_path / merged / "base" / "results.jsonl")
        assert len(records) == 4 and all(HEX16.fullmatch(r["caseHash"]) for r in records)
