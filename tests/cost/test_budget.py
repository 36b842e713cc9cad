"""``--max-tokens`` and ``--max-cost`` stop a run from starting trials at the right point.

Every trial spends a fixed amount at the loopback server (agent 2 calls and judge 1 call of
10 prompt / 5 completion tokens: 45 tokens, $0.042 at the test prices). With one worker the
trials run one after another, so the trial that reaches the limit is known in advance.
"""

from __future__ import annotations

from pathlib import Path

from tests.cost.support import project, read_jsonl, reply, vally
from tests.llm.chat_server import ChatServer

EXIT_BUDGET = 3

EXPERIMENT_YAML = """\
name: budgeted
evals: [eval.yaml]
vary: [/defaults/model]
baseline: small
variants:
  small: {overrides: {model: m-agent}}
  large: {overrides: {model: m-agent}}
"""


def _records(tmp_path: Path, pattern: str) -> list[dict[str, object]]:
    [results] = list(tmp_path.glob(pattern))
    return read_jsonl(results)


def test_max_tokens_stops_after_the_trial_that_reaches_it(
    chat_server: ChatServer, tmp_path: Path
) -> None:
    chat_server.default = reply
    project(tmp_path, chat_server, runs=5)
    args = ["eval", "-e", "eval.yaml", "--model", "m-agent", "--workers", "1"]
    proc = vally(tmp_path, *args, "--max-tokens", "100")
    assert proc.returncode == EXIT_BUDGET, proc.stdout + proc.stderr
    # 45, 90 (< 100: a third trial starts), 135: two trials never start.
    records = _records(tmp_path, "vally-results/*/results.jsonl")
    assert sorted(r["trialIndex"] for r in records) == [0, 1, 2]  # type: ignore[type-var]
    assert all(r["status"] == "success" for r in records)
    assert "--max-tokens 100 (135 tokens spent); 2 trial(s) not started" in proc.stderr
    assert len(chat_server.requests) == 3 * 3


def test_max_cost_stops_on_the_priced_spending(chat_server: ChatServer, tmp_path: Path) -> None:
    chat_server.default = reply
    project(tmp_path, chat_server, runs=5)
    args = ["eval", "-e", "eval.yaml", "--model", "m-agent", "--workers", "1"]
    proc = vally(tmp_path, *args, "--max-cost", "0.05")
    assert proc.returncode == EXIT_BUDGET, proc.stdout + proc.stderr
    assert len(_records(tmp_path, "vally-results/*/results.jsonl")) == 2  # $0.042, $0.084
    assert "--max-cost 0.05 ($0.0840 spent); 3 trial(s) not started" in proc.stderr


def test_a_budget_not_reached_changes_nothing(chat_server: ChatServer, tmp_path: Path) -> None:
    chat_server.default = reply
    project(tmp_path, chat_server, runs=2)
    proc = vally(tmp_path, "eval", "-e", "eval.yaml", "--model", "m-agent", "--max-tokens", "91")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(_records(tmp_path, "vally-results/*/results.jsonl")) == 2


def test_experiment_divides_the_budget_across_variants(
    chat_server: ChatServer, tmp_path: Path
) -> None:
    chat_server.default = reply
    project(tmp_path, chat_server, runs=5)
    (tmp_path / "experiment.yaml").write_text(EXPERIMENT_YAML)
    args = ["experiment", "run", "experiment.yaml", "--workers", "1", "--max-tokens", "200"]
    proc = vally(tmp_path, *args)
    assert proc.returncode == EXIT_BUDGET, proc.stdout + proc.stderr
    # 100 tokens per variant: 45, 90, 135 -> three trials each, two never started.
    for variant in ("small", "large"):
        assert len(_records(tmp_path, f"vally-experiment-results/*/{variant}/results.jsonl")) == 3
        assert f"variant {variant}: budget reached, --max-tokens 100" in proc.stderr
    [report] = list(tmp_path.glob("vally-experiment-results/*/report.md"))
    # each variant: 3 trials of 2 agent calls (30 tokens) and 1 judge call (15 tokens)
    assert report.read_text().count("Cost: agent 90 tokens $0.1200") == 2


def test_a_budget_below_zero_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "eval.yaml").write_text("name: x\nstimuli: [{name: s, prompt: p}]\n")
    proc = vally(tmp_path, "eval", "-e", "eval.yaml", "--max-cost", "0")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "--max-cost must be more than 0" in proc.stderr


def test_resume_runs_the_trials_a_budget_did_not_start(
    chat_server: ChatServer, tmp_path: Path
) -> None:
    chat_server.default = reply
    project(tmp_path, chat_server, runs=4)
    args = ["eval", "-e", "eval.yaml", "--model", "m-agent", "--workers", "1"]
    stopped = vally(tmp_path, *args, "--max-tokens", "50")
    assert stopped.returncode == EXIT_BUDGET, stopped.stdout + stopped.stderr
    [run_dir] = list(tmp_path.glob("vally-results/*"))
    assert len(read_jsonl(run_dir / "results.jsonl")) == 2  # 45, then 90 >= 50
    # The kept trials' 90 tokens count: one more trial reaches 100.
    resumed = vally(tmp_path, *args, "--resume", str(run_dir), "--max-tokens", "100")
    assert resumed.returncode == EXIT_BUDGET, resumed.stdout + resumed.stderr
    assert len(read_jsonl(run_dir / "results.jsonl")) == 3
    finished = vally(tmp_path, *args, "--resume", str(run_dir))
    assert finished.returncode == 0, finished.stdout + finished.stderr
    records = read_jsonl(run_dir / "results.jsonl")
    assert sorted(r["trialIndex"] for r in records) == [0, 1, 2, 3]  # type: ignore[type-var]
    [summary] = read_jsonl(run_dir / "run-summary.jsonl")
    assert summary["usage"]["agent"]["totalTokens"] == 4 * 30
