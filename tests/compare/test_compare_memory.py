"""``vally compare``'s statistics path streams: its peak memory does not grow with the
number of pairs (the runs are indexed, a pair's records read only while it is counted)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import compare_memory  # noqa: E402


def _stats_peak(tmp_path: Path, pairs: int) -> float:
    folder = tmp_path / str(pairs)
    folder.mkdir()
    compare_memory.generate(folder, pairs)
    peak, _seconds = compare_memory.measure("stats", folder)
    return peak


def test_the_streamed_path_writes_one_trial_entry_per_pair(tmp_path: Path) -> None:
    compare_memory.generate(tmp_path, 300)
    compare_memory.run_stats(tmp_path)
    text = (tmp_path / "trials.part").read_text(encoding="utf-8")
    entries = json.loads(f"[{text}]")
    assert len(entries) == 300
    assert [(e["stimulus"], e["trialIndex"]) for e in entries[:3]] == [
        ("s0", 0),
        ("s0", 1),
        ("s0", 2),
    ]


@pytest.mark.slow
def test_compare_peak_memory_is_flat_in_the_number_of_pairs(tmp_path: Path) -> None:
    small = _stats_peak(tmp_path, 10_000)
    large = _stats_peak(tmp_path, 100_000)
    # Holding both runs' records (as compare did) adds about 23 KB a pair: 10^5 pairs
    # would peak near 2.4 GB against about 370 MB at 10^4.
    assert large <= 1.5 * small, (small, large)
