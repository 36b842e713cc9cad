"""What ``vally lint [PATH]`` checks: the eval files it selects (:func:`select_eval_files`)
and the skill folders it searches (:func:`skill_roots`), linted with the project's plugins
(:func:`lint_path`, :func:`run_lint`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from vally import ConfigError, ProjectConfig, discover_eval_files, eval_files_in, find_project
from vally_authoring.lint.catalogs import GraderCatalog, SessionGraderCatalog
from vally_authoring.lint.diagnostics import LintResult
from vally_authoring.lint.skill_checks import lint_skills
from vally_authoring.lint.spec_checks import lint_eval_file


def run_lint(
    eval_files: Sequence[Path],
    catalog: GraderCatalog,
    *,
    skills_root: Path | None = None,
    project: ProjectConfig | None = None,
    cli_params: Mapping[str, str] | None = None,
    executors: GraderCatalog | None = None,
    skill_roots: Sequence[Path] = (),
    skill_folders: Sequence[Path] = (),
) -> LintResult:
    """Lint eval files, the skills below ``skills_root`` and ``skill_roots``, and those of
    ``skill_folders`` themselves; never stops at the first bad file."""
    result = LintResult(eval_files=list(eval_files))
    for path in eval_files:
        result.diagnostics.extend(
            lint_eval_file(
                path, catalog, project=project, cli_params=cli_params, executors=executors
            )
        )
    roots = [*([skills_root] if skills_root is not None else []), *skill_roots]
    if roots or skill_folders:
        skills, diagnostics = lint_skills(*roots, folders=skill_folders)
        result.skills = skills
        result.diagnostics.extend(diagnostics)
    return result


def skill_roots(
    path: Path | None,
    eval_files: Sequence[Path],
    project: ProjectConfig,
    project_root: Path | None,
) -> list[Path]:
    """The folders ``vally lint`` searches for SKILL.md files: the ``PATH`` argument when
    one was given (a folder), the project's ``paths.skills`` (with a project file) and each
    eval file's ``skills/`` sub-folder (each eval file's own folder is checked too, without
    its sub-folders). Never the working directory's whole tree: run from a shared folder,
    lint stays on its specs."""
    roots: list[Path] = []
    if path is not None and path.is_dir():
        roots.append(path)
    if project_root is not None:
        roots += [project_root / entry for entry in project.paths.skills]
    for file in eval_files:
        roots.append(file.parent / "skills")
    return [r for r in dict.fromkeys(r.absolute() for r in roots) if r.is_dir()]


def select_eval_files(
    root: Path,
    eval_specs: Sequence[Path],
    *,
    cwd: Path,
    project: ProjectConfig,
    project_root: Path | None,
) -> list[Path]:
    """The eval files ``vally lint`` checks: each ``--eval-spec`` (a file, or a folder's
    eval files); else ``root`` itself when it is a file; else the project's evals below
    ``root``; else the eval files below ``root``.

    Raises:
        ConfigError: An ``--eval-spec`` names nothing, or a folder without eval files.
    """
    patterns = project.paths.evalFilenames
    if eval_specs:
        files: list[Path] = []
        for entry in eval_specs:
            found = eval_files_in(cwd, [str(entry)], patterns)
            if not found:
                raise ConfigError(
                    f"--eval-spec {entry}: no such file, or no eval files "
                    f"({', '.join(patterns)}) in that folder"
                )
            files.extend(f for f in found if f not in files)
        return files
    if root.is_file():
        return [root]
    if project_root is not None:
        files = discover_eval_files(project, project_root)
        return files if root == project_root else [f for f in files if f.is_relative_to(root)]
    return eval_files_in(root, ["."], patterns)


def lint_path(
    path: Path | None,
    eval_specs: Sequence[Path] = (),
    *,
    cwd: Path,
    params: Mapping[str, str] | None = None,
    grader_plugins: Sequence[str] = (),
) -> LintResult:
    """Lint what ``vally lint [PATH]`` names: the selected eval files (see
    :func:`select_eval_files`) and the skills below ``path``, with the graders and
    executors of the project's plugin session (plus ``grader_plugins``).

    Raises:
        ConfigError: ``path`` does not exist, or an ``--eval-spec`` names nothing.
        VallyError: ``.vally.yaml`` or a grader plugin cannot be loaded.
    """
    from vally import Session

    root = (path or cwd).absolute()
    if not root.exists():
        raise ConfigError(f"path not found: {root}")
    project, project_root = find_project(root, params=params or {})
    session = Session(project, project_root)
    if grader_plugins:
        session.load_plugins("grader", grader_plugins, base_dir=cwd)
    files = select_eval_files(
        root, eval_specs, cwd=cwd, project=project, project_root=project_root
    )
    return run_lint(
        files,
        SessionGraderCatalog(session),
        skill_roots=skill_roots(path, files, project, project_root),
        skill_folders=[f.parent for f in files],
        project=project,
        cli_params=params,
        executors=SessionGraderCatalog(session, "executor"),
    )
