"""``vally eval`` keeps summaries, not records: its peak memory does not grow with the
number of trials."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import eval_memory  # noqa: E402


@pytest.mark.slow
@pytest.mark.timeout(900)  # 10^5 trials: about 100 s on an idle 2-core machine, 3-5 min loaded
def test_eval_peak_memory_is_flat_in_the_number_of_trials(tmp_path: Path) -> None:
    (tmp_path / "small").mkdir()
    (tmp_path / "large").mkdir()
    small = eval_memory.measure(tmp_path / "small", 10_000, console=True)
    large = eval_memory.measure(tmp_path / "large", 100_000, console=True)
    assert (small["trials"], large["trials"]) == (10_000, 100_000)
    # Holding every record (as runs did) adds several KB per trial: 10^5 would add > 300 MB.
    assert large["peak_mb"] <= 1.5 * small["peak_mb"], (small, large)
