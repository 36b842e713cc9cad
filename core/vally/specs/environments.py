"""Environments of stimuli: the effective environment of one stimulus (the eval's, a named
environment, the stimulus's own, merged), file sources anchored and confined to the project,
destinations confined to the workspace, and the path checks used by setup and lint."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from vally.contracts.protocols import LoadedEval
from vally.errors import ConfigError, PathEscapeError, SourceLocation
from vally.models.project import ProjectConfig
from vally.models.spec import (
    EnvironmentConfig,
    FileEntry,
    GitConfig,
    McpServerConfig,
    Stimulus,
)
from vally.specs.schema_errors import did_you_mean


def _absolute(base: Path, value: str) -> str:
    path = Path(os.path.expanduser(value)) if value.startswith("~") else Path(value)
    if not path.is_absolute():
        path = base / path
    return os.path.normpath(path)


def _default_dest(src: str) -> str:
    name = PurePosixPath(src.replace("\\", "/").rstrip("/")).name
    return name or "."


def confine_dest(dest: str, *, location: SourceLocation | None = None) -> str:
    """Normalise a workspace-relative ``dest`` (POSIX form).

    Raises:
        PathEscapeError: ``dest`` is absolute or resolves outside the workspace.
    """
    text = dest.replace("\\", "/")
    if text.startswith("/") or (len(text) > 1 and text[1] == ":") or text.startswith("~"):
        raise PathEscapeError(
            f"files[].dest {dest!r} is absolute; it must be relative to the workspace",
            location=location,
            hint="write a path inside the workspace, e.g. 'input.txt' or 'data/'",
        )
    normal = os.path.normpath(text).replace("\\", "/") if text else "."
    if normal == ".." or normal.startswith("../"):
        raise PathEscapeError(
            f"files[].dest {dest!r} resolves outside the workspace",
            location=location,
            hint="remove the '..' parts: dest is relative to the workspace root",
        )
    return normal


def anchor_environment(env: EnvironmentConfig, base: Path) -> EnvironmentConfig:
    """Make ``skills``, ``files[].src`` and ``git.source`` absolute against ``base`` and fill
    ``files[].dest`` (the basename of ``src`` when omitted). ``dest`` is not checked here."""
    files = [
        FileEntry(src=_absolute(base, f.src), dest=f.dest if f.dest else _default_dest(f.src))
        for f in env.files
    ]
    git = env.git
    if git is not None:
        git = git.model_copy(update={"source": _absolute(base, git.source)})
    return env.model_copy(
        update={
            "skills": [_absolute(base, s) for s in env.skills],
            "files": files,
            "git": git,
        }
    )


def merge_environments(base: EnvironmentConfig, overlay: EnvironmentConfig) -> EnvironmentConfig:
    """Merge a stimulus environment onto the root one.

    Skills are united in order without duplicates; files and commands are appended; ``git``
    is replaced when the overlay sets it; ``env`` keys are overridden and ``public_env``
    names united; ``mcpServers`` merge by name and a ``null`` server removes the inherited
    one.
    """
    skills = list(dict.fromkeys([*base.skills, *overlay.skills]))
    servers: dict[str, McpServerConfig | None] = dict(base.mcpServers)
    for name, server in overlay.mcpServers.items():
        if server is None:
            servers.pop(name, None)
        else:
            servers[name] = server
    git: GitConfig | None = overlay.git if overlay.git is not None else base.git
    return EnvironmentConfig(
        skills=skills,
        files=[*base.files, *overlay.files],
        commands=[*base.commands, *overlay.commands],
        git=git,
        mcpServers={k: v for k, v in servers.items() if v is not None},
        env={**base.env, **overlay.env},
        public_env=list(dict.fromkeys([*base.public_env, *overlay.public_env])),
    )


def source_root(eval_file: Path, project_root: Path | None) -> Path:
    """The folder ``files[].src`` must stay in: the project (the folder of ``.vally.yaml``)
    when the eval file lies inside it, else the git repository holding the eval file, else
    the eval file's own folder."""
    folder = eval_file.resolve().parent
    if project_root is not None:
        root = project_root.resolve()
        if folder == root or root in folder.parents:
            return root
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return folder


def confine_src(src: str, root: Path, *, location: SourceLocation | None = None) -> None:
    """Reject a ``files[].src`` that resolves (links followed) outside ``root``.

    Raises:
        PathEscapeError: The source lies outside ``root``.
    """
    resolved = Path(src).resolve()
    if resolved != root and root not in resolved.parents:
        raise PathEscapeError(
            f"files[].src {src!r} resolves outside {root}",
            location=location,
            hint="copy the fixture into the project (the folder of .vally.yaml, or the git "
            "repository) and point src at it; sources may not leave the project",
        )


def resolve_environment(
    loaded: LoadedEval,
    stimulus: Stimulus,
    project: ProjectConfig,
    project_root: Path | None = None,
) -> EnvironmentConfig:
    """The effective environment of ``stimulus``.

    The root environment (inline, or named in ``.vally.yaml``) and the stimulus environment
    are anchored to the eval file's folder and merged (:func:`merge_environments`). Every
    ``files[].dest`` is confined to the workspace and every ``files[].src`` to the project
    (see :func:`source_root`).

    Raises:
        ConfigError: The named environment does not exist.
        PathEscapeError: A ``dest`` is absolute or leaves the workspace, or a ``src`` leaves
            the project.
    """
    base_dir = loaded.source.parent
    root_env = loaded.spec.environment
    if isinstance(root_env, str):
        root_env = named_environment(root_env, project, location=SourceLocation(str(loaded.source)))
    base = anchor_environment(root_env or EnvironmentConfig(), base_dir)
    overlay = anchor_environment(stimulus.environment or EnvironmentConfig(), base_dir)
    merged = merge_environments(base, overlay)
    where = SourceLocation(str(loaded.source))
    allowed = source_root(loaded.source, project_root)
    for entry in merged.files:
        confine_src(entry.src, allowed, location=where)
    files = [
        FileEntry(src=f.src, dest=confine_dest(f.dest or _default_dest(f.src), location=where))
        for f in merged.files
    ]
    return merged.model_copy(update={"files": files})


@dataclass(frozen=True)
class PathProblem:
    """A path problem in an environment, for lint.

    Attributes:
        code: ``path-escape`` or ``environment-file-not-found``.
        path: Where in the environment (``("files", 0, "dest")``).
        message: What is wrong.
    """

    code: str
    path: tuple[str | int, ...]
    message: str


def check_paths(
    env: EnvironmentConfig, base_dir: Path, src_root: Path | None = None
) -> list[PathProblem]:
    """Check an environment's paths without copying anything.

    * ``files[].dest`` absolute or outside the workspace -> ``path-escape``;
    * ``files[].src`` outside ``src_root`` (when given) -> ``path-escape``;
    * ``files[].src`` (relative to ``base_dir``) missing -> ``environment-file-not-found``;
    * a ``skills`` folder missing -> ``environment-file-not-found``.
    """
    problems: list[PathProblem] = []
    for index, entry in enumerate(env.files):
        src = Path(_absolute(base_dir, entry.src))
        if not src.exists():
            problems.append(
                PathProblem(
                    "environment-file-not-found",
                    ("files", index, "src"),
                    f"files[{index}].src '{entry.src}' does not exist (looked for {src})",
                )
            )
        if src_root is not None:
            try:
                confine_src(str(src), src_root)
            except PathEscapeError as exc:
                problems.append(PathProblem("path-escape", ("files", index, "src"), exc.message))
        dest = entry.dest if entry.dest else _default_dest(entry.src)
        try:
            confine_dest(dest)
        except PathEscapeError as exc:
            problems.append(PathProblem("path-escape", ("files", index, "dest"), exc.message))
    for index, skill in enumerate(env.skills):
        folder = Path(_absolute(base_dir, skill))
        if not folder.exists():
            problems.append(
                PathProblem(
                    "environment-file-not-found",
                    ("skills", index),
                    f"skill folder '{skill}' does not exist (looked for {folder})",
                )
            )
    return problems


def named_environment(
    name: str, project: ProjectConfig, *, location: SourceLocation | None = None
) -> EnvironmentConfig:
    """The environment ``name`` of ``.vally.yaml``.

    Raises:
        ConfigError: No such environment; the message lists the known ones.
    """
    env = project.environments.get(name)
    if env is not None:
        return env
    known = sorted(project.environments)
    if known:
        message = f"unknown environment '{name}'; .vally.yaml defines: {', '.join(known)}"
        suggestion = did_you_mean(name, known)
        hint = f"did you mean '{suggestion}'?" if suggestion else None
    else:
        message = f"unknown environment '{name}': no environments are defined in .vally.yaml"
        hint = "add it under 'environments:' in .vally.yaml, or write the environment inline"
    raise ConfigError(message, location=location, hint=hint)
