"""Eval discovery, suites and tag filters."""

from __future__ import annotations

from pathlib import Path

import pytest

from vally.errors import ConfigError
from vally.models.project import ProjectConfig
from vally.specs.loading import (
    discover_eval_files,
    load_eval_file,
    matches_tag_filter,
    parse_tag_flags,
    select_suite,
    stimulus_tags,
)

BODY = "stimuli: [{name: a, prompt: p}]\n"


def _tree(root: Path, files: list[str]) -> None:
    for name in files:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(BODY)


def _rel(root: Path, paths: list[Path]) -> list[str]:
    return [p.relative_to(root).as_posix() for p in paths]


def test_default_discovery(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        [
            "evals/b/eval.yaml",
            "evals/a/eval.yml",
            "evals/a/notes.yaml",
            "evals/a/node_modules/x/eval.yaml",
            "other/eval.yaml",
        ],
    )
    found = discover_eval_files(ProjectConfig(), tmp_path)
    assert _rel(tmp_path, found) == ["evals/a/eval.yml", "evals/b/eval.yaml"]
    assert all(p.is_absolute() for p in found)


def test_eval_filenames_globs_and_eval_folder_globs(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        [
            "tools/Tool.A/tests/login.eval.yaml",
            "tools/Tool.A/tests/login.eval.params.yaml",
            "tools/Tool.B/tests/deep/x.eval.yaml",
            "tools/Tool.B/tests/eval.vally.yaml",
            "tools/Tool.B/tests/eval.yaml",
            "tools/Other/tests/y.eval.yaml",
            "single/one.yaml",
        ],
    )
    project = ProjectConfig.model_validate(
        {
            "paths": {
                "evals": ["tools/Tool.*/tests/", "single/one.yaml", "missing/"],
                "evalFilenames": ["*.eval.yaml", "eval.vally.yaml"],
            }
        }
    )
    found = discover_eval_files(project, tmp_path)
    assert _rel(tmp_path, found) == [
        "single/one.yaml",
        "tools/Tool.A/tests/login.eval.yaml",
        "tools/Tool.B/tests/deep/x.eval.yaml",
        "tools/Tool.B/tests/eval.vally.yaml",
    ]
    assert discover_eval_files(project, tmp_path) == found  # deterministic


def test_suite_with_file_globs(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        [
            "evals/safety/a/x.eval.yaml",
            "evals/safety/b/y.eval.yaml",
            "evals/shared/baseline.eval.yaml",
            "evals/perf/z.eval.yaml",
        ],
    )
    project = ProjectConfig.model_validate(
        {
            "paths": {"evalFilenames": "*.eval.yaml"},
            "suites": {
                "safety": {
                    "evals": ["evals/safety/**/*.eval.yaml", "evals/shared/baseline.eval.yaml"]
                },
                "safety-p0": {"evals": "evals/safety/", "filter": {"priority": "p0"}},
                "full": {"filter": {}},
                "empty": {"evals": ["nothing/*.yaml"]},
            },
        }
    )
    files, tag_filter = select_suite(project, tmp_path, "safety")
    assert _rel(tmp_path, files) == [
        "evals/safety/a/x.eval.yaml",
        "evals/safety/b/y.eval.yaml",
        "evals/shared/baseline.eval.yaml",
    ]
    assert tag_filter is None
    files, tag_filter = select_suite(project, tmp_path, "safety-p0")
    assert len(files) == 2 and tag_filter == {"priority": ["p0"]}
    files, tag_filter = select_suite(project, tmp_path, "full")
    assert len(files) == 4 and tag_filter == {}
    with pytest.raises(ConfigError, match="matches no eval files"):
        select_suite(project, tmp_path, "empty")


def test_unknown_suite_lists_suites(tmp_path: Path) -> None:
    project = ProjectConfig.model_validate(
        {"suites": {"fast": {"filter": {"p": "p0"}}, "full": {"filter": {}}}}
    )
    with pytest.raises(ConfigError) as info:
        select_suite(project, tmp_path, "fats")
    assert "unknown suite 'fats'; defined suites: fast, full" in str(info.value)
    assert "did you mean 'fast'?" in str(info.value)
    with pytest.raises(ConfigError, match="defines no suites"):
        select_suite(ProjectConfig(), tmp_path, "fast")


def test_tag_filter_semantics() -> None:
    tags = {"priority": "p0", "area": "auth"}
    assert matches_tag_filter(tags, {})
    assert matches_tag_filter(tags, {"priority": ["p0", "p1"]})  # OR within values
    assert matches_tag_filter(tags, {"priority": ["p0"], "area": ["auth"]})  # AND across keys
    assert not matches_tag_filter(tags, {"priority": ["p0"], "area": ["db"]})
    assert not matches_tag_filter(tags, {"tier": ["smoke"]})  # missing key


def test_stimulus_tags_override_eval_tags(tmp_path: Path) -> None:
    path = tmp_path / "eval.yaml"
    path.write_text(
        "tags: {area: auth, priority: p1, flaky: false}\n"
        "stimuli:\n"
        "  - {name: a, prompt: p, tags: {priority: p0}}\n"
        "  - {name: b, prompt: p}\n"
    )
    spec = load_eval_file(path, project=ProjectConfig()).spec
    a, b = spec.stimuli
    assert stimulus_tags(spec, a) == {"area": "auth", "priority": "p0", "flaky": "false"}
    assert stimulus_tags(spec, b)["priority"] == "p1"
    suite_filter = ProjectConfig.model_validate(
        {"suites": {"s": {"filter": {"priority": "p0", "area": ["auth", "db"]}}}}
    ).suites["s"].filter
    assert suite_filter is not None
    assert [matches_tag_filter(stimulus_tags(spec, s), suite_filter) for s in spec.stimuli] == [
        True,
        False,
    ]


def test_parse_tag_flags() -> None:
    assert parse_tag_flags(["area=auth,db", "p=p0", "area=ui"]) == {
        "area": ["auth", "db", "ui"],
        "p": ["p0"],
    }
    for bad in ("area", "=x", "area="):
        with pytest.raises(ConfigError, match="KEY=VALUE"):
            parse_tag_flags([bad])


def test_glob_characters_in_the_root_are_literal(tmp_path: Path) -> None:
    root = tmp_path / "we[ir]d"
    _tree(root, ["evals/a/eval.yaml", "evals/b/eval.yaml"])
    project = ProjectConfig.model_validate({"paths": {"evals": ["evals/*/"]}})
    assert _rel(root, discover_eval_files(project, root)) == [
        "evals/a/eval.yaml",
        "evals/b/eval.yaml",
    ]
