"""``run-plan.json`` is written one trial at a time: the same bytes as the whole document
dumped at once, without holding that document or its text."""

from __future__ import annotations

from pathlib import Path

from tests.traced import traced_peak
from vally import EvalRequest, prepare_run
from vally.engine.evals import eval_run_request
from vally.engine.planning.resume import PLAN_FILE, plan_document, stream_plan, write_plan
from vally.engine.run import PreparedRun

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart" / "eval.yaml"


def _prepared(tmp_path: Path, runs: int) -> PreparedRun:
    opts = EvalRequest(
        eval_specs=[str(QUICKSTART)], runs=runs, output_dir=str(tmp_path), console=False
    )
    request, _ = eval_run_request(opts)
    return prepare_run(request, dry_run=True)


def _both(tmp_path: Path, prepared: PreparedRun) -> tuple[bytes, bytes]:
    whole, streamed = tmp_path / "whole", tmp_path / "streamed"
    whole.mkdir()
    streamed.mkdir()
    document = plan_document(prepared.trials, run_id="r-1", command="eval", skip_grade=False)
    write_plan(whole, document)
    stream_plan(streamed, prepared.trials, run_id="r-1", command="eval", skip_grade=False)
    return (whole / PLAN_FILE).read_bytes(), (streamed / PLAN_FILE).read_bytes()


def test_the_streamed_plan_file_is_the_dumped_document(tmp_path: Path) -> None:
    whole, streamed = _both(tmp_path, _prepared(tmp_path, runs=4))
    assert streamed == whole
    assert streamed.count(b'"/quickstart/') == 12


def test_an_empty_plan_file_is_the_dumped_document(tmp_path: Path) -> None:
    prepared = _prepared(tmp_path, runs=1)
    prepared.trials = []
    whole, streamed = _both(tmp_path, prepared)
    assert streamed == whole


def test_writing_the_plan_holds_far_less_than_the_whole_document(tmp_path: Path) -> None:
    prepared = _prepared(tmp_path, runs=1500)  # 4,500 trials
    trials = prepared.trials

    def whole() -> None:
        write_plan(tmp_path, plan_document(trials, run_id="r", command="eval", skip_grade=False))

    def streamed() -> None:
        stream_plan(tmp_path, trials, run_id="r", command="eval", skip_grade=False)

    # The document and its indented text cost several hundred bytes per trial; the keys
    # being sorted, about a hundred.
    streamed_peak, whole_peak = traced_peak(streamed), traced_peak(whole)
    assert streamed_peak <= 0.5 * whole_peak, (streamed_peak, whole_peak)


def test_the_plan_file_creates_the_run_folder(tmp_path: Path) -> None:
    prepared = _prepared(tmp_path, runs=1)
    folder = tmp_path / "new" / "run"
    stream_plan(folder, prepared.trials, run_id="r", command="eval", skip_grade=False)
    assert (folder / PLAN_FILE).is_file()
