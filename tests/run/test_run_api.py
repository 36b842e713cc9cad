"""The library run API: the calls Python users make, from scripts and from notebooks."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from vally import ConfigError, EvalRequest, prepare_run, run_eval
from vally.engine.evals import eval_run_request

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart" / "eval.yaml"


def _request(tmp_path: Path, runs: int = 1, workers: int | None = None) -> EvalRequest:
    return EvalRequest(
        eval_specs=[str(QUICKSTART)],
        runs=runs,
        workers=workers,
        output_dir=str(tmp_path / "out"),
        console=False,
    )


def test_run_eval_returns_every_record_and_summary(tmp_path: Path) -> None:
    result = run_eval(_request(tmp_path))
    assert not result.errored and not result.cancelled
    assert sorted(r.stimulus_name for r in result.records) == [
        "add-numbers",
        "create-file",
        "nested-file",
    ]
    assert [s.eval_name for s in result.summaries] == ["quickstart"]
    assert result.run.run_dir is not None and (result.run.run_dir / "results.jsonl").is_file()


def test_run_eval_works_inside_a_running_event_loop(tmp_path: Path) -> None:
    """A notebook cell runs inside an event loop; the blocking call must still work."""

    async def cell() -> int:
        result = run_eval(_request(tmp_path))
        return len(result.records)

    assert asyncio.run(cell()) == 3


def test_execute_async_awaits_on_the_callers_loop(tmp_path: Path) -> None:
    request, _ = eval_run_request(_request(tmp_path))
    prepared = prepare_run(request)

    async def main() -> int:
        result = await prepared.execute_async(tmp_path / "run")
        return sum(1 for r in result.records if r.grade_result and r.grade_result.passed)

    assert asyncio.run(main()) == 3
    assert (tmp_path / "run" / "run-summary.jsonl").is_file()


def test_a_bad_request_raises_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--workers must be at least 1"):
        run_eval(_request(tmp_path, workers=0))
    assert not (tmp_path / "out").exists()


def test_runs_zero_validates_and_returns_an_empty_result(tmp_path: Path) -> None:
    result = run_eval(_request(tmp_path, runs=0))
    assert result.records == [] and result.summaries == [] and not result.errored
    assert not (tmp_path / "out").exists()
