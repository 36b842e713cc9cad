"""Hostile specs and lines: alias bombs, deep nesting, huge ``runs``. Each ends in a located
error naming the limit and how to raise it, within a bounded time and memory."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.badinput.conftest import EVAL_YAML, EXPERIMENT_YAML

OUT = ("--output-dir", "out")

MEMORY_CAP = 1024 * 1024 * 1024
"""Address space of each vally process here: far below what the attacks used to take."""


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def capped_vally(*args: str | Path, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m vally ARGS`` under a 1 GiB memory cap and a 60 s timeout; no traceback."""
    proc = subprocess.run(
        [sys.executable, "-m", "vally", *map(str, args)],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_capped,
        check=False,
    )
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-3000:]
    return proc


ALIAS_BOMB = """\
name: bomb
defaults: {runs: 1, executor: {name: mock}}
x-a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
x-b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
x-c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
x-d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
x-e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
x-f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
x-g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
x-h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
x-i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
stimuli: [{name: s, prompt: hi}]
"""


@pytest.mark.parametrize("command", ["lint", "eval"])
def test_an_alias_bomb_is_refused_at_the_alias_that_passes_the_limit(
    tmp_path: Path, command: str
) -> None:
    (tmp_path / "bomb.eval.yaml").write_text(ALIAS_BOMB, encoding="utf-8")
    args = ["bomb.eval.yaml"] if command == "lint" else ["-e", "bomb.eval.yaml", *OUT]
    result = capped_vally(command, *args, cwd=tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    # 9**6 > 200,000: the sixth level (x-f, line 8) is the first to pass the default limit
    assert "bomb.eval.yaml:8:" in output
    assert "more than 200000 nodes through aliases" in output
    assert "VALLY_MAX_YAML_NODES" in output
    assert not (tmp_path / "out").exists()


def test_the_alias_limit_can_be_raised(tmp_path: Path) -> None:
    five_levels = "\n".join([*ALIAS_BOMB.splitlines()[:7], "stimuli: [{name: s, prompt: hi}]"])
    (tmp_path / "b.eval.yaml").write_text(five_levels + "\n", encoding="utf-8")
    # 9**5 nodes: over a limit of 50,000, under one of 100,000
    low = capped_vally("lint", "b.eval.yaml", cwd=tmp_path, VALLY_MAX_YAML_NODES="50000")
    assert low.returncode == 1 and "more than 50000 nodes" in low.stdout + low.stderr
    high = capped_vally("lint", "b.eval.yaml", cwd=tmp_path, VALLY_MAX_YAML_NODES="100_000")
    assert "nodes through aliases" not in high.stdout + high.stderr


def test_a_self_referencing_alias_is_refused(tmp_path: Path) -> None:
    text = "name: loop\nx: &a [1, *a]\nstimuli: [{name: s, prompt: hi}]\n"
    (tmp_path / "loop.eval.yaml").write_text(text, encoding="utf-8")
    result = capped_vally("lint", "loop.eval.yaml", cwd=tmp_path)
    assert result.returncode == 1
    assert "loop.eval.yaml:2:" in result.stdout + result.stderr
    assert "refers to a node that contains it" in result.stdout + result.stderr


@pytest.mark.parametrize("command", ["lint", "eval"])
def test_5000_deep_yaml_is_refused_with_its_location(tmp_path: Path, command: str) -> None:
    text = "name: deep\nx: " + "[" * 5000 + "]" * 5000 + "\nstimuli: [{name: s, prompt: hi}]\n"
    (tmp_path / "deep.eval.yaml").write_text(text, encoding="utf-8")
    args = ["deep.eval.yaml"] if command == "lint" else ["-e", "deep.eval.yaml", *OUT]
    result = capped_vally(command, *args, cwd=tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 1
    # the document's mapping is level 1, so the 100th '[' (column 103 of line 2) is the 101st
    assert "deep.eval.yaml:2:103" in output
    assert "nested deeper than 100 levels" in output and "VALLY_MAX_YAML_DEPTH" in output


def test_a_bad_limit_value_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "eval.yaml").write_text(EVAL_YAML, encoding="utf-8")
    result = capped_vally("lint", "eval.yaml", cwd=tmp_path, VALLY_MAX_YAML_DEPTH="lots")
    assert result.returncode == 1
    assert "VALLY_MAX_YAML_DEPTH='lots' is not a positive integer" in result.stdout


HUGE_RUNS = """\
name: huge
defaults: {runs: 99999999999999999999999, executor: {name: mock}}
stimuli: [{name: s, prompt: hi}]
"""


@pytest.mark.parametrize("command", ["lint", "eval"])
def test_huge_runs_in_a_spec_are_refused_at_the_field(tmp_path: Path, command: str) -> None:
    (tmp_path / "huge.eval.yaml").write_text(HUGE_RUNS, encoding="utf-8")
    args = ["huge.eval.yaml"] if command == "lint" else ["-e", "huge.eval.yaml", *OUT]
    result = capped_vally(command, *args, cwd=tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 1
    assert "huge.eval.yaml:2:18" in output and "defaults.runs" in output
    assert "more than the limit of 100000 trials" in output and "VALLY_MAX_TRIALS" in output
    assert not (tmp_path / "out").exists()


def test_a_million_runs_flag_is_refused_before_any_trial(tmp_path: Path) -> None:
    (tmp_path / "eval.yaml").write_text(EVAL_YAML, encoding="utf-8")
    result = capped_vally("eval", "-e", "eval.yaml", "--runs", "1000000", *OUT, cwd=tmp_path)
    assert result.returncode == 1
    assert "the run would plan 1000000 trials, more than the limit of 100000" in result.stderr
    assert "VALLY_MAX_TRIALS" in result.stderr
    assert not (tmp_path / "out").exists()


DEEP_LINE = "[" * 100_000 + "]" * 100_000
"""A JSON line 100,000 levels deep: ``json.loads`` alone raises ``RecursionError``."""


def _one_record(project: Path) -> str:
    """The results.jsonl text of a finished one-trial mock run in ``project``."""
    (project / "eval.yaml").write_text(EVAL_YAML, encoding="utf-8")
    result = capped_vally("eval", "-e", "eval.yaml", "--output-dir", "runs", cwd=project)
    assert result.returncode == 0, result.stderr
    (run,) = (project / "runs").iterdir()
    return (run / "results.jsonl").read_text(encoding="utf-8")


def test_a_100000_deep_line_into_grade_is_a_located_error(tmp_path: Path) -> None:
    stdin = _one_record(tmp_path) + DEEP_LINE + "\n"
    proc = subprocess.run(
        [sys.executable, "-m", "vally", "grade", "-e", "eval.yaml"],
        cwd=tmp_path,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 1
    assert "line 2: JSON nested deeper than 164 levels" in proc.stderr
    assert "VALLY_MAX_JSON_DEPTH" in proc.stderr


@pytest.mark.parametrize("where", ["first", "last"])
def test_a_100000_deep_line_into_compare_is_a_located_error(tmp_path: Path, where: str) -> None:
    record = _one_record(tmp_path)
    lines = [DEEP_LINE + "\n", record] if where == "first" else [record, DEEP_LINE + "\n"]
    (tmp_path / "deep.jsonl").write_text("".join(lines), encoding="utf-8")
    result = capped_vally(
        "compare", "--baseline", "deep.jsonl", "--treatment", "deep.jsonl", cwd=tmp_path
    )
    assert result.returncode == 1
    number = 1 if where == "first" else 2
    assert f"deep.jsonl:{number}: JSON nested deeper than 164 levels" in result.stderr


AGENT = """\
#!/bin/sh
# A hostile agent: one event line 100,000 levels deep, then a normal answer.
printf '{"type": "tool_call", "data": {"toolName": "x", "input": '
printf '%100000s' '' | tr ' ' '['
printf '%100000s' '' | tr ' ' ']'
printf '}}\\n'
printf '{"type": "assistant_message", "data": {"content": "Done: all good"}}\\n'
"""

DEEP_EVENTS_EVAL = """\
name: deep-events
defaults:
  runs: 2
  executor:
    name: command
    config: {command: ["sh", "{agent}"], events: vally}
stimuli:
  - name: s1
    prompt: hello
    graders:
      - {type: output-contains, config: {substring: "all good"}}
"""


def test_a_100000_deep_event_line_is_one_error_event_not_a_failed_trial(tmp_path: Path) -> None:
    (tmp_path / "agent.sh").write_text(AGENT, encoding="utf-8")
    spec = DEEP_EVENTS_EVAL.replace("{agent}", str(tmp_path / "agent.sh"))
    (tmp_path / "eval.yaml").write_text(spec, encoding="utf-8")
    result = capped_vally("eval", "-e", "eval.yaml", *OUT, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    (run,) = (tmp_path / "out").iterdir()
    records = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert len(records) == 2
    for record in records:
        assert record["status"] == "success" and record["error"] is None
        assert record["gradeResult"]["passed"] is True
        errors = [e["data"] for e in record["trajectory"]["events"] if e["type"] == "error"]
        assert any("line 1" in e["message"] and "deeper than 100" in e["message"] for e in errors)


SIMILAR_NAMES = """\
name: names
defaults:
  runs: 1
  executor: {name: mock, config: {output: "Done: {prompt}"}}
stimuli:
  - {name: "a b", prompt: first}
  - {name: "a?b", prompt: second}
  - {name: "a_b", prompt: third}
"""


def test_names_differing_only_in_unsafe_characters_keep_their_own_trial_folders(
    tmp_path: Path,
) -> None:
    (tmp_path / "eval.yaml").write_text(SIMILAR_NAMES, encoding="utf-8")
    result = capped_vally("eval", "-e", "eval.yaml", *OUT, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (run,) = (tmp_path / "out").iterdir()
    metadata = [json.loads(p.read_text()) for p in run.rglob("metadata.json")]
    assert sorted(m["stimulus"] for m in metadata) == ["a b", "a?b", "a_b"]
    records = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    by_name = {r["stimulusName"]: r["trajectory"]["output"] for r in records}
    assert by_name == {"a b": "Done: first", "a?b": "Done: second", "a_b": "Done: third"}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("x" * 300, "stimulus name is 300 characters long, more than 200"),
        ('"a\\0b"', "holds the control character U+0000"),
        ('"tab\\there"', "holds the control character U+0009"),
    ],
)
@pytest.mark.parametrize("command", ["lint", "eval"])
def test_bad_stimulus_names_are_refused_by_lint_and_before_the_run(
    tmp_path: Path, name: str, expected: str, command: str
) -> None:
    spec = f"name: n\ndefaults: {{runs: 1, executor: mock}}\nstimuli:\n  - name: {name}\n"
    (tmp_path / "n.eval.yaml").write_text(spec + "    prompt: hi\n", encoding="utf-8")
    args = ["n.eval.yaml"] if command == "lint" else ["-e", "n.eval.yaml", *OUT]
    result = capped_vally(command, *args, cwd=tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 1
    assert "n.eval.yaml:4:" in output and expected in output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("variants", "expected"),
    [
        (("a b", "a?b"), "variants 'a b' and 'a?b' would share the run folder 'a_b'"),
        (("Fast", "fast"), "variants 'Fast' and 'fast' would share the run folder"),
        (("ok", "bad\u0000"), "holds the control character U+0000"),
    ],
)
def test_variants_that_would_share_a_folder_or_hold_controls_are_refused(
    tmp_path: Path, variants: tuple[str, str], expected: str
) -> None:
    (tmp_path / "one.eval.yaml").write_text(EVAL_YAML, encoding="utf-8")
    first, second = (json.dumps(v) for v in variants)
    experiment = EXPERIMENT_YAML.replace("baseline: a", f"baseline: {first}")
    experiment = experiment.replace("\n  a:\n", f"\n  {first}:\n").replace(
        "\n  b:\n", f"\n  {second}:\n"
    )
    (tmp_path / "experiment.yaml").write_text(experiment, encoding="utf-8")
    result = capped_vally("experiment", "run", "experiment.yaml", *OUT, cwd=tmp_path)
    assert result.returncode == 1, result.stdout
    assert expected in result.stderr
    assert not (tmp_path / "out").exists()
