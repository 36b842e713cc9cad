"""A run does not keep its records: it counts them, and the records it returns (and hands
to ``vally_run_end``) are read back from the results file it wrote."""

from __future__ import annotations

from pathlib import Path

from vally import EvalRequest, prepare_run, run_eval
from vally.engine.evals import eval_run_request

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart" / "eval.yaml"


def _request(tmp_path: Path, runs: int = 2) -> EvalRequest:
    return EvalRequest(
        eval_specs=[str(QUICKSTART)],
        runs=runs,
        output_dir=str(tmp_path / "out"),
        console=False,
    )


def test_the_records_of_a_run_are_read_back_from_its_results_file(tmp_path: Path) -> None:
    result = run_eval(_request(tmp_path))
    assert result.run.run_dir is not None
    results = result.run.run_dir / "results.jsonl"
    lines = results.read_text(encoding="utf-8").splitlines(keepends=True)
    assert len(result.records) == len(lines) == 6
    first = [r.trial_id for r in result.records]
    assert [r.trial_id for r in result.records] == first  # every pass reads them again
    assert result.records[-1].trial_id == first[-1]
    assert result.count("success") == 6 and result.count("error") == 0
    # The run holds no copy: what the file holds is what the records are.
    results.write_text("".join(lines[:2]), encoding="utf-8")
    assert [r.trial_id for r in result.records] == first[:2]


def test_a_run_without_a_folder_keeps_its_records(tmp_path: Path) -> None:
    request, _ = eval_run_request(_request(tmp_path, runs=1))
    result = prepare_run(request).execute(None)
    assert isinstance(result.records, list)
    assert sorted(r.stimulus_name for r in result.records) == [
        "add-numbers",
        "create-file",
        "nested-file",
    ]
    assert [s.trials for s in result.summaries] == [3]
