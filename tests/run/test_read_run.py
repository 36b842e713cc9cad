"""``vally.read_run``: a run folder, an experiment folder or a results file read back from
Python, with DataFrames when pandas is installed; bad paths and lines are clear errors."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.badinput.conftest import EVAL_YAML, EXPERIMENT_YAML, vally
from vally import ConfigError, read_run


def _eval_run(tmp_path: Path) -> Path:
    (tmp_path / "eval.yaml").write_text(EVAL_YAML.replace("runs: 1", "runs: 3"))
    result = vally("eval", "-e", "eval.yaml", "--output-dir", "out", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    [run] = list((tmp_path / "out").iterdir())
    return run


def test_a_run_folder_reads_back_with_its_summaries(tmp_path: Path) -> None:
    run = read_run(_eval_run(tmp_path))
    assert sorted((r.stimulus_name, r.trial_index) for r in run.records) == [
        ("s1", 0),
        ("s1", 1),
        ("s1", 2),
    ]
    assert [s.eval_name for s in run.summaries] == ["demo"]
    assert run.summaries[0].trials == 3 and run.summaries[0].passed == 3
    assert run.variants == [""]
    assert run.warnings == []


def test_the_results_file_alone_reads_too(tmp_path: Path) -> None:
    folder = _eval_run(tmp_path)
    run = read_run(folder / "results.jsonl")
    assert len(run.records) == 3 and len(run.summaries) == 1


def test_an_experiment_folder_reads_every_variant(tmp_path: Path) -> None:
    (tmp_path / "demo.eval.yaml").write_text(EVAL_YAML)
    (tmp_path / "experiment.yaml").write_text(EXPERIMENT_YAML)
    result = vally("experiment", "run", "experiment.yaml", "--output-dir", "out", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    [folder] = list((tmp_path / "out").iterdir())
    run = read_run(str(folder))
    assert run.variants == ["a", "b"]
    assert sorted(s.variant or "" for s in run.summaries) == ["a", "b"]


def test_a_torn_last_line_is_a_warning_not_an_error(tmp_path: Path) -> None:
    folder = _eval_run(tmp_path)
    with (folder / "results.jsonl").open("a", encoding="utf-8") as handle:
        handle.write('{"type": "trial-result", "runId": ')
    run = read_run(folder)
    assert len(run.records) == 3
    assert run.warnings and "results.jsonl" in run.warnings[0]


def test_no_run_and_a_bad_line_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no run at .*does not exist"):
        read_run(tmp_path / "missing")
    with pytest.raises(ConfigError, match=r"holds no results\.jsonl"):
        read_run(tmp_path)
    folder = _eval_run(tmp_path)
    lines = (folder / "results.jsonl").read_text().splitlines()
    (folder / "results.jsonl").write_text(lines[0] + '\n{"type": "trial-result"}\n' + lines[1])
    with pytest.raises(ConfigError, match=r"results.jsonl:2: not a trial-result record"):
        read_run(folder)


def test_data_frames(tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    run = read_run(_eval_run(tmp_path))
    records = run.records_frame()
    assert len(records) == 3 and list(records["passed"]) == [True, True, True]
    assert records["stimulus"].unique().tolist() == ["s1"]
    summaries = run.summaries_frame()
    assert summaries.loc[0, "trials"] == 3 and summaries.loc[0, "verdict"] == "pass"


def test_without_pandas_a_frame_says_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vally.engine.records import reading

    run = read_run(_eval_run(tmp_path))
    reading._pandas.cache_clear()
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    try:
        with pytest.raises(ConfigError, match="pip install pandas"):
            run.records_frame()
    finally:
        reading._pandas.cache_clear()
