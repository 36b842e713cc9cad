"""``vally compare`` checks its judge once before judging any pair, and fails fast."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.compare.records import record
from tests.compare.test_cli import is_preflight, runs, treatment_better
from tests.llm.chat_server import ChatServer, completion, error


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as chat:
        yield chat


def compare(
    base_url: str,
    base: Path,
    treat: Path,
    *args: str,
    cwd: Path,
    project: str = "llm: {max_retries: 0}\n",
) -> subprocess.CompletedProcess[str]:
    """``vally compare --baseline BASE --treatment TREAT ARGS...`` against ``base_url``, with
    ``project`` as the ``.vally.yaml``."""
    (cwd / ".vally.yaml").write_text(project)
    env = {**os.environ, "OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "sk-test"}
    env.pop("EVAL_JUDGE_MODEL", None)
    command = ["compare", "--baseline", str(base), "--treatment", str(treat), *args]
    return subprocess.run(
        [sys.executable, "-m", "vally", *command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error")]


def test_no_judge_model_compares_the_graded_runs_only(server: ChatServer, tmp_path: Path) -> None:
    base, treat = runs(tmp_path)
    proc = compare(server.base_url, base, treat, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Graded comparison:" in proc.stdout
    assert "No judged comparison (no judge model configured)" in proc.stdout
    assert error_lines(proc.stderr) == []
    assert server.requests == []


def test_judge_asked_for_without_a_model_is_one_error_and_no_request(
    server: ChatServer, tmp_path: Path
) -> None:
    base, treat = runs(tmp_path)
    proc = compare(server.base_url, base, treat, "--judge", cwd=tmp_path)
    assert proc.returncode == 1
    assert error_lines(proc.stderr) == ["error[VALLY_CONFIG]: no judge model for the comparison"]
    assert "--judge-model" in proc.stderr and "defaults: {judge_model: MODEL}" in proc.stderr
    assert "--eval-spec" not in proc.stderr  # standalone compare reads no spec defaults
    assert server.requests == []
    assert "Graded comparison:" not in proc.stdout  # the judge is checked before printing


SPEC_WITH_JUDGE = (
    "defaults:\n  executor: mock\n  judge_model: from-spec\n  judge_reasoning_effort: high\n"
    "  judge_timeout: 1s\nstimuli:\n  - name: a\n    prompt: do a\n"
)


def test_the_eval_specs_judge_settings_are_not_inherited(
    server: ChatServer, tmp_path: Path
) -> None:
    """Standalone compare takes no judge setting from ``--eval-spec``: with no judge of its
    own it compares the graded runs only, and says why the spec's judge was not used."""
    base, treat = runs(tmp_path, "a")
    spec = tmp_path / "eval.yaml"
    spec.write_text(SPEC_WITH_JUDGE)
    proc = compare(server.base_url, base, treat, "-e", str(spec), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "No judged comparison (no judge model configured)" in proc.stdout
    assert server.requests == []
    assert (
        "the --eval-spec file's judge settings (judge_model, judge_reasoning_effort, "
        "judge_timeout) are not used by vally compare" in proc.stderr
    )


def test_judge_asked_for_with_only_the_specs_judge_is_one_error(
    server: ChatServer, tmp_path: Path
) -> None:
    base, treat = runs(tmp_path, "a")
    spec = tmp_path / "eval.yaml"
    spec.write_text(SPEC_WITH_JUDGE)
    proc = compare(server.base_url, base, treat, "-e", str(spec), "--judge", cwd=tmp_path)
    assert proc.returncode == 1
    assert error_lines(proc.stderr) == ["error[VALLY_CONFIG]: no judge model for the comparison"]
    assert "--judge-model" in proc.stderr and "defaults: {judge_model: MODEL}" in proc.stderr
    assert "does not inherit the --eval-spec file's judge_model" in proc.stderr
    assert server.requests == []


def test_the_flags_judge_with_an_eval_spec_ignores_its_judge_settings(
    server: ChatServer, tmp_path: Path
) -> None:
    """``--judge-model`` sets the model; the spec's reasoning effort is not taken either."""
    server.default = lambda request: (
        completion("OK") if is_preflight(request) else treatment_better("", False)
    )
    base, treat = runs(tmp_path, "a")
    spec = tmp_path / "eval.yaml"
    spec.write_text(SPEC_WITH_JUDGE)
    proc = compare(
        server.base_url, base, treat, "-e", str(spec), "--judge-model", "flag-judge", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert {r.model for r in server.requests} == {"flag-judge"}
    assert all("reasoning_effort" not in r.body for r in server.requests)


def test_judge_model_from_the_project_file(server: ChatServer, tmp_path: Path) -> None:
    server.default = lambda request: (
        completion("OK") if is_preflight(request) else treatment_better("", False)
    )
    base, treat = runs(tmp_path, "a")
    project = "defaults: {judge_model: from-project}\nllm: {max_retries: 0}\n"
    proc = compare(server.base_url, base, treat, cwd=tmp_path, project=project)
    assert proc.returncode == 0, proc.stderr
    assert {r.model for r in server.requests} == {"from-project"}


def test_unauthorized_judge_is_one_error_after_one_request(
    server: ChatServer, tmp_path: Path
) -> None:
    server.default = error(401, "invalid api key")
    base, treat = runs(tmp_path)
    proc = compare(server.base_url, base, treat, "--judge-model", "j", cwd=tmp_path)
    assert proc.returncode == 1
    (line,) = error_lines(proc.stderr)
    assert line.startswith("error[VALLY_LLM]: the comparison judge (model 'j' at ")
    assert server.base_url in line and "invalid api key" in line
    assert "$OPENAI_API_KEY" in proc.stderr  # what to do
    assert len(server.requests) == 1 and is_preflight(server.requests[0])
    assert "vs" not in proc.stdout  # no pair was judged


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_unreachable_judge_is_one_error_in_bounded_time(tmp_path: Path) -> None:
    base, treat = runs(tmp_path)
    url = f"http://127.0.0.1:{closed_port()}/v1"
    started = time.monotonic()
    proc = compare(
        url,
        base,
        treat,
        "--judge-model",
        "j",
        cwd=tmp_path,
        project="llm: {timeout: 2s, max_retries: 1}\n",
    )
    elapsed = time.monotonic() - started
    assert proc.returncode == 1
    (line,) = error_lines(proc.stderr)
    assert url in line and "'j'" in line
    assert "is running and reachable" in proc.stderr
    assert "vs" not in proc.stdout
    assert elapsed < 20


def test_healthy_judge_costs_exactly_one_extra_request(server: ChatServer, tmp_path: Path) -> None:
    verdict = {"winner": "tie", "magnitude": None, "reasoning": "same"}
    server.default = lambda request: completion(json.dumps(verdict))
    lines = [record(s).to_json_line() + "\n" for s in "ab"]
    (tmp_path / "base.jsonl").write_text("".join(lines))
    (tmp_path / "treat.jsonl").write_text("".join(lines))
    proc = compare(
        server.base_url,
        tmp_path / "base.jsonl",
        tmp_path / "treat.jsonl",
        "--judge-model",
        "j",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Win rate: 0 W / 2 T / 0 L (0% wins over 2 pairs)" in proc.stdout
    preflight = [r for r in server.requests if is_preflight(r)]
    assert len(preflight) == 1 and preflight[0] is server.requests[0]
    assert preflight[0].body["max_tokens"] == 16
    assert len(server.requests) == 1 + 2 * 2  # two pairs, both orders
