"""``vally experiment run --until-decided``: variants stop once the sequential test decides,
and the output says what was saved."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tests.compare.records import record
from vally.contracts.protocols import TrialKey
from vally_compare.sequential_gate import SequentialGate

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
    assert (
        "quiet: worse after 8 of 20 planned pairs (0 wins + 8 losses + 0 ties = 8 pairs tested"
        in res.stdout
    )
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


def _planned(variant: str, stimulus: str, trial: int) -> Any:
    return SimpleNamespace(key=TrialKey(variant, "ev", stimulus, "m", trial))


def _finished(variant: str, stimulus: str, trial: int, passed: bool) -> Any:
    return record(stimulus, trial, passed=passed).model_copy(update={"variant": variant})


def test_pairs_finished_after_the_decision_are_labelled_apart() -> None:
    stimuli = [f"s{i}" for i in range(4)]
    plan = [_planned(v, s, t) for v in ("base", "worse") for t in range(3) for s in stimuli]
    gate = SequentialGate("base", plan)
    # the baseline passes everything, the variant fails everything: worse after 8 pairs
    for t in range(3):
        for s in stimuli:
            gate.observe(_finished("base", s, t, True))
    for t in range(3):
        for s in stimuli:
            gate.observe(_finished("worse", s, t, False))  # 4 of these finish after it
    state = gate.variants["worse"].state
    assert state.status == "worse"
    assert state.wins + state.losses + state.ties == gate.variants["worse"].observed == 8
    line = next(line for line in gate.lines() if line.startswith("  worse:"))
    assert (
        "worse after 8 of 12 planned pairs (0 wins + 8 losses + 0 ties = 8 pairs tested; "
        "4 more finished after the decision and were not counted;" in line
    ), line


def test_a_trial_seen_twice_pairs_once() -> None:
    plan = [_planned(v, "s0", 0) for v in ("base", "t")]
    gate = SequentialGate("base", plan)
    gate.observe(_finished("t", "s0", 0, True))
    gate.observe(_finished("base", "s0", 0, True))
    gate.observe(_finished("base", "s0", 0, True))
    monitored = gate.variants["t"]
    assert monitored.observed == 1
    assert monitored.state.ties == 1
