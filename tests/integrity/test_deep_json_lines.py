"""A line nested too deep for ``json`` (a hostile agent's event, a tampered results file)
is a skipped or reported line wherever vally reads lines back, never a RecursionError."""

from __future__ import annotations

from pathlib import Path

from vally.engine.planning.resume import _result_lines
from vally_serve.runfiles import Problem, read_lines
from vally_serve.trialdirs import read_events

DEEP = "[" * 100_000 + "]" * 100_000


def test_resume_takes_a_deep_results_line_for_a_foreign_one(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    results.write_text(DEEP + "\n", encoding="utf-8")
    assert list(_result_lines(results)) == [(1, None)]


def test_the_history_reader_reports_a_deep_line_and_goes_on(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    results.write_text(DEEP + '\n{"type": "trial-result"}\n', encoding="utf-8")
    problems: list[Problem] = []
    lines = list(read_lines(results, problems))
    assert [line.number for line in lines] == [2]
    assert len(problems) == 1 and problems[0].line == 1
    assert "nested deeper than" in problems[0].message


def test_a_deep_event_line_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "events.jsonl").write_text(DEEP + '\n{"type": "x"}\n', encoding="utf-8")
    assert read_events(tmp_path) == '[{"type": "x"}]'
