"""TrajectoryRecorder: events tagged by turn, and the trajectory built from them."""

from __future__ import annotations

from typing import Any

from vally import Stimulus, TrajectoryMetadata, TrajectoryRecorder


def test_events_carry_the_current_turn_and_their_data() -> None:
    recorder = TrajectoryRecorder()
    recorder.user_message("first")
    call = recorder.tool_call("write_file", "c1", {"path": "a.txt"}, server="fs", batch_id="b")
    recorder.tool_result("write_file", "c1", "ok", success=False, server="fs")
    recorder.turn = 1
    recorder.token_usage(10, 5, model="m", cache_read_tokens=4)
    recorder.error("boom", code="x", fatal=True)
    recorder.skill_activation("style")
    recorder.assistant_message("done")

    assert [(e.type, e.turn) for e in recorder.events] == [
        ("user_message", 0),
        ("tool_call", 0),
        ("tool_result", 0),
        ("token_usage", 1),
        ("error", 1),
        ("skill_activation", 1),
        ("assistant_message", 1),
    ]
    assert call is recorder.events[1]
    assert (call.data.arguments, call.data.server, call.data.batch_id) == (
        {"path": "a.txt"},
        "fs",
        "b",
    )
    result = recorder.events[2].data
    assert (result.result, result.success, result.server) == ("ok", False, "fs")
    usage = recorder.events[3].data
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens) == (10, 5, 4)
    assert recorder.tool_call("t", "c2").data.arguments == {}


def test_trajectory_computes_metrics_and_fills_the_times() -> None:
    recorder = TrajectoryRecorder()
    recorder.turn_start("turn-1")
    recorder.tool_call("read_file", "c1")
    recorder.assistant_message("early")
    recorder.assistant_message("final")
    recorder.turn_end("turn-1")
    stimulus = Stimulus(name="s", prompt="p")

    trajectory = recorder.trajectory(
        stimulus,
        work_dir="/w",
        metadata=TrajectoryMetadata(executor="x"),
        wall_time_ms=42,
        end_reason="timeout",
        end_detail="slow",
    )

    assert trajectory.output == "final"
    assert trajectory.metrics.tool_call_count == 1 and trajectory.metrics.turn_count == 1
    assert trajectory.metrics.wall_time_ms == 42
    assert (trajectory.end_reason, trajectory.end_detail) == ("timeout", "slow")
    assert trajectory.metadata.executor == "x"
    assert trajectory.metadata.started_at == recorder.started_at
    assert trajectory.metadata.completed_at is not None
    explicit = recorder.trajectory(
        stimulus, output="", metadata=TrajectoryMetadata(started_at="t0")
    )
    assert explicit.output == "" and explicit.metadata.started_at == "t0"


def test_on_event_sees_every_event_as_it_is_recorded() -> None:
    seen: list[Any] = []
    recorder = TrajectoryRecorder(turn=2, on_event=seen.append)
    recorder.reasoning("thinking")
    recorder.assistant_message("answer")
    assert [(e.type, e.turn) for e in seen] == [("reasoning", 2), ("assistant_message", 2)]
