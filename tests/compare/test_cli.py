"""`vally compare` end to end: a real subprocess against a Chat Completions server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.compare.records import record
from tests.llm.chat_server import ChatServer, completion, error
from vally.models import ExperimentBlock, TrialResultRecord
from vally_compare.judge_preflight import PREFLIGHT_PROMPT


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as chat:
        yield chat


def write(path: Path, records: list[TrialResultRecord]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(r.to_json_line() + "\n" for r in records))
    return path


def vally(server: ChatServer, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # The provider does not retry by itself here: compare's own retries are under test.
    (cwd / ".vally.yaml").write_text("llm:\n  max_retries: 0\n")
    env = {**os.environ, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-test"}
    env.pop("EVAL_JUDGE_MODEL", None)
    return subprocess.run(
        [sys.executable, "-m", "vally", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def compare_pair(
    server: ChatServer, base: Path, treat: Path, *args: str, cwd: Path
) -> subprocess.CompletedProcess[str]:
    """``vally compare --baseline BASE --treatment TREAT ARGS...``."""
    return vally(
        server, "compare", "--baseline", str(base), "--treatment", str(treat), *args, cwd=cwd
    )


def judge(decide: Callable[[str, bool], Any]) -> Callable[[Any], Any]:
    """A responder: decide(stimulus task text, treatment_is_A) -> Reply."""

    def respond(request: Any) -> Any:
        first = request.messages[1]["content"]
        return decide(first, "Response A: run-2" in first)

    return respond


def is_preflight(request: Any) -> bool:
    """True for the judge check ``vally compare`` sends before judging any pair."""
    return bool(request.messages) and request.messages[-1]["content"] == PREFLIGHT_PROMPT


def treatment_better(first: str, treatment_is_a: bool) -> Any:
    winner = "A" if treatment_is_a else "B"
    return completion(json.dumps({"winner": winner, "magnitude": "much", "reasoning": "r"}))


def treatment_worse(first: str, treatment_is_a: bool) -> Any:
    winner = "B" if treatment_is_a else "A"
    return completion(json.dumps({"winner": winner, "magnitude": "much", "reasoning": "r"}))


def runs(tmp_path: Path, names: str = "abc") -> tuple[Path, Path]:
    base = write(tmp_path / "base.jsonl", [record(s, passed=True) for s in names])
    treat = write(tmp_path / "treat.jsonl", [record(s, passed=s != "a") for s in names])
    return base, treat


def test_complete_comparison_exit_0_and_output(server: ChatServer, tmp_path: Path) -> None:
    server.default = judge(treatment_better)
    base, treat = runs(tmp_path)
    out = tmp_path / "cmp.jsonl"
    proc = compare_pair(
        server, base, treat, "--judge-model", "judge-1", "--output", str(out), cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert "Win rate: 3 W / 0 T / 0 L" in proc.stdout
    assert "Mean score: +1.00" in proc.stdout and "(3 stimuli, 3 pairs)" in proc.stdout
    assert "McNemar: 1 pass→fail, 0 fail→pass" in proc.stdout
    rec = json.loads(out.read_text())
    assert rec["status"] == "complete" and rec["judgedPairs"] == 3
    assert {t["trialIndex"] for t in rec["trials"]} == {0}
    assert all(server.requests[i].model == "judge-1" for i in range(len(server.requests)))
    # 3 pairs judged in both orders, plus the one pre-flight request sent first.
    assert len(server.requests) == 7
    assert [r for r in server.requests if is_preflight(r)] == server.requests[:1]


def test_one_pair_failing_every_retry_is_partial(server: ChatServer, tmp_path: Path) -> None:
    def decide(first: str, treatment_is_a: bool) -> Any:
        if "do b" in first:
            return error(500, "backend exploded")
        return treatment_better(first, treatment_is_a)

    server.default = judge(decide)
    base, treat = runs(tmp_path)
    out = tmp_path / "cmp.jsonl"
    proc = compare_pair(
        server, base, treat, "--judge-model", "j", "--output", str(out), cwd=tmp_path
    )
    assert proc.returncode == 1
    assert "⚠ Judged 2 of 3 matched pairs — 1 failed during judging." in proc.stdout
    assert "cover only the 2 judged pairs" in proc.stdout
    assert "(2 stimuli, 2 pairs)" in proc.stdout
    rec = json.loads(out.read_text())
    failed = [t for t in rec["trials"] if t["errored"]]
    assert len(failed) == 1 and failed[0]["stimulus"] == "b"
    assert failed[0]["failure"]["errorClass"] == "server"
    assert failed[0]["failure"]["retryable"] is True and failed[0]["failure"]["attempts"] == 3
    assert "sk-test" not in out.read_text() + proc.stdout + proc.stderr


def test_every_pair_failing_prints_no_statistics(server: ChatServer, tmp_path: Path) -> None:
    def decide(first: str, treatment_is_a: bool) -> Any:
        return error(401, "bad key")

    server.default = lambda request: (
        completion("OK") if is_preflight(request) else judge(decide)(request)
    )
    base, treat = runs(tmp_path)
    proc = compare_pair(server, base, treat, "--judge-model", "j", cwd=tmp_path)
    assert proc.returncode == 1
    assert "No statistics available — every matched pair failed" in proc.stdout
    assert "Win rate" not in proc.stdout


def test_fail_on_regression(server: ChatServer, tmp_path: Path) -> None:
    server.default = judge(treatment_worse)
    base, treat = runs(tmp_path, "abcdef")
    assert compare_pair(server, base, treat, "--judge-model", "j", cwd=tmp_path).returncode == 0
    gated = compare_pair(
        server, base, treat, "--judge-model", "j", "--fail-on-regression", cwd=tmp_path
    )
    assert gated.returncode == 1
    assert "Significant regression" in gated.stdout


def test_experiment_mode_uses_recorded_baseline(server: ChatServer, tmp_path: Path) -> None:
    server.default = judge(treatment_better)
    run_dir = tmp_path / "exp" / "2026-01-01T00-00-00-000Z"
    for variant in ("control", "skills", "model-b"):
        records = []
        for s in "ab":
            r = record(s)
            r.experiment = ExperimentBlock(
                run_id="r",
                experiment="x",
                variant=variant,
                eval_hash="e",
                config_hash=variant,
                baseline="control",
            )
            records.append(r)
        write(run_dir / variant / "results.jsonl", records)
    proc = vally(server, "compare", str(run_dir), "--judge-model", "j", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "━━━ model-b vs control ━━━" in proc.stdout
    assert "━━━ skills vs control ━━━" in proc.stdout
    bad = vally(server, "compare", str(run_dir), "--baseline-variant", "nope", cwd=tmp_path)
    assert bad.returncode == 1 and "nope" in bad.stderr


def test_usage_errors(server: ChatServer, tmp_path: Path) -> None:
    base, treat = runs(tmp_path)
    both = vally(server, "compare", str(tmp_path), "--baseline", str(base), cwd=tmp_path)
    assert both.returncode == 2
    neither = vally(server, "compare", "--baseline", str(base), cwd=tmp_path)
    assert neither.returncode == 2
    missing = compare_pair(server, tmp_path / "x.jsonl", treat, cwd=tmp_path)
    assert missing.returncode == 1 and "no results" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_eval_spec_overrides_rubric_and_warns_about_ignored_evidence(
    server: ChatServer, tmp_path: Path
) -> None:
    server.default = judge(treatment_better)
    base, treat = runs(tmp_path, "a")
    spec = tmp_path / "eval.yaml"
    spec.write_text(
        "defaults: {executor: mock}\nstimuli:\n  - name: a\n    prompt: do a\n"
        "    rubric: [OVERRIDDEN-RUBRIC-LINE]\n"
        "    graders: [{type: prompt, config: {evidence: [diff, repo]}}]\n"
    )
    proc = compare_pair(server, base, treat, "-e", str(spec), "--judge-model", "j", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "diff, repo evidence; compare ignores it" in proc.stderr
    judged = [r for r in server.requests if not is_preflight(r)]
    assert len(judged) == len(server.requests) - 1 == 2
    assert all("OVERRIDDEN-RUBRIC-LINE" in r.messages[1]["content"] for r in judged)


def test_verbose_prints_each_pairs_reasoning_in_both_orders(
    server: ChatServer, tmp_path: Path
) -> None:
    """``--verbose`` shows what the judge said for every pair, order by order, with which
    run was A; a reasoning over several lines stays indented under its pair."""

    def decide(first: str, treatment_is_a: bool) -> Any:
        stimulus = "a" if "do a" in first else "b" if "do b" in first else "c"
        order = "treatment first" if treatment_is_a else "baseline first"
        reasoning = f"{stimulus}: {order} read\nsecond line of {stimulus}"
        winner = "A" if treatment_is_a else "B"
        return completion(
            json.dumps({"winner": winner, "magnitude": "much", "reasoning": reasoning})
        )

    server.default = judge(decide)
    base, treat = runs(tmp_path)
    quiet = compare_pair(server, base, treat, "--judge-model", "j", cwd=tmp_path)
    assert quiet.returncode == 0, quiet.stderr
    assert "baseline first read" not in quiet.stdout
    proc = compare_pair(server, base, treat, "--judge-model", "j", "--verbose", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    for stimulus in "abc":
        at = lines.index(f"  ev/{stimulus} #0: much better (+1.0)")
        assert lines[at + 1 : at + 5] == [
            "    order 1 (A = baseline, B = treatment): B, much",
            f"      {stimulus}: baseline first read",
            f"      second line of {stimulus}",
            "    order 2 (A = treatment, B = baseline): A, much",
        ], lines[at : at + 7]
        assert lines[at + 5 : at + 7] == [
            f"      {stimulus}: treatment first read",
            f"      second line of {stimulus}",
        ]
