"""Two crafted eval runs graded by two graders (``correct`` and ``style``), for the graded
comparison of the API and the dashboard: against the baseline, the candidate

* ``polish`` improves (``style`` 0.5 -> 1.0, still failing: no flip);
* ``tidy`` regresses (``style`` 1.0 -> 0.25, still passing: no flip);
* ``login`` flips pass -> fail (``correct`` 1.0 -> 0.0);
* ``search`` flips fail -> pass (``correct`` 0.0 -> 1.0);
* ``steady`` stays as it was;
* ``legacy`` is missing (the baseline only).

Each case has two repeats; every trial's output names its run and case, so the side by
side view can be checked.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from tests.history.synth import RunSpec, _summary, _trajectory, trial_record

BASELINE = "graded-base"
CANDIDATE = "graded-cand"
EVAL = "checkout"

# case -> (baseline (correct, style), candidate (correct, style)); None: not in that run
CASES: dict[str, tuple[tuple[float, float] | None, tuple[float, float] | None]] = {
    "polish": ((0.0, 0.5), (0.0, 1.0)),
    "tidy": ((1.0, 1.0), (1.0, 0.25)),
    "login": ((1.0, 1.0), (0.0, 1.0)),
    "search": ((0.0, 1.0), (1.0, 1.0)),
    "steady": ((1.0, 1.0), (1.0, 1.0)),
    "legacy": ((1.0, 1.0), None),
}
REPEATS = 2


def output_of(run_id: str, case: str) -> str:
    """The final output every trial of ``case`` in ``run_id`` gives."""
    return f"answer of {run_id} for {case}: <b>{case}</b>"


def _grader(name: str, score: float) -> dict[str, Any]:
    return {
        "name": name,
        "type": "output-contains" if name == "correct" else "regex",
        "passed": score >= 1.0,
        "score": score,
        "evidence": f"{name} scored {score}",
        "status": "success",
        "required": name == "correct",
        "weight": 1.0,
        "turn": None,
        "details": [],
        "metadata": {},
    }


def records(run_id: str) -> list[dict[str, Any]]:
    """The run's trial records, as written to ``results.jsonl``."""
    spec = RunSpec(run_id=run_id, evals=(EVAL,), models=("gpt-a",), trials=REPEATS)
    rng = random.Random(7)
    side = 0 if run_id == BASELINE else 1
    out = []
    for case, sides in CASES.items():
        scores = sides[side]
        if scores is None:
            continue
        for index in range(REPEATS):
            record = trial_record(spec, rng, EVAL, case, "gpt-a", None, index)
            correct, style = scores
            passed = correct >= 1.0
            record["status"], record["error"] = "success", None
            record["trajectory"] = _trajectory(rng, record["stimulus"], "gpt-a", passed)
            record["trajectory"]["output"] = output_of(run_id, case)
            record["gradeResult"] = {
                "passed": passed,
                "score": (correct + style) / 2,
                "threshold": None,
                "mode": "binary",
                "hasGraders": True,
                "errored": False,
                "details": [_grader("correct", correct), _grader("style", style)],
                "constraintViolations": [],
            }
            out.append(record)
    return out


def write_graded_runs(root: Path) -> Path:
    """Write both runs as run folders under ``root``; returns ``root``."""
    for run_id in (BASELINE, CANDIDATE):
        folder = root / run_id
        folder.mkdir(parents=True, exist_ok=True)
        spec = RunSpec(run_id=run_id, evals=(EVAL,), models=("gpt-a",))
        with (folder / "results.jsonl").open("w", encoding="utf-8") as results:
            for record in records(run_id):
                results.write(json.dumps(record) + "\n")
        (folder / "run-summary.jsonl").write_text(json.dumps(_summary(spec, EVAL, None)) + "\n")
    return root
