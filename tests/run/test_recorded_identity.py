"""Every run records what it measured: each trial record has the ``caseHash`` of its
stimulus, and each run summary its ``evalHash``, ``suiteHash``, ``graders`` (judged or
not, by which model) and ``target``, so two runs can be compared later."""

from __future__ import annotations

import asyncio
import io
import json
import re
from pathlib import Path
from typing import Any

from vally import EvalRequest, prepare_run, run_eval
from vally.engine.evals import eval_run_request
from vally.engine.planning.variants import content_hash
from vally.models.fingerprint import case_fingerprint, suite_fingerprint
from vally.models.records import (
    GraderIdentity,
    RunSummaryRecord,
    TargetIdentity,
    TrialResultRecord,
)
from vally.specs.loading import load_eval_file
from vally_regrade.regrade import regrade
from vally_regrade.request import GradeOptions

from .conftest import write_spec

HEX16 = re.compile(r"[0-9a-f]{16}")
OLD_RECORD = Path(__file__).resolve().parents[1] / "integrity" / "old_record.json"

SPEC = """
name: ident
defaults:
  runs: 2
  model: {model}
  judge_model: judge-default
  executor: {{name: mock, config: {{output: "{output}"}}}}
graders:
  - {{type: output-contains, config: {{substring: "{substring}"}}}}
stimuli:
  - name: alpha
    prompt: "{prompt}"
    graders:
      - {{type: prompt, config: {{prompt: "Is the answer polite?"}}}}
      - {{type: prompt, name: strict, config: {{prompt: "Is it short?", model: judge-strict}}}}
  - name: beta
    prompt: b
    graders:
      - {{type: output-contains, config: {{substring: "{substring}"}}}}
"""

DEFAULTS = {"model": "model-a", "output": "hello {prompt}", "substring": "hello", "prompt": "a"}


def _spec(project: Path, folder: str, **changes: str) -> Path:
    """Write the eval of :data:`SPEC` with ``changes`` to ``evals/<folder>/eval.yaml``."""
    return write_spec(project / "evals" / folder, SPEC.format(**{**DEFAULTS, **changes}))


def _run(
    project: Path, spec: Path, *, out: str = "out", **options: Any
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run ``spec`` (ungraded unless asked: the judges need no model) and return its
    summary and records as written."""
    options.setdefault("skip_grade", True)
    result = run_eval(
        EvalRequest(
            eval_specs=[str(spec)], output_dir=str(project / out), console=False, **options
        )
    )
    run_dir = result.run.run_dir
    assert run_dir is not None
    (summary,) = _lines(run_dir / "run-summary.jsonl")
    return summary, _lines(run_dir / "results.jsonl")


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _cases(records: list[dict[str, Any]]) -> dict[str, str]:
    """Stimulus -> the case hash its records share (every record has one)."""
    cases: dict[str, set[str]] = {}
    for record in records:
        cases.setdefault(record["stimulusName"], set()).add(record["caseHash"])
    assert all(len(hashes) == 1 for hashes in cases.values()), cases
    return {name: hashes.pop() for name, hashes in cases.items()}


def test_a_plain_run_records_its_eval_suite_and_case_hashes(project: Path) -> None:
    spec = _spec(project, "ident")
    summary, records = _run(project, spec)
    assert HEX16.fullmatch(summary["evalHash"]) and HEX16.fullmatch(summary["suiteHash"])
    assert summary["configHash"] is None and summary["experiment"] is None
    loaded = load_eval_file(spec)
    expected = {
        stimulus.name: case_fingerprint(stimulus, loaded.spec.graders)
        for stimulus in loaded.spec.stimuli
    }
    assert len(records) == 4
    assert _cases(records) == expected
    assert expected["alpha"] != expected["beta"]
    assert summary["suiteHash"] == suite_fingerprint(
        ("ident", name, case) for name, case in expected.items()
    )
    assert summary["target"] == {
        "executor": "mock",
        "configDigest": content_hash({"output": "hello {prompt}"}),
        "model": "model-a",
        "variant": None,
    }


def test_only_the_target_changing_keeps_the_suite_hash(project: Path) -> None:
    base, base_records = _run(project, _spec(project, "base"))
    other_model, model_records = _run(project, _spec(project, "model", model="model-b"))
    other_output, output_records = _run(project, _spec(project, "output", output="hi {prompt}"))
    flag_model, _ = _run(project, _spec(project, "flag"), out="flag", model="model-c")
    assert base["suiteHash"] == other_model["suiteHash"] == other_output["suiteHash"]
    assert base["suiteHash"] == flag_model["suiteHash"]
    assert _cases(base_records) == _cases(model_records) == _cases(output_records)
    assert base["evalHash"] != other_model["evalHash"]  # the document differs
    assert (base["target"]["model"], other_model["target"]["model"]) == ("model-a", "model-b")
    assert flag_model["target"]["model"] == "model-c"
    assert base["target"]["configDigest"] == other_model["target"]["configDigest"]
    assert base["target"]["configDigest"] != other_output["target"]["configDigest"]


def test_changing_a_grader_or_a_prompt_changes_the_suite_hash(project: Path) -> None:
    base, base_records = _run(project, _spec(project, "base"))
    grader, grader_records = _run(project, _spec(project, "grader", substring="hi"))
    prompt, prompt_records = _run(project, _spec(project, "prompt", prompt="another task"))
    assert len({base["suiteHash"], grader["suiteHash"], prompt["suiteHash"]}) == 3
    # An eval-level grader is part of every case; a prompt only of its own.
    assert _cases(base_records)["beta"] != _cases(grader_records)["beta"]
    assert _cases(base_records)["alpha"] != _cases(prompt_records)["alpha"]
    assert _cases(base_records)["beta"] == _cases(prompt_records)["beta"]


def test_the_graders_say_which_are_judged_and_by_which_model(project: Path) -> None:
    spec = _spec(project, "ident")
    summary, _ = _run(project, spec)
    assert summary["graders"] == [
        {"name": "output-contains", "type": "output-contains", "judged": False, "model": None},
        {"name": "prompt", "type": "prompt", "judged": True, "model": "judge-default"},
        {"name": "strict", "type": "prompt", "judged": True, "model": "judge-strict"},
    ]
    flagged, _ = _run(project, spec, out="flagged", judge_model="judge-flag")
    models = {g["name"]: g["model"] for g in flagged["graders"]}
    assert models == {"output-contains": None, "prompt": "judge-flag", "strict": "judge-strict"}


def test_errored_and_cancelled_trials_have_a_case_hash(project: Path) -> None:
    spec = write_spec(
        project / "evals" / "broken",
        """
        name: broken
        defaults:
          executor: {name: mock, config: {error: "no agent"}}
        stimuli:
          - {name: alpha, prompt: a}
        """,
    )
    _, records = _run(project, spec, skip_grade=False)
    assert [r["status"] for r in records] == ["error"]
    expected = case_fingerprint(load_eval_file(spec).spec.stimuli[0])
    assert records[0]["caseHash"] == expected

    slow = write_spec(
        project / "evals" / "slow",
        """
        name: slow
        defaults:
          executor: {name: mock, config: {delay: 60s}}
        stimuli:
          - {name: alpha, prompt: a}
          - {name: beta, prompt: b}
        """,
    )
    request, _ = eval_run_request(
        EvalRequest(eval_specs=[str(slow)], workers=1, console=False)
    )
    prepared = prepare_run(request)

    async def stopped() -> Any:
        running = asyncio.ensure_future(prepared.execute_async(project / "slow-run"))
        for _ in range(600):  # until the first trial started (at most a minute)
            engine = prepared.engine
            if engine is not None and engine.scheduler is not None and engine.scheduler.started:
                break
            await asyncio.sleep(0.1)
        assert prepared.engine is not None
        prepared.engine.stop()
        return await running

    result = asyncio.run(stopped())
    assert result.cancelled
    (record,) = _lines(project / "slow-run" / "results.jsonl")
    assert (record["stimulusName"], record["status"]) == ("alpha", "cancelled")
    stimuli = load_eval_file(slow).spec.stimuli
    assert record["caseHash"] == case_fingerprint(stimuli[0])
    # The suite is every planned stimulus, beta too, which never started.
    (summary,) = _lines(project / "slow-run" / "run-summary.jsonl")
    assert summary["suiteHash"] == suite_fingerprint(
        ("slow", s.name, case_fingerprint(s)) for s in stimuli
    )


def test_a_regraded_record_has_the_case_hash_of_the_spec_it_was_graded_with(
    project: Path,
) -> None:
    _, records = _run(project, _spec(project, "ident"))
    regrader = write_spec(
        project / "evals" / "regrade",
        """
        name: ident
        graders:
          - {type: output-contains, config: {substring: hello}}
        stimuli:
          - {name: alpha, prompt: a}
          - {name: beta, prompt: b}
        """,
    )
    lines = "".join(json.dumps(record) + "\n" for record in records)
    outcome = regrade(GradeOptions(eval_spec=str(regrader)), io.StringIO(lines), cwd=project)
    loaded = load_eval_file(regrader)
    expected = {s.name: case_fingerprint(s, loaded.spec.graders) for s in loaded.spec.stimuli}
    assert len(outcome.records) == 4
    assert all(r.grade_result is not None and r.grade_result.passed for r in outcome.records)
    assert {r.stimulus_name: r.case_hash for r in outcome.records} == expected
    assert expected != _cases(records)  # graded by other graders: another case


def test_records_and_summaries_written_before_the_fields_load() -> None:
    old = json.loads(OLD_RECORD.read_text(encoding="utf-8"))
    assert "caseHash" not in old
    record = TrialResultRecord.model_validate(old)
    assert record.case_hash is None
    assert record.to_json_dict()["caseHash"] is None
    summary = RunSummaryRecord.model_validate(
        {
            "type": "run-summary",
            "runId": "r",
            "evalName": "e",
            "evalFile": None,
            "variant": None,
            "evalHash": None,
            "configHash": None,
            "threshold": None,
            "models": [None],
            "trials": 0,
            "passed": 0,
            "failed": 0,
            "errored": 0,
            "passRate": None,
            "verdict": "none",
            "stimuli": [],
            "startedAt": "2026-01-15T09:30:00.000Z",
            "completedAt": "2026-01-15T09:30:00.000Z",
            "vallyVersion": "0.1.0",
        }
    )
    assert summary.suite_hash is None and summary.graders == []
    assert summary.target == TargetIdentity()
    written = summary.to_json_dict()
    assert written["suiteHash"] is None and written["graders"] == []
    assert written["target"] == {
        "executor": None,
        "configDigest": None,
        "model": None,
        "variant": None,
    }
    again = RunSummaryRecord.model_validate(
        {**written, "graders": [{"name": "g", "type": "prompt", "judged": True}]}
    )
    assert again.graders == [GraderIdentity(name="g", type="prompt", judged=True, model=None)]
