"""Bad input to ``vally experiment run`` and ``vally experiment merge``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.badinput.conftest import EVAL_YAML, EXPERIMENT_YAML, vally


@pytest.fixture
def exp(tmp_path: Path) -> Path:
    """An experiment folder: two variants over one mock eval."""
    (tmp_path / "demo.eval.yaml").write_text(EVAL_YAML, encoding="utf-8")
    (tmp_path / "experiment.yaml").write_text(EXPERIMENT_YAML, encoding="utf-8")
    (tmp_path / "afile").write_text("x\n")
    return tmp_path


@pytest.fixture
def shards(exp: Path) -> tuple[Path, Path]:
    """The two finished shard directories of run ``r1``."""
    for index in (1, 2):
        result = vally(
            "experiment",
            "run",
            "experiment.yaml",
            "--shard",
            f"{index}/2",
            "--run-id",
            "r1",
            "--output-dir",
            "sh",
            cwd=exp,
        )
        assert result.returncode == 0, result.stderr
    return exp / "sh/r1/shard-1-of-2", exp / "sh/r1/shard-2-of-2"


def test_experiment_file_that_is_a_folder(exp: Path) -> None:
    result = vally("experiment", "run", ".", cwd=exp)
    assert result.returncode == 1
    assert "is a folder, not a file" in result.stderr


def test_bad_judge_timeout_fails_before_any_trial(exp: Path) -> None:
    for value, expected in (("abc", "cannot read 'abc'"), ("0s", "longer than zero")):
        result = vally(
            "experiment",
            "run",
            "experiment.yaml",
            "--compare",
            "--judge-timeout",
            value,
            "--output-dir",
            "out",
            cwd=exp,
        )
        assert result.returncode == 1
        assert expected in result.stderr
    assert not (exp / "out").exists()


def test_workspace_that_is_a_file(exp: Path) -> None:
    result = vally(
        "experiment",
        "run",
        "experiment.yaml",
        "--workspace",
        "afile",
        "--output-dir",
        "o",
        cwd=exp,
    )
    assert result.returncode == 1
    assert "--workspace afile" in result.stderr and not (exp / "o").exists()


def test_duplicate_stimulus_names_fail_before_running(exp: Path) -> None:
    (exp / "dup.eval.yaml").write_text(
        "name: dup\ndefaults: {runs: 1, executor: {name: mock}}\n"
        "stimuli:\n  - {name: a, prompt: one}\n  - {name: a, prompt: two}\n"
    )
    result = vally("experiment", "run", "experiment.yaml", "--output-dir", "o", cwd=exp)
    assert result.returncode == 1
    assert "stimuli[1] is named 'a'" in result.stderr and not (exp / "o").exists()


def test_merge_into_a_shard_directory_is_refused_and_keeps_the_shard(
    exp: Path, shards: tuple[Path, Path]
) -> None:
    first, second = shards
    before = {p: p.read_bytes() for p in first.rglob("results.jsonl")}
    for target in (first, second / "sub"):
        result = vally("experiment", "merge", first, second, "-o", target, cwd=exp)
        assert result.returncode == 1
        assert "is inside shard directory" in result.stderr
    assert {p: p.read_bytes() for p in first.rglob("results.jsonl")} == before
    result = vally("experiment", "merge", first, second, "-o", "merged", cwd=exp)
    assert result.returncode == 0, result.stderr


def test_merge_of_the_run_folder_names_its_shards(exp: Path, shards: tuple[Path, Path]) -> None:
    result = vally("experiment", "merge", "sh/r1", "-o", "m", cwd=exp)
    assert result.returncode == 1
    assert "holding shard directories" in result.stderr
    assert "shard-1-of-2" in result.stderr and "shard-2-of-2" in result.stderr


def test_merge_of_a_file_says_it_is_a_file(exp: Path, shards: tuple[Path, Path]) -> None:
    result = vally("experiment", "merge", "afile", shards[1], "-o", "m", cwd=exp)
    assert result.returncode == 1
    assert "is a file, not a directory" in result.stderr


def test_merge_notices_a_lost_results_file(exp: Path, shards: tuple[Path, Path]) -> None:
    first, second = shards
    lost = next(p for p in first.rglob("results.jsonl") if p.read_text().strip())
    lost.unlink()
    result = vally("experiment", "merge", first, second, "-o", "m", cwd=exp)
    assert result.returncode == 1
    assert "do not hold" in result.stderr and "shard 1/2" in result.stderr


def test_merge_twice_and_one_shard(exp: Path, shards: tuple[Path, Path]) -> None:
    first, _ = shards
    twice = vally("experiment", "merge", first, first, "-o", "m", cwd=exp)
    assert twice.returncode == 1 and "given twice" in twice.stderr
    one = vally("experiment", "merge", first, "-o", "m", cwd=exp)
    assert one.returncode == 1 and "missing shard(s): 2/2" in one.stderr
