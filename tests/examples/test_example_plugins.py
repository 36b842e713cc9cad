"""Every example plugin under plugins/examples/, driven through the real CLI.

Across the tests each specifier form of the plugin flags is used at least once:
(1) an installed plugin name, (2) a distribution name, (3) ``module:Attr``,
(4) a ``.py`` file and a package folder.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from .conftest import EXAMPLES, run_vally

DISTRIBUTIONS = {
    "vally-word-count-grader": ("grader", "word-count"),
    "vally-csv-reporter": ("reporter", "csv"),
    "vally-worktree-backend": ("backend", "worktree"),
    "vally-script-executor": ("executor", "script"),
    "vally-jsonl-provider": ("eval_provider", "dataset"),
    "vally-balanced-shards": ("shard_strategy", "balanced"),
    "vally-echo-llm": ("llm_provider", "echo"),
    "vally-prompt-set-exporter": ("exporter", "prompt-set"),
}

EVAL = """\
name: examples-demo
defaults:
  runs: 2
  timeout: 30s
  executor: { name: script }
stimuli:
  - name: create-file
    prompt: Create a file named hello.txt that says hello world.
    graders:
      - { type: file-contains, config: { path: hello.txt, value: hello world } }
      - { type: file-contains, config: { path: README.md, value: from the repository } }
      - { type: no-errors }
      - { type: word-count, config: { max_words: 5 } }
  - name: add
    prompt: "What is 2 + 3?"
    graders:
      - { type: answer-equals, config: { expected: The answer is 5 } }
      - { type: no-errors }
  - name: failing
    prompt: "What is 2 + 2?"
    graders:
      - { type: answer-equals, config: { expected: The answer is 5 } }
"""


def _records(run_parent: Path) -> list[dict[str, object]]:
    (results,) = run_parent.glob("*/results.jsonl")
    return [json.loads(line) for line in results.read_text().splitlines()]


def test_every_example_is_installed_and_listed() -> None:
    rows = json.loads(run_vally(["plugins", "list", "--format", "json"]).stdout)
    for dist, (kind, name) in DISTRIBUTIONS.items():
        (row,) = [r for r in rows if r["name"] == name and r["kind"] == kind]
        assert row["status"] == "ok", row
        assert row["source"].startswith(dist), row
        assert (EXAMPLES / dist / "pyproject.toml").is_file()
        assert (EXAMPLES / dist / "README.md").is_file()
        assert list((EXAMPLES / dist / "tests").glob("test_*.py"))


def test_file_and_package_plugins_are_listed() -> None:
    result = run_vally(
        [
            "plugins", "list", "--kind", "grader", "--format", "json",
            "--plugin", "./plugins/examples/single_file/no_errors.py",
            "--plugin", "./plugins/examples/package_plugin/answer_checks",
        ]
    )
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    assert rows["no-errors"]["status"] == "ok"
    assert "single_file/no_errors.py (sha256 " in rows["no-errors"]["source"]
    assert "answer_checks" in rows["answer-equals"]["source"]


def test_eval_with_backend_executor_graders_and_reporter(tmp_path: Path, git_repo: Path) -> None:
    spec = tmp_path / "eval.yaml"
    spec.write_text(EVAL)
    out = tmp_path / "out"
    result = run_vally(
        [
            "eval", "-e", str(spec), "--output-dir", str(out),
            # (4) a .py file, relative to the current folder, and a package folder
            "--grader-plugin", "./plugins/examples/single_file/no_errors.py",
            "--grader-plugin", "plugins/examples/package_plugin/answer_checks",
            # (3) module:Attr
            "--grader-plugin", "vally_word_count_grader:WordCountGrader",
            # (2) distribution names
            "--executor-plugin", "vally-script-executor",
            "--reporter-plugin", "vally-csv-reporter",
            # (1) an installed name
            "--backend", "worktree", "--backend-args", f"repo={git_repo}",
            "--backend-args", "ref=v1",
        ]
    )
    assert "Summary" in result.stdout
    records = _records(out)
    assert len(records) == 6
    assert {r["status"] for r in records} == {"success"}
    verdicts = {(r["stimulusName"], r["gradeResult"]["passed"]) for r in records}  # type: ignore[index]
    assert verdicts == {("create-file", True), ("add", True), ("failing", False)}
    grader_types = {
        d["type"] for r in records for d in r["gradeResult"]["details"]  # type: ignore[index]
    }
    assert {"no-errors", "answer-equals", "word-count", "file-contains"} <= grader_types
    # the script executor parsed the fake agent's STEP line into a tool call
    create = next(r for r in records if r["stimulusName"] == "create-file")
    assert create["trajectory"]["metrics"]["toolCallCount"] == 1  # type: ignore[index]
    # the CSV reporter wrote one row per trial into the run folder
    (csv_file,) = out.glob("*/results.csv")
    rows = list(csv.DictReader(csv_file.open()))
    assert len(rows) == 6
    assert sorted(r["passed"] for r in rows) == ["false"] * 2 + ["true"] * 4
    # every worktree was removed again
    worktrees = (git_repo / ".git" / "worktrees")
    assert not worktrees.exists() or not list(worktrees.iterdir())


def test_dataset_provider_by_name_and_by_module_attr(tmp_path: Path) -> None:
    data = tmp_path / "math.jsonl"
    data.write_text(
        '{"name": "add", "prompt": "What is 2 + 3?", "expected": "5"}\n'
        '{"name": "sing", "prompt": "Sing a song", "expected": "la la"}\n'
    )
    out = tmp_path / "out1"
    # (1) the installed name
    run_vally(
        ["eval", "-e", str(data), "--eval-plugin", "dataset", "--output-dir", str(out),
         "--param", "dataset.runs=2"]
    )
    records = _records(out)
    assert sorted((r["stimulusName"], r["gradeResult"]["passed"]) for r in records) == [  # type: ignore[index]
        ("add", True), ("add", True), ("sing", False), ("sing", False)
    ]
    table = tmp_path / "qa.csv"
    table.write_text("id,question,answer\nq1,What is 40 + 2?,42\n")
    out = tmp_path / "out2"
    # (3) module:Attr, with the columns renamed through params
    run_vally(
        ["eval", "-e", str(table), "--output-dir", str(out),
         "--eval-plugin", "vally_jsonl_provider:DatasetEvalProvider",
         "--param", "dataset.name_column=id", "--param", "dataset.prompt_column=question",
         "--param", "dataset.expected_column=answer", "--require-pass"]
    )
    (record,) = _records(out)
    assert record["stimulusName"] == "q1"
    assert record["gradeResult"]["passed"] is True  # type: ignore[index]


def test_dataset_provider_error_names_file_and_line(tmp_path: Path) -> None:
    data = tmp_path / "bad.jsonl"
    data.write_text('{"name": "a", "question": "x"}\n')
    result = run_vally(
        ["eval", "-e", str(data), "--eval-plugin", "dataset", "--output-dir", str(tmp_path)],
        check=False,
    )
    assert result.returncode != 0
    assert "bad.jsonl:1: no prompt in column 'prompt'" in result.stdout + result.stderr


EXPERIMENT = """\
name: shards-demo
evals: ["timed.eval.yaml"]
vary: [/environment/env/STYLE]
baseline: a
variants:
  a: {}
  b: { environment: { env: { STYLE: b } } }
"""

TIMED = """\
name: timed
environment: { env: { STYLE: a } }
defaults: { runs: 1, executor: { name: script } }
stimuli:
  - { name: long, prompt: "What is 1 + 1?", tags: { duration: 10m } }
  - { name: mid, prompt: "What is 1 + 2?", tags: { duration: 5m } }
  - { name: short1, prompt: "What is 1 + 3?", tags: { duration: 1m } }
  - { name: short2, prompt: "What is 1 + 4?", tags: { duration: 1m } }
"""


def test_balanced_shards_through_experiment_run(tmp_path: Path) -> None:
    shards = 2
    (tmp_path / "exp.yaml").write_text(EXPERIMENT)
    (tmp_path / "timed.eval.yaml").write_text(TIMED)
    env = {"VALLY_BALANCED_SPECS": str(tmp_path / "timed.eval.yaml")}
    selected: list[list[str]] = []
    # (1) the installed name for shard 1, (2) the distribution name for shard 2
    for index, specifier in ((1, "balanced"), (2, "vally-balanced-shards")):
        run_vally(
            ["experiment", "run", str(tmp_path / "exp.yaml"), "--shard", f"{index}/{shards}",
             "--run-id", "r1", "--shard-strategy", specifier, "--output-dir", str(tmp_path / "o")],
            env=env,
        )
        manifest = json.loads(
            (tmp_path / "o" / "r1" / f"shard-{index}-of-{shards}" / "shard-manifest.json")
            .read_text()
        )
        assert manifest["strategy"] == "balanced"
        assert manifest["finished"] is True
        selected.append(manifest["selectedKeys"])
    # longest first onto the lighter shard: 10m+5m+1m+1m on each side
    assert selected[0] == [
        "a/timed/long/default/0", "a/timed/mid/default/0",
        "a/timed/short1/default/0", "b/timed/short1/default/0",
    ]
    assert selected[1] == [
        "a/timed/short2/default/0", "b/timed/long/default/0",
        "b/timed/mid/default/0", "b/timed/short2/default/0",
    ]


def test_prompt_set_exporter_by_distribution_with_arguments(tmp_path: Path) -> None:
    spec = tmp_path / "eval.yaml"
    spec.write_text(EVAL)
    out = tmp_path / "out"
    result = run_vally(
        [
            "export", "-e", str(spec), "--exporter", "vally-prompt-set-exporter",
            "--output-dir", str(out), "--", "file=prompts.jsonl", "tags=false",
        ]
    )  # fmt: skip
    assert "prompts.jsonl" in result.stdout
    lines = [json.loads(x) for x in (out / "prompts.jsonl").read_text().splitlines()]
    assert lines and all(set(line) == {"name", "prompts"} for line in lines)
    assert lines[0]["name"] == "create-file"
