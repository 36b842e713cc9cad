"""Token counts are checked where they enter: a negative, NaN, infinite or fractional count
from an agent's event stream or usage is recorded as an error of the trajectory and counted
as 0, never believed; budgets hold against an agent that reports such counts."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from vally import TrajectoryRecorder
from vally.models.trajectory import compute_metrics, token_count
from vally_builtin.executors.streams import parse_stream

LIES = {"negative": -25000, "nan": float("nan"), "infinite": float("inf"), "fraction": 2.5}


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, 0), (0, 0), (12, 12), (12.0, 12), (-1, None), (2.5, None), (True, None),
     (float("nan"), None), (float("inf"), None), ("12", None)],
)
def test_token_count(value: object, expected: int | None) -> None:
    assert token_count(value) == expected


def _usage_line(count: object) -> str:
    data = {"inputTokens": count, "outputTokens": 5}
    return json.dumps({"type": "token_usage", "data": data}) + "\n"


@pytest.mark.parametrize("lie", sorted(LIES))
def test_a_vally_stream_with_a_lying_count_counts_nothing_of_it(lie: str) -> None:
    text = _usage_line(LIES[lie]) + _usage_line(10)
    result = parse_stream("vally", text)
    kinds = [e.type for e in result.events]
    assert kinds == ["error", "token_usage"], kinds
    assert "invalid 'token_usage' event" in result.events[0].data.message
    usage = compute_metrics(result.events).token_usage
    assert (usage.input_tokens, usage.output_tokens) == (10, 5)


@pytest.mark.parametrize("lie", sorted(LIES))
def test_a_claude_code_usage_with_a_lying_count_is_an_error(lie: str) -> None:
    line = {
        "type": "assistant",
        "message": {
            "id": "m1",
            "model": "claude-x",
            "content": [{"type": "text", "text": "done"}],
            "usage": {"input_tokens": LIES[lie], "output_tokens": 7},
        },
    }
    text = json.dumps(line, allow_nan=True) + "\n"
    result = parse_stream("claude-code", text)
    errors = [e for e in result.events if e.type == "error"]
    assert errors and errors[0].data.code == "invalid_token_count"
    assert "input_tokens=" in errors[0].data.message
    usage = compute_metrics(result.events).token_usage
    assert usage.input_tokens == 0 and usage.output_tokens == 7


def test_the_recorder_never_records_a_negative_count() -> None:
    recorder = TrajectoryRecorder()
    event = recorder.token_usage(-5, 3, model="m", cache_read_tokens=float("nan"))
    assert (event.data.input_tokens, event.data.output_tokens) == (0, 3)
    assert event.data.cache_read_tokens == 0
    (error,) = [e for e in recorder.events if e.type == "error"]
    assert "input_tokens=-5" in error.data.message and "cache_read_tokens=nan" in error.data.message


AGENT = """\
import json
print(json.dumps({"type": "token_usage", "data": {"inputTokens": -100000, "outputTokens": 0}}))
print(json.dumps({"type": "token_usage", "data": {"inputTokens": 60, "outputTokens": 0}}))
print(json.dumps({"type": "assistant_message", "data": {"content": "done"}}))
"""

EVAL = """\
name: liar
defaults:
  runs: 5
  executor:
    name: command
    config:
      command: ["{python}", "{agent}"]
      events: vally
stimuli:
  - name: s1
    prompt: hello
    graders:
      - {{ type: output-contains, config: {{ substring: done }} }}
"""


def test_a_lying_agent_cannot_overrun_a_token_budget(tmp_path: Path) -> None:
    from tests.badinput.conftest import vally

    (tmp_path / "agent.py").write_text(AGENT, encoding="utf-8")
    spec = EVAL.format(python=sys.executable, agent=tmp_path / "agent.py")
    (tmp_path / "eval.yaml").write_text(spec, encoding="utf-8")
    result = vally("eval", "-e", "eval.yaml", "--workers", "1", "--max-tokens", "100", cwd=tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr  # stopped by the budget
    [results] = list(tmp_path.glob("vally-results/*/results.jsonl"))
    records = [json.loads(line) for line in results.read_text().splitlines()]
    assert len(records) == 2  # 60, then 120 >= 100: three trials never start
    assert all(r["trajectory"]["metrics"]["tokenUsage"]["inputTokens"] == 60 for r in records)
    assert "(120 tokens spent)" in result.stderr


@pytest.mark.parametrize("reported", [-3.0, float("nan"), float("inf")])
def test_a_reported_cost_that_is_not_a_finite_amount_is_not_used(reported: float) -> None:
    from vally import Stimulus, Trajectory
    from vally.models.cost import agent_cost
    from vally.models.pricing import PriceTable

    trajectory = Trajectory(stimulus=Stimulus(name="s", prompt="p"))
    trajectory.metadata.extra["costUsd"] = reported
    cost, source = agent_cost(trajectory, None, PriceTable())
    assert source != "reported"
    assert cost is None or cost == 0.0
