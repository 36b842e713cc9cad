"""JSON lines written whole or not at all (a temp file renamed into place), each as its
pieces come, a long piece a part at a time: a run summary of many stimuli is written a
stimulus at a time, never its whole line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.traced import traced_peak
from vally.engine.records import run_folder
from vally.models.base import RecordModel
from vally.models.records import PIECED_STIMULI, RunSummaryRecord


class _Line(RecordModel):
    text: str


def test_records_are_written_as_their_lines_joined_short_and_long(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_folder, "WRITE_PIECE", 7)
    records = [_Line(text=text) for text in ("", "a", "a text of many pieces, é and ✔ too")]
    path = tmp_path / "deep" / "out.jsonl"
    run_folder.write_jsonl(path, records)
    expected = "".join(record.to_json_line() + "\n" for record in records)
    assert path.read_text(encoding="utf-8") == expected
    assert [p.name for p in path.parent.iterdir()] == ["out.jsonl"]


def test_a_failing_writer_keeps_the_file_that_was_there(tmp_path: Path) -> None:
    path = tmp_path / "run-summary.jsonl"
    path.write_text("kept\n", encoding="utf-8")

    def records() -> Iterator[_Line]:
        yield _Line(text="new")
        raise RuntimeError("the summary could not be made")

    with pytest.raises(RuntimeError):
        run_folder.write_jsonl(path, records())
    assert path.read_text(encoding="utf-8") == "kept\n"
    assert [p.name for p in tmp_path.iterdir()] == ["run-summary.jsonl"]


def _summary(tmp_path: Path, stimuli: int) -> RunSummaryRecord:
    """The run summary of a mock eval of ``stimuli`` stimuli, one failing."""
    from vally import EvalRequest, run_eval

    lines = "\n".join(
        f"  - {{name: 's{i} ✔', prompt: 'task {i}', graders: [{{type: output-contains, "
        f"config: {{substring: {'nope' if i == 3 else 'task'}}}}}]}}"
        for i in range(stimuli)
    )
    spec = tmp_path / "eval.yaml"
    spec.write_text(
        "name: pieces\ndefaults:\n  executor: {name: mock, config: {output: 'done: {prompt}'}}\n"
        f"stimuli:\n{lines}\n",
        encoding="utf-8",
    )
    result = run_eval(
        EvalRequest(eval_specs=[str(spec)], output_dir=str(tmp_path / "out"), console=False)
    )
    [summary] = result.summaries
    return summary


def test_a_summary_of_many_stimuli_is_written_in_pieces_that_join_to_its_line(
    tmp_path: Path,
) -> None:
    summary = _summary(tmp_path, PIECED_STIMULI + 6)
    pieces = list(summary.json_pieces())
    assert len(pieces) == len(summary.stimuli) + 2
    assert "".join(pieces) == summary.to_json_line()
    [written] = (tmp_path / "out").glob("*/run-summary.jsonl")
    assert written.read_text(encoding="utf-8") == summary.to_json_line() + "\n"
    # an empty "stimuli" elsewhere in the record: the line is written whole, the same
    odd = summary.model_copy(update={"plugins": [{"name": "x", "stimuli": []}]})
    assert list(odd.json_pieces()) == [odd.to_json_line()]
    few = summary.model_copy(update={"stimuli": summary.stimuli[:3]})
    assert list(few.json_pieces()) == [few.to_json_line()]


def test_a_summary_of_many_stimuli_is_written_without_its_whole_line(tmp_path: Path) -> None:
    summary = _summary(tmp_path, PIECED_STIMULI)
    entries = [
        entry.model_copy(update={"stimulus_name": f"stimulus-{i}"})
        for i in range(40)
        for entry in summary.stimuli
    ]
    large = summary.model_copy(update={"stimuli": entries})
    line = len(large.to_json_line())
    path = tmp_path / "run-summary.jsonl"
    peak = traced_peak(lambda: run_folder.write_jsonl(path, [large]))
    assert path.read_text(encoding="utf-8") == large.to_json_line() + "\n"
    # serialised whole, the line was held twice while it was made
    assert peak < line * 0.25, (peak, line)


def test_a_text_written_in_pieces_appears_whole_or_not_at_all(tmp_path: Path) -> None:
    from vally import write_pieces_atomic

    path = tmp_path / "report.md"
    path.write_text("kept\n", encoding="utf-8")

    def failing() -> Iterator[str]:
        yield "# half"
        raise RuntimeError("the report could not be made")

    with pytest.raises(RuntimeError):
        write_pieces_atomic(path, failing())
    assert path.read_text(encoding="utf-8") == "kept\n"
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]
    write_pieces_atomic(path, iter(["# title", "\n", "é ✔\n"]))
    assert path.read_text(encoding="utf-8") == "# title\né ✔\n"
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]
