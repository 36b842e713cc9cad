"""Bad input to ``vally eval``: fail before running, say what/where/what to do, exit 1."""

from __future__ import annotations

from pathlib import Path

from tests.badinput.conftest import vally


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_duplicate_stimulus_names_fail_before_any_trial_overwrites_another(
    project: Path,
) -> None:
    _write(
        project,
        "dup.yaml",
        "name: dup\ndefaults: {runs: 1, executor: {name: mock}}\n"
        "stimuli:\n  - {name: a, prompt: one}\n  - {name: a, prompt: two}\n",
    )
    result = vally("eval", "-e", "dup.yaml", "--output-dir", "out", cwd=project)
    assert result.returncode == 1
    assert "stimuli[1] is named 'a' like stimuli[0]" in result.stderr
    assert "dup.yaml" in result.stderr and "distinct 'name:'" in result.stderr
    assert not (project / "out").exists()


def test_grader_turn_beyond_the_turns_fails_before_running(project: Path) -> None:
    _write(
        project,
        "turn.yaml",
        "name: t\ndefaults: {runs: 1, executor: {name: mock}}\nstimuli:\n"
        "  - name: a\n    prompt: hi\n    graders:\n"
        "      - {type: output-contains, turn: 5, config: {substring: x}}\n",
    )
    result = vally("eval", "-e", "turn.yaml", "--output-dir", "out", cwd=project)
    assert result.returncode == 1
    assert "has turn: 5, but the stimulus has 1 turn" in result.stderr
    assert "the last is 0" in result.stderr
    assert not (project / "out").exists()


def test_zero_timeout_flag_is_rejected(project: Path) -> None:
    result = vally("eval", "-e", "eval.yaml", "--timeout", "0s", "--output-dir", "o", cwd=project)
    assert result.returncode == 1
    assert "--timeout must be longer than zero" in result.stderr
    assert not (project / "o").exists()


def test_zero_timeout_in_the_spec_is_a_located_schema_error(project: Path) -> None:
    text = (project / "eval.yaml").read_text().replace("  runs: 1\n", "  runs: 1\n  timeout: 0s\n")
    _write(project, "zero.yaml", text)
    result = vally("eval", "-e", "zero.yaml", "--output-dir", "o", cwd=project)
    assert result.returncode == 1
    assert "zero.yaml:4:" in result.stderr
    assert "defaults.timeout: must be longer than zero" in result.stderr


def test_workspace_that_is_a_file_fails_before_running(project: Path) -> None:
    for value in ("afile", "afile/sub"):
        result = vally(
            "eval", "-e", "eval.yaml", "--workspace", value, "--output-dir", "o", cwd=project
        )
        assert result.returncode == 1
        assert f"--workspace {value}" in result.stderr and "not a folder" in result.stderr
    assert not (project / "o").exists()


def test_plugin_config_errors_print_no_pydantic_dump(project: Path) -> None:
    result = vally(
        "eval",
        "-e",
        "eval.yaml",
        "--backend",
        "local",
        "--backend-args",
        "foo=bar",
        cwd=project,
    )
    assert result.returncode == 1
    assert "foo: Extra inputs are not permitted" in result.stderr
    assert "errors.pydantic.dev" not in result.stderr


def test_unknown_eval_provider_reads_as_english(project: Path) -> None:
    result = vally("eval", "-e", "eval.yaml", "--eval-plugin", "nope", cwd=project)
    assert result.returncode == 1
    assert "is not an eval provider name" in result.stderr


def test_missing_files_src_fails_before_any_trial(project: Path) -> None:
    _write(
        project,
        "missing.yaml",
        "name: missing\ndefaults: {runs: 3, executor: {name: mock}}\n"
        "stimuli:\n  - name: a\n    prompt: one\n"
        "    environment: {files: [{src: fixtures/nope.txt}]}\n",
    )
    result = vally("eval", "-e", "missing.yaml", "--output-dir", "out", cwd=project)
    assert result.returncode == 1
    assert "files[].src" in result.stderr and "nope.txt" in result.stderr
    assert "does not exist" in result.stderr and "missing.yaml" in result.stderr
    assert not (project / "out").exists()


def test_an_empty_resume_is_refused_instead_of_starting_a_fresh_run(project: Path) -> None:
    result = vally("eval", "-e", "eval.yaml", "--resume", "", "--output-dir", "out", cwd=project)
    assert result.returncode == 1
    assert "--resume needs the run folder to continue, got an empty value" in result.stderr
    assert "unset" in result.stderr
    assert not (project / "out").exists()


def test_an_errored_trial_is_not_said_to_leave_the_exit_code_at_0(project: Path) -> None:
    spec = (project / "eval.yaml").read_text(encoding="utf-8")
    errored = spec.replace('      output: "Done: {prompt}"\n', '      error: "agent crashed"\n')
    failing = spec.replace("substring: Done", "substring: never")
    assert errored != spec and failing != spec
    (project / "errored.yaml").write_text(errored.replace("name: demo", "name: crash"))
    (project / "failing.yaml").write_text(failing.replace("name: demo", "name: wrong"))
    result = vally("eval", "-e", "errored.yaml", "-e", "failing.yaml", cwd=project)
    assert result.returncode == 1
    out = result.stdout + result.stderr
    assert "1 failed, 1 errored" in out and "verdict: FAIL" in out
    assert "exit code is still 0" not in out


def test_a_config_error_shows_its_source_line_with_a_caret(project: Path) -> None:
    spec = (project / "eval.yaml").read_text(encoding="utf-8").replace("runs: 1", "runs: zero")
    (project / "eval.yaml").write_text(spec, encoding="utf-8")
    result = vally("eval", "-e", "eval.yaml", cwd=project)
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    at = next(i for i, line in enumerate(lines) if "eval.yaml:3:9: defaults.runs" in line)
    assert lines[at + 1 : at + 3] == ["  3 |   runs: zero", "    |         ^"]
    linted = vally("lint", "eval.yaml", cwd=project)
    assert "  3 |   runs: zero\n    |         ^" in linted.stdout


GRADER_SPEC = """\
name: located
defaults: {runs: 1, executor: {name: mock, config: {output: Done}}}
stimuli:
  - name: first
    prompt: hi
    graders:
      - {type: output-contains, config: {substring: Done}}
  - name: second
    prompt: hi
    graders:
      - {type: output-contains, config: {substring: Done}}
      - type: GRADER
        config: {CONFIG: Done}
"""


def test_a_bad_grader_config_names_its_file_line_and_column(project: Path) -> None:
    # vally lint gave file:line:column and the source line; vally eval only the file.
    text = GRADER_SPEC.replace("GRADER", "output-contains").replace("CONFIG", "substrin")
    _write(project, "located.yaml", text)
    result = vally("eval", "-e", "located.yaml", "--output-dir", "out", cwd=project)
    assert result.returncode == 1
    assert "located.yaml:12:9: invalid config for grader 'output-contains'" in result.stderr
    assert "  12 |       - type: output-contains\n" in result.stderr
    assert "at stimulus 'second'" in result.stderr and not (project / "out").exists()


def test_an_unknown_grader_names_its_file_line_and_column(project: Path) -> None:
    text = GRADER_SPEC.replace("GRADER", "output-containz").replace("CONFIG", "substring")
    _write(project, "located.yaml", text)
    result = vally("eval", "-e", "located.yaml", "--output-dir", "out", cwd=project)
    assert result.returncode == 1
    assert "located.yaml:12:9: stimulus 'second': unknown grader 'output-containz'" in (
        result.stderr
    )
    assert "  12 |       - type: output-containz\n" in result.stderr
