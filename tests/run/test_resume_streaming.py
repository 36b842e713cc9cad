"""``--resume`` streams the kept records: deciding what runs again and rewriting
``results.jsonl`` holds one record at a time, and the kept records are read back from the
run folder whenever they are needed."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

from vally import EvalRequest, run_eval
from vally.engine.evals import prepare_eval

STIMULI = 2
RUNS = 100
PROMPT = "p" * 40_000
"""Each record carries its stimulus and the mock's answer: about 80 KB a line, 16 MB in
all, so that the JSON parser's own buffers (orjson 3.13 takes about 1 MB per call) stay far
below the threshold while holding the kept lines would not."""

SPEC = f"""\
name: big
defaults:
  runs: {RUNS}
  executor: {{name: mock, config: {{output: 'done {{prompt}}'}}}}
graders: [{{type: output-contains, config: {{substring: done}}}}]
stimuli:
  - {{name: a, prompt: a{PROMPT}}}
  - {{name: b, prompt: b{PROMPT}}}
"""


def _request(tmp_path: Path, resume: Path | None = None) -> EvalRequest:
    spec = tmp_path / "eval.yaml"
    if not spec.exists():
        spec.write_text(SPEC, encoding="utf-8")
    return EvalRequest(
        eval_specs=[str(spec)],
        output_dir=str(tmp_path / "out"),
        console=False,
        resume=str(resume) if resume else None,
    )


def test_resume_holds_one_kept_record_at_a_time(tmp_path: Path) -> None:
    first = run_eval(_request(tmp_path))
    run_dir = first.run.run_dir
    assert run_dir is not None and len(first.records) == STIMULI * RUNS
    results = run_dir / "results.jsonl"
    lines = results.read_text(encoding="utf-8").splitlines(keepends=True)
    cancelled = json.loads(lines[3])
    cancelled["status"] = "cancelled"
    lines[3] = json.dumps(cancelled) + "\n"
    dropped = lines[3]
    kept = lines[:3] + lines[4:-5]
    results.write_text("".join(lines[:-5]), encoding="utf-8")  # the last five never ended
    size = results.stat().st_size

    prepared, _ = prepare_eval(_request(tmp_path, run_dir))
    tracemalloc.start()
    try:
        plan = prepared.resume(run_dir)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # Holding the kept lines or records (as resuming did) costs at least the file's size.
    assert peak < size / 5, (peak, size)
    assert results.read_text(encoding="utf-8") == "".join(kept)
    assert (run_dir / "results.superseded.jsonl").read_text(encoding="utf-8") == dropped
    assert len(plan.to_run) == 6 and len(prepared.reused) == len(kept)

    # The kept records are read back from the file, and only they, even once the resumed
    # run appends its own.
    with results.open("a", encoding="utf-8") as handle:
        handle.write(lines[-1])
    assert [r.trial_id for r in prepared.reused] == [json.loads(k)["trialId"] for k in kept]
    results.write_text("".join(kept), encoding="utf-8")

    resumed = prepared.execute(run_dir)
    assert len(resumed.records) == STIMULI * RUNS
    assert resumed.count("success") == STIMULI * RUNS
    assert sorted(r.trial_id for r in resumed.records) == sorted(r.trial_id for r in first.records)
