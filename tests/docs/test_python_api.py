"""The Python API page runs as documented: every ```python block of docs/python-api.md is
executed as a script in a copy of the documented files, and what it prints is checked."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.test_examples_run import _copy_docs_tree

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "python-api.md"


def python_blocks(markdown: str) -> list[str]:
    """The bodies of the fenced ```python blocks of a markdown text."""
    return re.findall(r"^```python\n(.*?)^```", markdown, flags=re.DOTALL | re.MULTILINE)


def run_block(block: str, cwd: Path) -> str:
    result = subprocess.run(
        [sys.executable, "-c", block],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, f"block failed:\n{block}\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _copy_docs_tree(tmp_path_factory.mktemp("python-api"))


def test_page_has_the_five_examples() -> None:
    assert len(python_blocks(PAGE.read_text(encoding="utf-8"))) == 5


def test_eval_example_returns_records_and_writes_the_run_folder(tree: Path) -> None:
    out = run_block(python_blocks(PAGE.read_text(encoding="utf-8"))[0], tree)
    assert "quickstart: verdict pass" in out
    # runs: 2 over three stimuli: six records, each printed with its trial id and status.
    assert len(re.findall(r"^quickstart/\S+ success True$", out, flags=re.M)) == 6
    run_dir = Path(out.strip().splitlines()[-1].removeprefix("run folder: "))
    assert (run_dir / "results.jsonl").read_text(encoding="utf-8").count("\n") == 6
    assert (run_dir / "run-summary.jsonl").is_file() and (run_dir / "report.md").is_file()


def test_experiment_example_returns_records_of_every_variant(tree: Path) -> None:
    out = run_block(python_blocks(PAGE.read_text(encoding="utf-8"))[1], tree)
    assert out.strip() == "{'plain': 4, 'terse': 4}"


def test_run_api_example_writes_only_the_chosen_reporter(tree: Path) -> None:
    out = run_block(python_blocks(PAGE.read_text(encoding="utf-8"))[2], tree)
    # The quickstart runs three stimuli three times (its runs: 3).
    assert out.splitlines() == ["9 trials planned", "9 passed"]
    written = sorted(p.name for p in (tree / "api-run").iterdir() if p.is_file())
    assert written == ["results.jsonl", "run-plan.json", "run-summary.jsonl"]


def test_export_example_writes_a_harbor_task(tree: Path) -> None:
    out = run_block(python_blocks(PAGE.read_text(encoding="utf-8"))[3], tree)
    files = ["environment/Dockerfile", "instruction.md", "task.toml", "tests/test.sh"]
    assert out.strip() == str(files)
    assert (tree / "harbor-tasks" / "hello-file" / "tests" / "test.sh").is_file()


def test_reading_a_run_example_reads_the_records_and_summaries(tree: Path) -> None:
    pytest.importorskip("pandas")
    out = run_block(python_blocks(PAGE.read_text(encoding="utf-8"))[4], tree)
    lines = out.strip().splitlines()
    assert lines[0] == "9 records, 1 summary"  # three stimuli, three runs each
    assert lines[1] == "{'add-numbers': 1.0, 'create-file': 1.0, 'nested-file': 1.0}"
