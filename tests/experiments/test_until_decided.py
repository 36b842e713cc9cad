"""``vally experiment run --until-decided``: variants stop once the sequential test decides,
and the output says what was saved."""

from __future__ import annotations

from pathlib import Path

from .conftest import make_project, only_run_dir, read_jsonl, vally

EXPERIMENT = """
name: greet
evals: ["evals/*/eval.yaml"]
vary: [/defaults/executor/config/output]
baseline: base
variants:
  base: {}
  same:
    defaults:
      executor:
        config: {output: "hello there {prompt}"}
  quiet:
    defaults:
      executor:
        config: {output: "bye {prompt}"}
"""


def test_variants_stop_once_decided(tmp_path: Path) -> None:
    make_project(tmp_path, runs=10, experiment=EXPERIMENT)
    res = vally(
        "experiment",
        "run",
        "experiment.yaml",
        "--output-dir",
        "out",
        "--until-decided",
        "--workers",
        "1",
        cwd=tmp_path,
        timeout=300,
    )
    assert res.code == 0, res.text
    run_dir = only_run_dir(tmp_path / "out")
    counts = {v: len(read_jsonl(run_dir / v / "results.jsonl")) for v in ("base", "same", "quiet")}
    # quiet fails every pair: E = 2^8 / 9 >= 20 after 8 pairs (4 rounds of 2 stimuli).
    assert counts["quiet"] == 8
    # same ties every pair: after 13 pairs, 7 straight wins could not reach 20 (2^7 / 8).
    # With one worker, round 7 runs base/alpha, base/beta, then same/alpha (the 13th pair,
    # which makes same futile), so same/beta and quiet's round never start.
    assert counts["same"] == 13
    assert counts["base"] == 14
    assert "quiet: worse after 8 of 20 pairs (0 wins, 8 losses, 0 ties" in res.stdout
    assert "same: no decision (cannot be decided within the planned trials)" in res.stdout
    saved = 60 - sum(counts.values())
    assert f"Saved {saved} of 60 planned trials" in res.stdout
    quiet = read_jsonl(run_dir / "quiet" / "results.jsonl")
    assert sorted({r["trialIndex"] for r in quiet}) == [0, 1, 2, 3]


def test_until_decided_refuses_shards(tmp_path: Path) -> None:
    make_project(tmp_path, runs=2, experiment=EXPERIMENT)
    res = vally(
        "experiment",
        "run",
        "experiment.yaml",
        "--until-decided",
        "--shard",
        "1/2",
        "--run-id",
        "r",
        cwd=tmp_path,
    )
    assert res.code == 1 and "--until-decided cannot be combined with --shard" in res.stderr
