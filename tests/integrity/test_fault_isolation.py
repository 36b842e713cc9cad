"""One bad trial errors (or is recorded for) that trial only: the run goes on and every
other trial keeps its record (issue 17, case 4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.backends.docker_helpers import busybox_image, docker_api  # noqa: F401
from tests.integrity.conftest import agent_script, read_records, vally, write_eval


def test_a_lone_surrogate_in_an_event_does_not_stop_the_run(project: Path) -> None:
    agent = agent_script(
        project,
        r"""
        printf '{"type":"assistant_message","data":{"content":"bad \\ud800 text"}}\n'
        """,
    )
    write_eval(
        project,
        f"""
        name: e
        defaults:
          executor: {{name: command, config: {{command: [sh, "{agent}"], events: vally}}}}
        stimuli:
          - name: s1
            prompt: hi
            graders: [{{type: output-contains, config: {{substring: bad}}}}]
          - name: s2
            prompt: hi
            graders: [{{type: output-contains, config: {{substring: text}}}}]
        """,
    )
    out = project / "out"
    done = vally(
        "eval", "-e", "evals/eval.yaml", "--output-dir", out, "--workers", "1", cwd=project
    )
    records = read_records(done.run_dir(out) / "results.jsonl")
    assert sorted(r["stimulusName"] for r in records) == ["s1", "s2"]
    assert all(r["status"] == "success" and r["gradeResult"]["passed"] for r in records)
    assert "bad \ufffd text" in records[0]["trajectory"]["output"]
    assert done.code == 0, done.stderr


def test_a_file_name_that_is_not_utf8_does_not_stop_the_run(project: Path) -> None:
    agent = agent_script(
        project,
        """
        touch "$(printf 'bad\\377name.txt')"
        echo done
        """,
    )
    write_eval(
        project,
        f"""
        name: e
        defaults:
          executor: {{name: command, config: {{command: [sh, "{agent}"]}}}}
        stimuli:
          - name: s1
            prompt: hi
            graders: [{{type: file-exists, config: {{path: "*.txt"}}}}]
          - name: s2
            prompt: hi
            graders: [{{type: output-contains, config: {{substring: done}}}}]
        """,
    )
    out = project / "out"
    done = vally("eval", "-e", "evals/eval.yaml", "--output-dir", out, cwd=project)
    records = read_records(done.run_dir(out) / "results.jsonl")
    assert sorted(r["stimulusName"] for r in records) == ["s1", "s2"]
    by_name = {r["stimulusName"]: r for r in records}
    assert "bad\ufffdname.txt" in by_name["s1"]["gradeResult"]["details"][0]["evidence"]
    assert done.code == 0, done.stderr


DOCKER_SPEC = r"""
name: e
defaults:
  executor: {name: command, config: {command: [sh, -c, "{prompt}"], events: vally}}
stimuli:
  - name: surrogate
    prompt: >-
      printf '{"type":"assistant_message","data":{"content":"bad \\ud800 text"}}\n'
    graders: [{type: output-contains, config: {substring: bad}}]
  - name: bad-name
    prompt: >-
      touch "$(printf 'bad\377name.txt')" &&
      printf '{"type":"assistant_message","data":{"content":"done"}}\n'
    graders: [{type: file-exists, config: {path: "*.txt"}}]
"""


@pytest.mark.docker
def test_bad_text_and_names_in_docker_error_nothing(
    project: Path,
    busybox_image: str,  # noqa: F811
) -> None:
    write_eval(project, DOCKER_SPEC)
    out = project / "out"
    done = vally(
        "eval", "-e", "evals/eval.yaml", "--output-dir", out, "--backend", "docker",
        "--backend-args", f"image={busybox_image}", "--backend-args", "pull=never", cwd=project,
    )  # fmt: skip
    records = {r["stimulusName"]: r for r in read_records(done.run_dir(out) / "results.jsonl")}
    assert set(records) == {"surrogate", "bad-name"}, done.stderr
    assert all(r["status"] == "success" for r in records.values()), done.stderr
    assert "\ufffd" in records["surrogate"]["trajectory"]["output"]
    evidence = records["bad-name"]["gradeResult"]["details"][0]["evidence"]
    assert "bad\ufffdname.txt" in evidence
    assert done.code == 0, done.stderr
