"""``vally init``: a project that lints clean and runs offline right away, and never
overwrites files unless asked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

VALLY = [sys.executable, "-c", "from vally.cli.app import main; main()"]


def vally(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run(
        [*VALLY, *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=120
    )


def test_a_new_project_lints_and_runs_offline(tmp_path: Path) -> None:
    created = vally(["init", "demo"], tmp_path)
    assert created.returncode == 0, created.stderr
    project = tmp_path / "demo"
    assert "  evals/example/eval.yaml" in created.stdout and "  cd demo" in created.stdout
    assert (project / ".gitignore").read_text().startswith("vally-results/")
    linted = vally(["lint"], project)
    assert linted.returncode == 0, linted.stdout + linted.stderr
    assert "0 error(s), 0 warning(s) in 1 eval file(s)" in linted.stdout
    run = vally(["eval", "--require-pass"], project)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "4 trials: 4 passed, 0 failed, 0 errored" in run.stdout
    [results] = list((project / "vally-results").glob("*/results.jsonl"))
    records = [json.loads(line) for line in results.read_text().splitlines()]
    assert {r["stimulusName"] for r in records} == {"create-file", "add-numbers"}
    assert all(r["gradeResult"]["passed"] for r in records)


def test_init_never_overwrites_without_force(tmp_path: Path) -> None:
    (tmp_path / ".vally.yaml").write_text("paths: {evals: [mine]}\n", encoding="utf-8")
    (tmp_path / ".gitignore").write_text("node_modules/\n", encoding="utf-8")
    refused = vally(["init"], tmp_path)
    assert refused.returncode == 1
    assert "already has .vally.yaml" in refused.stderr and "--force" in refused.stderr
    assert (tmp_path / ".vally.yaml").read_text() == "paths: {evals: [mine]}\n"
    assert not (tmp_path / "evals").exists()
    forced = vally(["init", "--force"], tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert ".gitignore (kept as it was)" in forced.stdout
    assert (tmp_path / ".gitignore").read_text() == "node_modules/\n"
    assert "evals: [evals/]" in (tmp_path / ".vally.yaml").read_text()


def test_init_into_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x", encoding="utf-8")
    refused = vally(["init", "file"], tmp_path)
    assert refused.returncode == 1
    assert "is a file, not a folder" in refused.stderr
