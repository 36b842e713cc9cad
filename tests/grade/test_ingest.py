"""Reading saved trials: every accepted shape, and clear errors with line numbers."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reporters"))
from reporter_helpers import make_record

from vally.errors import ConfigError
from vally.models.records import TrialResultRecord
from vally.models.trajectory import Trajectory
from vally_regrade.formats import FORMAT_KEY
from vally_regrade.saved_trials import read_records, read_trials

ATIF = {
    "schema_version": "ATIF-v1.4",
    "session_id": "S1",
    "agent": {"name": "harbor-agent", "version": "1.0.0", "model_name": "model-a"},
    "steps": [
        {"step_id": 1, "source": "system", "message": "You are helpful."},
        {
            "step_id": 2,
            "timestamp": "2025-10-11T10:30:00Z",
            "source": "user",
            "message": "Create hello.txt",
        },
        {
            "step_id": 3,
            "timestamp": "2025-10-11T10:30:02Z",
            "source": "agent",
            "message": "Creating the file.",
            "reasoning_content": "Use the write tool.",
            "tool_calls": [
                {"tool_call_id": "c1", "function_name": "write_file", "arguments": {"p": "x"}},
                {"tool_call_id": "c2", "function_name": "bash", "arguments": {"cmd": "ls"}},
            ],
            "observation": {"results": [{"source_call_id": "c1", "content": "ok"}]},
            "metrics": {"prompt_tokens": 500, "completion_tokens": 80, "cached_tokens": 200},
        },
        {
            "step_id": 4,
            "timestamp": "2025-10-11T10:30:05Z",
            "source": "agent",
            "model_name": "model-b",
            "message": "Done: hello.txt created.",
            "metrics": {"prompt_tokens": 600, "completion_tokens": 40},
        },
    ],
}


def _lines(*docs: object) -> io.StringIO:
    return io.StringIO("".join(json.dumps(d) + "\n" for d in docs))


def test_trial_result_jsonl_with_blank_lines() -> None:
    a, b = make_record("a"), make_record("b", trial=1)
    text = a.to_json_line() + "\n\n   \n" + b.to_json_line() + "\n"
    items = read_trials(io.StringIO(text))
    assert [i.value for i in items] == [a, b]
    assert [i.line for i in items] == [1, 4]
    assert {i.format for i in items} == {"trial-result"}
    assert items[1].stimulus_name == "b"
    assert items[0].trajectory == a.trajectory


def test_run_summary_lines_are_skipped() -> None:
    record = make_record()
    text = record.to_json_line() + "\n" + json.dumps({"type": "run-summary", "runId": "x"})
    assert read_records(io.StringIO(text)) == [record]


def test_bare_trajectory_json_and_jsonl() -> None:
    trajectory = make_record().trajectory
    assert trajectory is not None
    pretty = json.dumps(trajectory.to_json_dict(), indent=2)
    (one,) = read_trials(io.StringIO(pretty))
    assert one.format == "trajectory"
    assert isinstance(one.value, Trajectory)
    assert one.value.events == trajectory.events
    assert one.value.metadata.extra[FORMAT_KEY] == "trajectory"
    many = read_records(_lines(trajectory.to_json_dict(), trajectory.to_json_dict()))
    assert len(many) == 2


def test_json_array_of_records() -> None:
    records = [make_record("a"), make_record("b")]
    text = json.dumps([r.to_json_dict() for r in records], indent=1)
    assert read_records(io.StringIO(text)) == records


def test_legacy_eval_outcome() -> None:
    trajectory = make_record().trajectory
    assert trajectory is not None
    raw = trajectory.to_json_dict()
    del raw["stimulus"]
    outcome = {
        "stimulus": {"name": "add-test", "prompt": "p", "legacyField": 1},
        "trajectory": raw,
        "gradeResult": {"passed": True},
    }
    (item,) = read_trials(_lines(outcome))
    assert item.format == "eval-outcome"
    assert isinstance(item.value, Trajectory)
    assert item.value.stimulus.name == "add-test"
    assert item.stimulus_name == "add-test"
    assert item.value.output == "done"


def test_legacy_eval_outcome_without_stimulus_is_an_error() -> None:
    with pytest.raises(ConfigError, match="names no stimulus") as info:
        read_records(_lines({"trajectory": {"events": []}}))
    assert info.value.location is not None and info.value.location.line == 1


def test_atif_mapping() -> None:
    (item,) = read_trials(io.StringIO(json.dumps(ATIF, indent=2)))
    assert item.format == "atif"
    assert item.stimulus_name is None
    traj = item.value
    assert isinstance(traj, Trajectory)
    assert traj.stimulus.prompt == "Create hello.txt"
    types = [e.type for e in traj.events]
    assert types == [
        "user_message",
        "reasoning",
        "tool_call",
        "tool_call",
        "tool_result",
        "assistant_message",
        "token_usage",
        "assistant_message",
        "token_usage",
    ]
    assert traj.metrics.tool_call_count == 2
    assert traj.metrics.tool_call_breakdown == {"write_file": 1, "bash": 1}
    assert traj.metrics.token_usage.total_tokens == 1220
    assert traj.metrics.token_usage.cache_read_tokens == 200
    assert traj.metrics.token_usage.by_model["model-b"]["inputTokens"] == 600
    assert traj.metrics.wall_time_ms == 5000
    assert traj.output == "Done: hello.txt created."
    assert traj.metadata.model == "model-a"
    assert traj.metadata.executor == "harbor-agent"
    assert traj.metadata.session_id == "S1"
    result = next(e for e in traj.events if e.type == "tool_result")
    assert result.data.tool_name == "write_file" and result.data.result == "ok"


def test_atif_final_metrics_when_steps_have_none() -> None:
    doc = {
        "schema_version": "ATIF-v1.2",
        "session_id": "S2",
        "agent": {"name": "a", "version": "1"},
        "steps": [{"step_id": 1, "source": "user", "message": "hi"}],
        "final_metrics": {"total_prompt_tokens": 10, "total_completion_tokens": 5},
    }
    (traj,) = read_records(_lines(doc))
    assert isinstance(traj, Trajectory)
    assert traj.metrics.token_usage.total_tokens == 15


def test_bad_json_line_names_the_line() -> None:
    text = make_record().to_json_line() + "\n\n{not json\n"
    with pytest.raises(ConfigError, match="line 3 is not valid JSON") as info:
        read_records(io.StringIO(text), source="outcomes.jsonl")
    assert info.value.location is not None
    assert str(info.value.location) == "outcomes.jsonl:3"
    assert info.value.code == "VALLY_CONFIG"


def test_broken_pretty_document_names_the_inner_line() -> None:
    text = '{\n  "type": "trial-result",\n  "runId": oops\n}\n'
    with pytest.raises(ConfigError, match="line 3 is not valid JSON"):
        read_records(io.StringIO(text))


def test_unknown_shape_and_invalid_record() -> None:
    with pytest.raises(ConfigError, match=r"line 2 is not a trial record.*keys: hello"):
        read_records(_lines(make_record().to_json_dict(), {"hello": 1}))
    with pytest.raises(ConfigError, match="line 1 looks like a trial-result document"):
        read_records(_lines({"type": "trial-result", "runId": "x"}))
    with pytest.raises(ConfigError, match="line 1 holds a JSON list"):
        read_records(io.StringIO("[1]\n[2]\n"))


def test_empty_input() -> None:
    assert read_records(io.StringIO("\n\n")) == []


def test_records_survive_a_round_trip(tmp_path: Path) -> None:
    record = make_record()
    path = tmp_path / "results.jsonl"
    path.write_text(record.to_json_line() + "\n", encoding="utf-8")
    with path.open(encoding="utf-8") as handle:
        (back,) = read_records(handle, source=str(path))
    assert isinstance(back, TrialResultRecord) and back == record
