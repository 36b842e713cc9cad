"""Environment merge rules, path anchoring and path confinement."""

from __future__ import annotations

from pathlib import Path

import pytest

from vally.errors import ConfigError, PathEscapeError
from vally.models.project import ProjectConfig
from vally.models.spec import EnvironmentConfig
from vally.specs.environments import check_paths, confine_dest, resolve_environment
from vally.specs.loading import load_eval_file

SPEC = """\
environment:
  skills: [../skills/a, ../skills/b]
  files:
    - { src: fixtures/input.txt, dest: in/input.txt }
  commands: [npm install]
  git: { source: ../repo, ref: main }
  env: { A: root, B: root }
  mcpServers:
    keep: { command: keep-server }
    drop: { command: drop-server }
    change: { command: old }
stimuli:
  - name: merged
    prompt: p
    environment:
      skills: [../skills/b, ../skills/c]
      files: [{ src: fixtures/more/ }]
      commands: [npm test]
      git: { source: ../other, ref: v2 }
      env: { B: stim, C: stim }
      mcpServers:
        drop: null
        change: { command: new }
        added: { type: http, url: "http://127.0.0.1:1/mcp" }
  - name: plain
    prompt: p
"""


def _load(tmp_path: Path, text: str = SPEC):  # type: ignore[no-untyped-def]
    folder = tmp_path / "evals" / "e"
    folder.mkdir(parents=True)
    path = folder / "eval.yaml"
    path.write_text(text)
    return load_eval_file(path, project=ProjectConfig()), folder


def test_merge_rules(tmp_path: Path) -> None:
    loaded, folder = _load(tmp_path)
    env = resolve_environment(loaded, loaded.spec.stimuli[0], ProjectConfig())
    skills = tmp_path / "evals" / "skills"
    assert env.skills == [str(skills / "a"), str(skills / "b"), str(skills / "c")]
    assert [(f.src, f.dest) for f in env.files] == [
        (str(folder / "fixtures" / "input.txt"), "in/input.txt"),
        (str(folder / "fixtures" / "more"), "more"),  # dest defaults to the basename
    ]
    assert env.commands == ["npm install", "npm test"]
    assert env.git is not None
    assert (env.git.source, env.git.ref) == (str(tmp_path / "evals" / "other"), "v2")
    assert env.env == {"A": "root", "B": "stim", "C": "stim"}
    assert sorted(env.mcpServers) == ["added", "change", "keep"]
    change = env.mcpServers["change"]
    assert change is not None and change.command == "new"


def test_stimulus_without_environment_gets_root(tmp_path: Path) -> None:
    loaded, folder = _load(tmp_path)
    env = resolve_environment(loaded, loaded.spec.stimuli[1], ProjectConfig())
    assert env.commands == ["npm install"]
    assert env.git is not None and env.git.source == str(tmp_path / "evals" / "repo")
    assert sorted(env.mcpServers) == ["change", "drop", "keep"]
    assert env.files[0].src == str(folder / "fixtures" / "input.txt")


def test_named_environment_resolved_late(tmp_path: Path) -> None:
    # resolve_environment also accepts a spec whose environment is still a name
    loaded, _ = _load(tmp_path, "stimuli: [{name: a, prompt: p, environment: {commands: [b]}}]\n")
    spec = loaded.spec.model_copy(update={"environment": "ci"})
    named = type(loaded)(spec=spec, source=loaded.source, raw=loaded.raw)
    project = ProjectConfig.model_validate({"environments": {"ci": {"commands": ["a"]}}})
    assert resolve_environment(named, spec.stimuli[0], project).commands == ["a", "b"]
    with pytest.raises(ConfigError, match="unknown environment 'ci'"):
        resolve_environment(named, spec.stimuli[0], ProjectConfig())


@pytest.mark.parametrize("dest", ["../x", "a/../../x", "/etc/passwd", "C:/x", "~/x", ".."])
def test_dest_escape_is_rejected(dest: str) -> None:
    with pytest.raises(PathEscapeError):
        confine_dest(dest)


@pytest.mark.parametrize(
    ("dest", "expected"), [("a/b/../c", "a/c"), ("./x", "x"), (".", "."), ("dir/", "dir")]
)
def test_dest_inside_is_normalised(dest: str, expected: str) -> None:
    assert confine_dest(dest) == expected


def test_resolve_environment_rejects_escaping_dest(tmp_path: Path) -> None:
    loaded, _ = _load(
        tmp_path,
        "stimuli:\n  - name: a\n    prompt: p\n    environment:\n"
        "      files: [{src: x.txt, dest: ../../x.txt}]\n",
    )
    with pytest.raises(PathEscapeError, match="outside the workspace"):
        resolve_environment(loaded, loaded.spec.stimuli[0], ProjectConfig())


def test_src_may_point_to_a_sibling_folder(tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "data.txt").write_text("x")
    env = EnvironmentConfig.model_validate(
        {"files": [{"src": "../shared/data.txt"}, {"src": "gone.txt", "dest": "/abs"}],
         "skills": ["../nope"]}
    )
    problems = check_paths(env, tmp_path / "evals")
    assert [(p.code, p.path) for p in problems] == [
        ("environment-file-not-found", ("files", 1, "src")),
        ("path-escape", ("files", 1, "dest")),
        ("environment-file-not-found", ("skills", 0)),
    ]


SRC_SPEC = "stimuli:\n  - name: a\n    prompt: p\n    environment:\n      files: [{src: %s}]\n"


def test_src_is_confined_to_the_eval_folder_without_a_project(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("x")
    loaded, folder = _load(tmp_path, SRC_SPEC % "../../secret.txt")
    with pytest.raises(PathEscapeError, match=r"secret\.txt") as info:
        resolve_environment(loaded, loaded.spec.stimuli[0], ProjectConfig())
    assert str(folder / "eval.yaml") in str(info.value)


def test_src_may_leave_the_eval_folder_inside_the_project(tmp_path: Path) -> None:
    (tmp_path / "fixtures").mkdir()
    (tmp_path / "fixtures" / "data.txt").write_text("x")
    loaded, _ = _load(tmp_path, SRC_SPEC % "../../fixtures/data.txt")
    env = resolve_environment(loaded, loaded.spec.stimuli[0], ProjectConfig(), tmp_path)
    assert env.files[0].src == str(tmp_path / "fixtures" / "data.txt")
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    outside.write_text("x")
    try:
        loaded2, _ = _load(tmp_path / "p2", SRC_SPEC % f"../../../../{outside.name}")
        with pytest.raises(PathEscapeError):
            resolve_environment(loaded2, loaded2.spec.stimuli[0], ProjectConfig(), tmp_path)
    finally:
        outside.unlink()


def test_src_link_pointing_outside_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "elsewhere.txt").write_text("x")
    loaded, folder = _load(tmp_path, SRC_SPEC % "link.txt")
    (folder / "link.txt").symlink_to(tmp_path / "elsewhere.txt")
    with pytest.raises(PathEscapeError):
        resolve_environment(loaded, loaded.spec.stimuli[0], ProjectConfig())
    problems = check_paths(loaded.spec.stimuli[0].environment, folder, folder)  # type: ignore[arg-type]
    assert [(p.code, p.path) for p in problems] == [("path-escape", ("files", 0, "src"))]


def test_without_a_project_file_the_git_repository_bounds_src(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "fixtures").mkdir()
    (tmp_path / "fixtures" / "data.txt").write_text("x")
    loaded, _ = _load(tmp_path, SRC_SPEC % "../../fixtures/data.txt")
    env = resolve_environment(loaded, loaded.spec.stimuli[0], ProjectConfig())
    assert env.files[0].src == str(tmp_path / "fixtures" / "data.txt")
