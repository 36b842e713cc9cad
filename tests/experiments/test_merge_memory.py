"""``experiment merge`` streams: its peak memory does not grow with the number of records,
sealed or not, and the merged file and summaries are what the shards hold."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import merge_memory  # noqa: E402


def _shards(tmp_path: Path, records: int, stimuli: int = merge_memory.STIMULI) -> Path:
    folder = tmp_path / str(records)
    folder.mkdir()
    merge_memory.prepare(folder, records, 4, stimuli)
    return folder


@pytest.mark.parametrize(
    ("mode", "out"),
    [
        ("merge", "merged"),
        ("unsealed", "merged-unsealed"),
        ("command", "merged-command"),
        ("command_unsealed", "merged-command-unsealed"),
    ],
)
def test_merge_passes_lines_through_and_counts_every_record(
    tmp_path: Path, mode: str, out: str
) -> None:
    folder = _shards(tmp_path, 300)
    merge_memory.measure(mode, folder)
    merged = (folder / out / "a" / "results.jsonl").read_text(encoding="utf-8")
    shard_lines = [
        line
        for shard in range(1, 5)
        for line in (folder / "unsealed" / f"shard-{shard}" / "a" / "results.jsonl").open(
            encoding="utf-8"
        )
    ]
    assert merged == "".join(shard_lines)
    summary = json.loads((folder / out / "a" / "run-summary.jsonl").read_text())
    assert (summary["trials"], summary["passed"], summary["failed"]) == (300, 200, 100)
    assert [s["stimulusName"] for s in summary["stimuli"][:3]] == ["s0", "s1", "s2"]
    assert all(s["trials"] == 3 for s in summary["stimuli"])


@pytest.mark.slow
def test_merge_peak_memory_is_flat_in_the_number_of_records(tmp_path: Path) -> None:
    """From 10^4 to 10^5 records at 1,000 stimuli (so each report row, summary stimulus
    and seal row holds 10 and then 100 trials), sealed and unsealed, the merge path and
    the whole command."""
    small, large = _shards(tmp_path, 10_000, 1000), _shards(tmp_path, 100_000, 1000)
    plan = [merge_memory.measure("plan", folder)["peak_mb"] for folder in (small, large)]
    for mode in ("merge", "unsealed", "command", "command_unsealed"):
        # The peak above what the plan takes (snapshot, manifests, index). Holding the
        # records (as merge did), or a shard seal's or a report row's failed records,
        # adds KBs per record: 9 x 10^4 more records would add > 50 MB. The plan's own
        # peak moves by a few MB with the heap's layout (the same shards under another
        # folder name: 68 MB or 72 MB), hence the 15 MB floor.
        added = [
            merge_memory.measure(mode, folder)["peak_mb"] - base
            for folder, base in zip((small, large), plan, strict=True)
        ]
        assert added[1] <= 1.5 * max(added[0], 15.0), (mode, added)
