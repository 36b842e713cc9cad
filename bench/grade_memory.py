"""Measure the peak memory of ``vally grade`` against the number and size of its records.

Usage (from the repository root)::

    python3 bench/grade_memory.py                      # 3 and 6 records of 30 MB texts
    python3 bench/grade_memory.py --counts 3 6 12 --mb 10
    python3 bench/grade_memory.py --json out.json      # also write the numbers as JSON

Each record is a trial record whose output and last message hold ``--mb`` million
characters inline (as records written before texts were offloaded do, the worst case for a
reader). ``vally grade`` re-grades them with an ``output-contains`` grader; the peak
resident memory of the process (``ru_maxrss`` of the child) is reported per record count.
Memory that stays flat as the count grows is the goal: grade holds one record at a time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

SPEC = """\
name: greetings
stimuli:
  - name: hello
    prompt: Create hello.txt saying hi.
    graders: [{type: output-contains, config: {substring: xxx}}]
"""


def record_line(index: int, chars: int) -> str:
    """One trial record (from the records reference's example) with big texts."""
    example = ROOT / "tests" / "integrity" / "old_record.json"
    record: dict[str, Any] = json.loads(example.read_text(encoding="utf-8"))
    big = "x" * chars
    record["trialIndex"] = index
    record["trajectory"]["output"] = big
    for event in record["trajectory"]["events"]:
        if event["type"] == "assistant_message":
            event["data"]["content"] = big
    return json.dumps(record) + "\n"


def measure(folder: Path, count: int, chars: int) -> dict[str, Any]:
    """Write ``count`` records and grade them in a child process; its peak memory."""
    results = folder / f"results-{count}.jsonl"
    with results.open("w", encoding="utf-8") as handle:
        for index in range(count):
            handle.write(record_line(index, chars))
    # A fresh parent per measurement, so that its children's peak is this grade's alone.
    probe = (
        "import resource, subprocess, sys\n"
        "with open(sys.argv[1], 'rb') as stdin:\n"
        "    proc = subprocess.run([sys.executable, '-m', 'vally', 'grade', '-e', 'eval.yaml'],"
        " stdin=stdin, capture_output=True, text=True)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, proc.returncode)\n"
        "sys.stderr.write(proc.stderr)\n"
    )
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", probe, str(results)],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.monotonic() - started
    peak_kb, code = (int(x) for x in proc.stdout.split())
    results.unlink()
    if code != 0:
        raise SystemExit(f"vally grade failed: {proc.stderr}")
    return {
        "records": count,
        "line_mb": round(len(record_line(0, chars)) / 1e6, 1),
        "peak_rss_mb": round(peak_kb / 1024, 1),
        "seconds": round(elapsed, 2),
    }


def main() -> None:
    """Parse the flags, measure each count, print a table (and write JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[3, 6])
    parser.add_argument("--mb", type=float, default=30.0, help="million characters per text")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / ".vally.yaml").write_text("{}\n", encoding="utf-8")
        (folder / "eval.yaml").write_text(SPEC, encoding="utf-8")
        for count in sorted(args.counts):
            rows.append(measure(folder, count, int(args.mb * 1_000_000)))
            row = rows[-1]
            print(
                f"{row['records']:>4} records of {row['line_mb']:>6} MB: "
                f"peak {row['peak_rss_mb']:>8} MB in {row['seconds']:>6} s"
            )
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
