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


def _stats_peak(tmp_path: Path, pairs: int, stimuli: int = compare_memory.STIMULI) -> float:
    folder = tmp_path / f"{pairs}-{stimuli}"
    folder.mkdir()
    compare_memory.generate(folder, pairs, stimuli)
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


@pytest.mark.slow
def test_compare_peak_memory_is_flat_in_the_number_of_stimuli(tmp_path: Path) -> None:
    """The whole statistics path (index, pairs read back, tally, trial entries, every
    figure) at 10^3 and 10^4 stimuli of 2 pairs each."""
    small = _stats_peak(tmp_path, 2_000, stimuli=1_000)
    large = _stats_peak(tmp_path, 20_000, stimuli=10_000)
    # 135 MB and 184 MB when measured (most of it numpy, scipy and vally imported); the
    # per-stimulus part is the running sums and scores, about 5.5 KB a stimulus.
    assert large <= 1.5 * small, (small, large)


def _sign_flip_peak(stimuli: int) -> int:
    """The traced peak of the sign-flip test of ``stimuli`` per-stimulus differences."""
    import tracemalloc

    import numpy as np

    from vally_compare.statistics.signflip import sign_flip_test

    values = np.random.default_rng(7).normal(0.05, 0.3, stimuli).tolist()
    tracemalloc.start()
    try:
        result = sign_flip_test(values)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert not result.exact and 0.0 < result.p_two_sided <= 1.0
    return peak


def test_the_sign_flip_test_memory_is_flat_in_the_number_of_stimuli() -> None:
    small = _sign_flip_peak(1_000)
    large = _sign_flip_peak(10_000)
    # Drawing every sign at once (as the test did) held 9,999 x 16 bytes a stimulus:
    # 1.6 GB at 10^4 stimuli against 160 MB at 10^3; drawn in blocks, about 8 MB at both.
    assert large <= 1.5 * max(small, 2**20), (small, large)
