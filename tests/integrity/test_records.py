"""Records survive a killed writer and refuse to be counted twice (issue 17, cases 9, 10).

A writer killed mid-line leaves a torn last line: every reader (``vally grade``,
``vally compare``'s loader, ``vally experiment merge``) skips it with a warning and keeps the
lines before it. A shard whose records are duplicated is refused by merge.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.experiments.conftest import make_project, vally as vally_experiment
from tests.integrity.conftest import vally
from vally.engine.records.run_folder import load_records
from vally.errors import ConfigError

RUN_ID = "4d2e7b63-1e9f-4c9f-8d2f-7a3b2c8d0e21"


def _tear(results: Path) -> int:
    """Append half of a copy of the first record, without a line end (what a SIGKILL in
    the middle of a write leaves); return the number of complete records."""
    lines = results.read_text(encoding="utf-8").splitlines(keepends=True)
    with results.open("a", encoding="utf-8") as handle:
        handle.write(lines[0][: len(lines[0]) // 2])
    return len(lines)


def _shards(root: Path, total: int = 2) -> list[Path]:
    make_project(root, runs=2)
    shards = []
    for index in range(1, total + 1):
        done = vally_experiment(
            "experiment",
            "run",
            "experiment.yaml",
            "--shard",
            f"{index}/{total}",
            "--run-id",
            RUN_ID,
            "--output-dir",
            "out",
            cwd=root,
        )
        assert done.code == 0, done.text
        shards.append(root / "out" / RUN_ID / f"shard-{index}-of-{total}")
    return shards


def test_readers_skip_a_torn_last_line_and_keep_the_rest(tmp_path: Path) -> None:
    make_project(tmp_path)
    done = vally("eval", "-e", "evals/one/eval.yaml", "--output-dir", "out", cwd=tmp_path)
    assert done.code == 0, done.stderr
    results = next((tmp_path / "out").iterdir()) / "results.jsonl"
    complete = _tear(results)

    warnings: list[str] = []
    records = load_records(results, warnings.append)  # what vally compare reads with
    assert len(records) == complete
    assert len(warnings) == 1 and f"{results}:{complete + 1}" in warnings[0]
    assert "incomplete" in warnings[0]

    graded = vally(
        "grade",
        "-e",
        "evals/one/eval.yaml",
        "--output",
        "jsonl",
        cwd=tmp_path,
        stdin=results.read_bytes(),
    )
    assert graded.code == 0, graded.stderr
    assert len(graded.stdout.splitlines()) == complete
    assert f"line {complete + 1} is incomplete" in graded.stderr


def test_a_bad_line_that_is_not_the_torn_last_one_is_still_an_error(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    results.write_text('{"type": "trial-result"\n{}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"results.jsonl:1: not JSON"):
        load_records(results, lambda _: None)


def test_a_writer_ends_a_torn_line_before_appending(tmp_path: Path) -> None:
    from vally.contracts.events import RunInfo
    from vally_builtin.reporters.jsonl import JsonlReporter

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "results.jsonl").write_text('{"type": "trial-res', encoding="utf-8")
    reporter = JsonlReporter()
    reporter.vally_run_start(
        RunInfo(run_id="r", command="eval", run_dir=run_dir, planned_trials=0, started_at="now")
    )
    reporter.close()
    assert (run_dir / "results.jsonl").read_text(encoding="utf-8") == '{"type": "trial-res\n'


def test_merge_skips_a_torn_last_line_of_a_shard(tmp_path: Path) -> None:
    shards = _shards(tmp_path)
    _tear(shards[0] / "base" / "results.jsonl")
    merged = vally_experiment(
        "experiment", "merge", *map(str, shards), "-o", "merged", cwd=tmp_path
    )
    assert merged.code == 0, merged.text
    assert "incomplete" in merged.stderr
    lines = (tmp_path / "merged" / "base" / "results.jsonl").read_text().splitlines()
    assert len(lines) == 4


def test_merge_refuses_a_shard_whose_records_are_duplicated(tmp_path: Path) -> None:
    shards = _shards(tmp_path)
    results = shards[0] / "base" / "results.jsonl"
    text = results.read_text(encoding="utf-8")
    results.write_text(text + text, encoding="utf-8")
    first_key = json.loads(text.splitlines()[0])["trialId"]
    merged = vally_experiment(
        "experiment", "merge", *map(str, shards), "-o", "merged", cwd=tmp_path
    )
    assert merged.code != 0
    assert "more than once" in merged.stderr
    assert first_key.split("/")[1] in merged.stderr  # names the trial
    assert not (tmp_path / "merged" / "base" / "results.jsonl").exists()


def test_merge_refuses_a_record_repeated_in_another_variant_file(tmp_path: Path) -> None:
    shards = _shards(tmp_path)
    base = shards[1] / "base" / "results.jsonl"
    quiet = shards[1] / "quiet" / "results.jsonl"
    with quiet.open("a", encoding="utf-8") as handle:
        handle.write(base.read_text(encoding="utf-8").splitlines()[0] + "\n")
    merged = vally_experiment(
        "experiment", "merge", *map(str, shards), "-o", "merged", cwd=tmp_path
    )
    assert merged.code != 0 and "more than once" in merged.stderr
