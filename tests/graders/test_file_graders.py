from __future__ import annotations

import os
from pathlib import Path

import pytest
from graders_support import context, run, say, trajectory
from pydantic import ValidationError

from vally.errors import GradingError
from vally_builtin.graders.files import (
    FileContainsGrader,
    FileExistsGrader,
    FileMatchesGrader,
    FileNotContainsGrader,
    FileNotExistsGrader,
    FileNotMatchesGrader,
    glob_to_regex,
)


def write(root: Path, rel: str, text: str = "") -> None:
    target = root / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


@pytest.fixture
def tree(workspace: Path) -> Path:
    write(workspace, "add.js", "export const add = (a, b) => a + b;\n")
    write(workspace, "add.test.js", "test('adds', () => expect(add(1, 2)).toBe(3));\n")
    write(workspace, "src/app/main.py", "print('hello')\n# TODO: more\n")
    write(workspace, "src/util.py", "def util():\n    return 1\n")
    write(workspace, "node_modules/pkg/index.js", "TODO")
    write(workspace, ".git/config", "[core]")
    return workspace


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("*.js", "add.js", True),
        ("*.js", "src/add.js", False),
        ("**/*.py", "src/app/main.py", True),
        ("**/*.py", "top.py", True),
        ("src/**/*.py", "src/util.py", True),
        ("src/**", "src/app/main.py", True),
        ("src/*.py", "src/app/main.py", False),
        ("src/?til.py", "src/util.py", True),
        ("src/[tu]til.py", "src/util.py", True),
        ("src/[!u]til.py", "src/util.py", False),
        ("a+b.txt", "a+b.txt", True),
        ("a+b.txt", "aab.txt", False),
    ],
)
def test_glob_translation(pattern: str, path: str, expected: bool) -> None:
    assert bool(glob_to_regex(pattern).match(path)) is expected


def test_file_exists_pass_and_fail(tree: Path, sandbox) -> None:
    ok = run(FileExistsGrader, context("file-exists", {"path": "*.js"}, sandbox=sandbox))
    assert ok.passed
    assert ok.evidence == "Files matching '*.js' found: add.js, add.test.js"
    deep = run(FileExistsGrader, context("file-exists", {"path": "**/*.py"}, sandbox=sandbox))
    assert deep.evidence == "Files matching '**/*.py' found: src/app/main.py, src/util.py"
    missing = run(FileExistsGrader, context("file-exists", {"path": "docs/*.md"}, sandbox=sandbox))
    assert not missing.passed
    assert missing.evidence == "No files matching 'docs/*.md' found"
    literal = run(
        FileExistsGrader, context("file-exists", {"path": "./src/util.py"}, sandbox=sandbox)
    )
    assert literal.passed and literal.evidence.endswith("found: src/util.py")


def test_file_exists_skips_node_modules_and_git(tree: Path, sandbox) -> None:
    result = run(FileExistsGrader, context("file-exists", {"path": "**/index.js"}, sandbox=sandbox))
    assert not result.passed
    assert not run(
        FileExistsGrader, context("file-exists", {"path": "**/config"}, sandbox=sandbox)
    ).passed
    # A glob that names the folder explicitly still looks inside it.
    assert run(FileExistsGrader, context("file-exists", {"path": ".git/*"}, sandbox=sandbox)).passed


def test_symlink_loop_does_not_hang_and_links_are_not_followed(
    tree: Path, sandbox, tmp_path: Path
) -> None:
    os.symlink(tree, tree / "src" / "loop")  # a folder link back to the root
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("x")
    os.symlink(outside, tree / "linked")
    os.symlink(tree / "add.js", tree / "alias.js")
    result = run(FileExistsGrader, context("file-exists", {"path": "**/*.py"}, sandbox=sandbox))
    assert result.evidence == "Files matching '**/*.py' found: src/app/main.py, src/util.py"
    alias = run(FileExistsGrader, context("file-exists", {"path": "alias.js"}, sandbox=sandbox))
    assert not alias.passed
    through_link = context("file-exists", {"path": "linked/*.py"}, sandbox=sandbox)
    assert run(FileExistsGrader, through_link).evidence == "No files matching 'linked/*.py' found"


def test_file_not_exists(tree: Path, sandbox) -> None:
    ok = run(FileNotExistsGrader, context("file-not-exists", {"path": "**/*.log"}, sandbox=sandbox))
    assert ok.passed and ok.evidence == "No files matching '**/*.log' found"
    bad = run(
        FileNotExistsGrader, context("file-not-exists", {"path": "src/*.py"}, sandbox=sandbox)
    )
    assert not bad.passed and "src/util.py" in bad.evidence


def test_file_contains_and_not_contains(tree: Path, sandbox) -> None:
    cfg = {"path": "src/**/*.py", "value": "TODO"}
    ok = run(FileContainsGrader, context("file-contains", cfg, sandbox=sandbox))
    assert ok.passed and ok.evidence == "'TODO' found in src/app/main.py"
    bad_cfg = {"path": "*.js", "value": "TODO"}
    bad = run(FileContainsGrader, context("file-contains", bad_cfg, sandbox=sandbox))
    assert not bad.passed
    assert (
        bad.evidence == "'TODO' not found in files matching '*.js' (checked: add.js, add.test.js)"
    )
    none_cfg = {"path": "nope.txt", "value": "x"}
    none = run(FileContainsGrader, context("file-contains", none_cfg, sandbox=sandbox))
    assert not none.passed and none.evidence == "No files matching 'nope.txt' found"

    neg = run(FileNotContainsGrader, context("file-not-contains", cfg, sandbox=sandbox))
    assert not neg.passed and "src/app/main.py" in neg.evidence
    neg_ok = run(FileNotContainsGrader, context("file-not-contains", bad_cfg, sandbox=sandbox))
    assert neg_ok.passed
    icase = {"path": "*.js", "value": "EXPORT", "case_sensitive": False}
    assert run(FileContainsGrader, context("file-contains", icase, sandbox=sandbox)).passed


def test_file_matches_and_not_matches(tree: Path, sandbox) -> None:
    cfg = {"path": "*.js", "pattern": r"toBe\(\d+\)"}
    ok = run(FileMatchesGrader, context("file-matches", cfg, sandbox=sandbox))
    assert ok.passed and ok.evidence == r"/toBe\(\d+\)/ matched in add.test.js"
    miss_cfg = {"path": "src/*.py", "pattern": "(?i)^CLASS "}
    miss = run(FileMatchesGrader, context("file-matches", miss_cfg, sandbox=sandbox))
    assert not miss.passed and "checked: src/util.py" in miss.evidence
    multi = {"path": "src/util.py", "pattern": "^    return", "flags": "m"}
    assert run(FileMatchesGrader, context("file-matches", multi, sandbox=sandbox)).passed

    neg = run(FileNotMatchesGrader, context("file-not-matches", cfg, sandbox=sandbox))
    assert not neg.passed and "add.test.js" in neg.evidence
    assert run(FileNotMatchesGrader, context("file-not-matches", miss_cfg, sandbox=sandbox)).passed


def test_file_graders_need_the_workspace() -> None:
    ctx = context("file-exists", {"path": "a.txt"})
    with pytest.raises(GradingError, match="needs the trial workspace"):
        run(FileExistsGrader, ctx)
    remote = context(
        "file-contains",
        {"path": "a.txt", "value": "x"},
        traj=trajectory([say("x")], workspace_status="remote"),
    )
    with pytest.raises(GradingError, match="remote"):
        run(FileContainsGrader, remote)


@pytest.mark.parametrize("path", ["/etc/passwd", "../outside.txt", "a/../../b", ""])
def test_paths_outside_the_workspace_are_rejected(path: str) -> None:
    with pytest.raises(ValidationError):
        FileExistsGrader.Config.model_validate({"path": path})


def test_metadata_taxonomy() -> None:
    meta = FileExistsGrader.metadata
    assert meta.name == "file-exists" and meta.kind == "grader"
    assert meta.cost_profile == "low" and meta.determinism == "static"
    assert meta.portability == "t1-universal" and meta.needs_workspace
