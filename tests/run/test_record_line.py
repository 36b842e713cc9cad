"""A trial's record is serialised once: :meth:`TrialResultRecord.writable` keeps the line
that checked it, and :meth:`TrialResultRecord.to_json_line` (the ``results.jsonl`` line,
the scrubber's look for secrets, the look for texts too long to keep inline) returns it
until the record changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from vally.engine.records.offload import INLINE_TEXT_LIMIT, offload_texts
from vally.engine.records.run_folder import Scrubber
from vally.models.records import TrialResultRecord
from vally.models.spec import Stimulus
from vally.models.trajectory import TrajectoryMetadata, TrajectoryRecorder


def _record(output: str = "done", *, with_trajectory: bool = False) -> TrialResultRecord:
    stimulus = Stimulus(name="s", prompt=output)
    trajectory = None
    if with_trajectory:
        recorder = TrajectoryRecorder()
        recorder.user_message(output)
        recorder.assistant_message(output)
        trajectory = recorder.trajectory(stimulus, metadata=TrajectoryMetadata(executor="mock"))
    return TrialResultRecord(
        run_id="r",
        eval_name="e",
        eval_file=None,
        stimulus_name="s",
        stimulus=stimulus,
        variant=None,
        model=None,
        trial_index=0,
        trial_id="e/s/default/0",
        status="success",
        error=None,
        started_at="2026-01-01T00:00:00.000Z",
        completed_at="2026-01-01T00:00:01.000Z",
        duration_ms=1000,
        grade_result=None,
        trajectory=trajectory,
    )


def _count_dumps(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    dump = TrialResultRecord.model_dump_json

    def counting(self: TrialResultRecord, **kwargs: Any) -> str:
        calls[0] += 1
        return dump(self, **kwargs)

    monkeypatch.setattr(TrialResultRecord, "model_dump_json", counting)
    return calls


def test_the_checked_line_is_the_results_line(monkeypatch: pytest.MonkeyPatch) -> None:
    expected = _record().model_dump_json(by_alias=True)
    calls = _count_dumps(monkeypatch)
    record = _record().writable()
    assert record.to_json_line() == expected
    assert Scrubber(["a-secret-value-not-there"]).record(record) is record
    assert calls[0] == 1


def test_a_changed_record_serialises_itself_again() -> None:
    record = _record().writable()
    record.status = "error"
    assert '"status":"error"' in record.to_json_line()
    copied = _record().writable().model_copy(update={"trial_id": "other"})
    assert '"trialId":"other"' in copied.to_json_line()


def test_the_kept_line_is_no_field() -> None:
    record = _record().writable()
    assert record == _record()
    assert record.model_dump() == _record().model_dump()
    assert dict(record) == dict(_record())


def test_a_record_with_a_lone_surrogate_is_cleaned_and_written() -> None:
    record = _record("bad \ud800 text").writable()
    assert "\ufffd" in record.to_json_line()


def test_a_short_record_is_not_serialised_again_to_look_for_long_texts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = _record(with_trajectory=True).writable()
    dumps = [0]
    dump = BaseModel.model_dump_json

    def counting(self: BaseModel, **kwargs: Any) -> str:
        dumps[0] += 1
        return dump(self, **kwargs)

    monkeypatch.setattr(BaseModel, "model_dump_json", counting)
    assert offload_texts(record, tmp_path / "trial", tmp_path) is record
    assert dumps[0] == 0


def test_a_long_text_is_still_offloaded(tmp_path: Path) -> None:
    record = _record("x" * (INLINE_TEXT_LIMIT + 1), with_trajectory=True).writable()
    moved = offload_texts(record, tmp_path / "trial", tmp_path)
    assert moved.offloaded
    assert moved.trajectory is not None
    assert len(moved.trajectory.output) == INLINE_TEXT_LIMIT
