"""A run's plugins are created in one pass: every problem with them is reported at once, before
anything is run or written; a single problem reads as it always did."""

from __future__ import annotations

from pathlib import Path

import pytest

from vally import EvalRequest, PluginError, PluginNotFoundError, prepare_run
from vally.engine.evals import eval_run_request

from .conftest import vally

THREE_PROBLEMS = """\
name: demo
defaults:
  runs: 1
  executor:
    name: mock
    config:
      output: "Done"
      no_such_option: 1
stimuli:
  - name: s1
    prompt: hello
    graders:
      - { type: output-contain, config: { substring: Done } }
      - { type: output-contains, config: { substring: Done } }
"""


def test_every_problem_is_listed_once_and_nothing_is_written(tmp_path: Path) -> None:
    (tmp_path / "eval.yaml").write_text(THREE_PROBLEMS, encoding="utf-8")
    result = vally(
        "eval", "-e", "eval.yaml", "--backend", "nope-backend", "--output-dir", "out", cwd=tmp_path
    )
    assert result.returncode == 1
    err = result.stderr
    assert "3 problems with the run's plugins" in err, err
    assert "1. " in err and "2. " in err and "3. " in err
    assert "no_such_option" in err  # the executor's config
    assert "output-contain" in err  # the misspelled grader, with where it is named
    assert "stimulus 's1'" in err
    assert "nope-backend" in err  # the backend flag
    assert err.count("output-contain'") + err.count('output-contain"') <= 2  # listed once
    assert not (tmp_path / "out").exists()


def test_one_problem_is_raised_as_it_is(tmp_path: Path) -> None:
    spec = THREE_PROBLEMS.replace("      no_such_option: 1\n", "")
    (tmp_path / "eval.yaml").write_text(spec, encoding="utf-8")
    request, _ = eval_run_request(
        EvalRequest(eval_specs=[str(tmp_path / "eval.yaml")], output_dir=str(tmp_path / "o"))
    )
    with pytest.raises(PluginNotFoundError) as caught:
        prepare_run(request)
    assert "problems with the run's plugins" not in caught.value.message
    assert "output-contain" in caught.value.message


def test_several_problems_raise_one_plugin_error_through_the_api(tmp_path: Path) -> None:
    (tmp_path / "eval.yaml").write_text(THREE_PROBLEMS, encoding="utf-8")
    request, _ = eval_run_request(
        EvalRequest(eval_specs=[str(tmp_path / "eval.yaml")], output_dir=str(tmp_path / "o"))
    )
    with pytest.raises(PluginError) as caught:
        prepare_run(request)
    assert type(caught.value) is PluginError
    assert caught.value.message.startswith("2 problems with the run's plugins")
    assert caught.value.hint == "fix each of them; nothing was run or written"


def test_a_dry_run_lists_problems_without_creating_the_backend(tmp_path: Path) -> None:
    from vally import BackendChoice

    (tmp_path / "eval.yaml").write_text(THREE_PROBLEMS, encoding="utf-8")
    request, _ = eval_run_request(
        EvalRequest(eval_specs=[str(tmp_path / "eval.yaml")], output_dir=str(tmp_path / "o"))
    )
    request.backend = BackendChoice("nope-backend")
    with pytest.raises(PluginError) as caught:
        prepare_run(request, dry_run=True)
    assert caught.value.message.startswith("2 problems with the run's plugins")
    assert "nope-backend" not in caught.value.message
    with pytest.raises(PluginError) as caught:
        prepare_run(request)
    assert caught.value.message.startswith("3 problems with the run's plugins")
    assert "nope-backend" in caught.value.message
