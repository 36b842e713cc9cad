"""Plugin authors who type-check strictly can import everything from the top-level package."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PLUGIN = """
from vally import (
    BaseGrader, GradeContext, GraderMetadata, GraderResult, KindRegistrar, Registrar,
    StrictConfig, Trajectory,
)


class Config(StrictConfig):
    word: str


class MyGrader(BaseGrader[Config]):
    metadata = GraderMetadata(name="my", description="d")
    Config = Config

    async def grade(self, context: GradeContext) -> GraderResult:
        trajectory: Trajectory = context.trajectory
        return self.result(context, passed=self.config.word in trajectory.output, evidence="x")


def register(registrar: Registrar) -> None:
    registrar.grader(MyGrader)


def register_graders(registry: KindRegistrar) -> None:
    registry.register(MyGrader)
"""


def strict_mypy(cwd: Path, *targets: str) -> subprocess.CompletedProcess[str]:
    """``mypy --strict`` over ``targets`` as a plugin author runs it: no project config, the
    kernel found from its source root (core/ holds the package vally)."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-incremental",
            "--config-file",
            os.devnull,
            *targets,
        ],
        cwd=cwd,
        env={**os.environ, "MYPYPATH": str(REPO / "core")},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_public_api_passes_mypy_strict(tmp_path: Path) -> None:
    (tmp_path / "my_plugin.py").write_text(PLUGIN, encoding="utf-8")
    example = REPO / "plugins/examples/vally-word-count-grader/src/vally_word_count_grader"
    proc = strict_mypy(tmp_path, "my_plugin.py", str(example))
    assert proc.returncode == 0, proc.stdout + proc.stderr


CREATION = """
from typing import assert_type

from vally import Backend, EvalProvider, Executor, Grader, LLMProvider, Session, ShardStrategy

session = Session()
assert_type(session.create("backend", "local"), Backend)
assert_type(session.create("executor", "mock", {}), Executor)
assert_type(session.create("grader", "output-contains", {"text": "x"}), Grader)
assert_type(session.create("eval_provider", "yaml"), EvalProvider)
assert_type(session.create("shard_strategy", "round-robin"), ShardStrategy)
assert_type(session.create("llm_provider", "openai"), LLMProvider)
assert_type(session.create("reporter", "jsonl"), object)
wrong: Backend = session.create("executor", "mock")
"""


@pytest.mark.slow
def test_session_create_is_typed_per_kind(tmp_path: Path) -> None:
    (tmp_path / "creation.py").write_text(CREATION, encoding="utf-8")
    proc = strict_mypy(tmp_path, "creation.py")
    # Every assert_type holds; only the deliberate mismatch on the last line is reported.
    errors = [line for line in proc.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1, proc.stdout + proc.stderr
    assert "creation.py:14" in errors[0] and "Executor" in errors[0] and "Backend" in errors[0]
