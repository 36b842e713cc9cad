"""Huge agent outputs keep records small and flagged (issue 17, case 11): output past the
executor's capture limit is marked ``truncated`` with an event saying so; texts past the
inline limit live in the trial's folder and the record points to them; ``vally grade``
reads the whole texts back and streams its input."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.backends.docker_helpers import busybox_image, docker_api  # noqa: F401
from tests.integrity.conftest import agent_script, vally, write_eval
from vally.engine.records.offload import INLINE_TEXT_LIMIT
from vally.engine.records.run_folder import name_folder

MB = 1024 * 1024


def _flood_eval(project: Path, *, limit: int) -> None:
    # 3 MiB of 'x', then a marker: past the 1 MiB capture limit when it is set.
    agent = agent_script(
        project,
        """
        head -c 3145728 /dev/zero | tr '\\0' x
        echo END-MARKER
        """,
    )
    write_eval(
        project,
        f"""
        name: flood
        defaults:
          executor:
            name: command
            config: {{command: [sh, "{agent}"], output_limit: {limit}}}
        stimuli:
          - name: flood
            prompt: go
            graders: [{{type: output-contains, config: {{substring: END-MARKER}}}}]
        """,
    )


def test_output_past_the_capture_limit_is_flagged_truncated(project: Path) -> None:
    _flood_eval(project, limit=MB)
    out = project / "out"
    done = vally("eval", "-e", "evals/eval.yaml", "--output-dir", out, cwd=project)
    run_dir = done.run_dir(out)
    (line,) = (run_dir / "results.jsonl").read_text(encoding="utf-8").splitlines()
    record = json.loads(line)
    trajectory = record["trajectory"]
    assert trajectory["truncated"] is True
    notes = [e for e in trajectory["events"] if e["type"] == "error"]
    assert [e["data"]["code"] for e in notes] == ["output_truncated"]
    assert "output_limit of 1,048,576 bytes" in notes[0]["data"]["message"]
    assert record["gradeResult"]["passed"] is False  # the marker was past the cap...
    assert len(line) < 4 * INLINE_TEXT_LIMIT  # ...and the record stays small
    for entry in record["offloaded"]:
        data = (run_dir / entry["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"]
        assert len(data) == entry["chars"] == MB


def test_big_outputs_live_in_the_trial_folder_and_grade_reads_them_back(project: Path) -> None:
    _flood_eval(project, limit=50 * MB)
    out = project / "out"
    done = vally("eval", "-e", "evals/eval.yaml", "--output-dir", out, cwd=project)
    run_dir = done.run_dir(out)
    results = run_dir / "results.jsonl"
    (line,) = results.read_text(encoding="utf-8").splitlines()
    record = json.loads(line)
    assert record["trajectory"]["truncated"] is False
    assert record["gradeResult"]["passed"] is True, record["gradeResult"]
    assert len(line) < 4 * INLINE_TEXT_LIMIT
    pointers = {e["pointer"] for e in record["offloaded"]}
    assert "/trajectory/output" in pointers
    assert len(record["trajectory"]["output"]) == INLINE_TEXT_LIMIT
    (text_file,) = {run_dir / e["path"] for e in record["offloaded"]}  # equal texts share
    assert text_file.read_text(encoding="utf-8").endswith("END-MARKER")
    assert text_file.is_relative_to(run_dir / name_folder("flood") / name_folder("flood"))

    # Re-grading from the results file sees the whole output, and writes small records.
    graded = vally(
        "grade", "-e", "evals/eval.yaml", "--output", "jsonl", cwd=project, stdin=results
    )
    assert graded.code == 0, graded.stderr
    regraded = json.loads(graded.stdout)
    assert regraded["gradeResult"]["passed"] is True
    assert len(graded.stdout) < 4 * INLINE_TEXT_LIMIT
    assert regraded["offloaded"] == record["offloaded"]

    # Piped (no file to find the texts next to), it warns and grades what is inline.
    piped = vally("grade", "-e", "evals/eval.yaml", cwd=project, stdin=results.read_bytes())
    assert piped.code == 1
    assert "were not found whole" in piped.stderr


def test_old_records_without_the_new_fields_stay_readable(tmp_path: Path) -> None:
    from vally.engine.records.run_folder import load_records

    line = json.loads(Path(__file__).with_name("old_record.json").read_text(encoding="utf-8"))
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps(line) + "\n", encoding="utf-8")
    (record,) = load_records(results)
    assert record.offloaded == [] and record.trajectory is not None
    assert record.trajectory.truncated is False
    assert (
        '"offloaded":[]' in record.to_json_line() and '"truncated":false' in record.to_json_line()
    )


@pytest.mark.docker
def test_truncation_is_flagged_in_docker_too(
    project: Path,
    busybox_image: str,  # noqa: F811
) -> None:
    write_eval(
        project,
        r"""
        name: flood
        defaults:
          executor:
            name: command
            config: {command: [sh, -c, "{prompt}"], output_limit: 1048576}
        stimuli:
          - name: flood
            prompt: head -c 3145728 /dev/zero | tr '\0' x; echo END-MARKER
        """,
    )
    out = project / "out"
    done = vally(
        "eval", "-e", "evals/eval.yaml", "--output-dir", out, "--backend", "docker",
        "--backend-args", f"image={busybox_image}", "--backend-args", "pull=never", cwd=project,
    )  # fmt: skip
    (line,) = (done.run_dir(out) / "results.jsonl").read_text(encoding="utf-8").splitlines()
    trajectory = json.loads(line)["trajectory"]
    assert trajectory["truncated"] is True, done.stderr
    assert len(line) < 4 * INLINE_TEXT_LIMIT


def test_merge_points_offloaded_texts_at_the_shard_folders(tmp_path: Path) -> None:
    from vally.models.records import OffloadedText, TrialResultRecord
    from vally_experiment.merge import _offloaded_from

    line = Path(__file__).with_name("old_record.json").read_text(encoding="utf-8")
    entry = OffloadedText(
        pointer="/trajectory/output",
        path="base/e/s/m/trial-0/texts/a.txt",
        chars=1,
        sha256="0" * 64,
    )
    record = TrialResultRecord.model_validate_json(line).model_copy(update={"offloaded": [entry]})
    shard = tmp_path / "out" / "run" / "shard-1-of-2"
    moved = _offloaded_from(record, shard, tmp_path / "merged")
    assert moved.offloaded[0].path == "../out/run/shard-1-of-2/base/e/s/m/trial-0/texts/a.txt"
    assert (tmp_path / "merged" / moved.offloaded[0].path).resolve() == (
        shard / entry.path
    ).resolve()
