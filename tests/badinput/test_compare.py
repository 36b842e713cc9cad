"""Bad input to ``vally compare``: no tracebacks, clear messages, checks before judging."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.badinput.conftest import vally


def compare_with_itself(
    run: str | Path, *args: str, cwd: Path
) -> subprocess.CompletedProcess[str]:
    """``vally compare --baseline RUN --treatment RUN ARGS...``."""
    return vally("compare", "--baseline", run, "--treatment", run, *args, cwd=cwd)


@pytest.fixture
def eval_run(project: Path) -> Path:
    """A finished ``vally eval`` run directory."""
    result = vally("eval", "-e", "eval.yaml", "--output-dir", "runs", cwd=project)
    assert result.returncode == 0, result.stderr
    (run,) = (project / "runs").iterdir()
    return run


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"[1, 2]\n", "holds a JSON list, not a trial record object"),
        (b"\xff\xfe\n", "is not UTF-8 text"),
        (b'{"broken\n', "not JSON"),
    ],
)
def test_bad_results_lines_are_clear_errors(project: Path, content: bytes, expected: str) -> None:
    (project / "bad.jsonl").write_bytes(content)
    result = compare_with_itself("bad.jsonl", cwd=project)
    assert result.returncode == 1
    assert "bad.jsonl" in result.stderr and expected in result.stderr


def test_results_path_that_is_a_folder(project: Path) -> None:
    (project / "r" / "results.jsonl").mkdir(parents=True)
    result = compare_with_itself("r", cwd=project)
    assert result.returncode == 1
    assert "is not a file" in result.stderr


def test_empty_results_file_says_there_are_no_trials(project: Path) -> None:
    (project / "empty.jsonl").write_text("")
    result = compare_with_itself("empty.jsonl", cwd=project)
    assert result.returncode == 1
    assert "no trial records in empty.jsonl" in result.stderr


def test_output_under_a_file_fails_before_judging(project: Path, eval_run: Path) -> None:
    result = compare_with_itself(eval_run, "--output", "afile/out.jsonl", cwd=project)
    assert result.returncode == 1
    assert "afile is a file" in result.stderr
    assert "vs" not in result.stdout  # nothing was judged


def test_output_that_is_a_folder(project: Path, eval_run: Path) -> None:
    result = compare_with_itself(eval_run, "--output", ".", cwd=project)
    assert result.returncode == 1
    assert "is a directory" in result.stderr


def test_zero_judge_timeout(project: Path, eval_run: Path) -> None:
    result = compare_with_itself(eval_run, "--judge-timeout", "0s", cwd=project)
    assert result.returncode == 1
    assert "--judge-timeout must be longer than zero" in result.stderr


def test_eval_run_given_as_experiment_directory_gets_a_hint(project: Path, eval_run: Path) -> None:
    result = vally("compare", eval_run, cwd=project)
    assert result.returncode == 1
    assert "looks like a 'vally eval' run directory" in result.stderr
    assert "--baseline" in result.stderr


def test_experiment_directory_given_as_baseline_gets_a_hint(project: Path) -> None:
    exp = project / "exp"
    for variant in ("a", "b"):
        (exp / variant).mkdir(parents=True)
        (exp / variant / "results.jsonl").write_text(json.dumps({"type": "other"}) + "\n")
    result = vally("compare", "--baseline", "exp", "--treatment", "exp", cwd=project)
    assert result.returncode == 1
    assert "looks like an experiment directory (variants: a, b)" in result.stderr


def test_experiment_directory_that_is_a_file(project: Path) -> None:
    result = vally("compare", "afile", cwd=project)
    assert result.returncode == 1
    assert "is a file, not a directory" in result.stderr
