"""Selecting eval files: an experiment's ``evals:`` patterns and ``--eval-filter``."""

from __future__ import annotations

import contextlib
import fnmatch
import os
from collections.abc import Sequence
from pathlib import Path

from vally.errors import ConfigError
from vally.models.project import ProjectConfig


def absolute(base: Path, value: str) -> Path:
    """``value`` (``~`` expanded) as an absolute, normalised path; relative to ``base``."""
    path = Path(value).expanduser()
    return Path(os.path.normpath(path if path.is_absolute() else base / path))


def expand_evals(
    patterns: Sequence[str], base: Path, project: ProjectConfig, *, exclude: Path | None = None
) -> list[Path]:
    """The eval files an experiment declares: each entry is a file, a folder (its eval files)
    or a glob, relative to ``base`` (the experiment file's folder). A pattern that matches
    nothing is skipped; when every pattern matches nothing it is an error.

    Raises:
        ConfigError: No pattern matched any eval file.
    """
    files: list[Path] = []

    def add(path: Path) -> None:
        path = Path(os.path.normpath(path))
        if exclude is not None and path == exclude:
            return
        if path.is_file() and path not in files:
            files.append(path)
        elif path.is_dir():
            for name in project.paths.evalFilenames:
                for found in sorted(path.rglob(name)):
                    add(found)

    for pattern in patterns:
        target = absolute(base, pattern)
        if any(ch in pattern for ch in "*?["):
            anchor = Path(pattern).expanduser()
            if anchor.is_absolute():
                root = Path(anchor.anchor)
                rel = str(anchor.relative_to(root))
            else:
                root, rel = base, pattern
            for match in sorted(root.glob(rel)):
                add(match)
        elif target.exists():
            add(target)
    if not files:
        raise ConfigError(
            f"the experiment's evals ({', '.join(patterns)}) match no eval file "
            f"(relative to {base})",
            hint="paths and globs in 'evals:' are relative to the experiment file's folder",
        )
    return files


def _matches(pattern: str, path: Path, bases: Sequence[Path]) -> bool:
    candidates = {path.as_posix()}
    for base in bases:
        with contextlib.suppress(ValueError):
            candidates.add(Path(os.path.relpath(path, base)).as_posix())
    patterns = {pattern, pattern.replace("**/", "")}
    if pattern.startswith("./"):
        patterns |= {p[2:] for p in patterns}
    anchored = {str(absolute(b, pattern)) for b in bases}
    for candidate in candidates:
        for p in patterns | anchored:
            if fnmatch.fnmatchcase(candidate, p):
                return True
    return False


def apply_eval_filters(
    files: Sequence[Path], filters: Sequence[str], bases: Sequence[Path]
) -> list[Path]:
    """Intersect the declared eval files with ``--eval-filter`` patterns (case-sensitive
    globs, tried relative to each of ``bases`` and as absolute paths).

    Raises:
        ConfigError: A pattern matches no declared eval (the run fails fast).
    """
    if not filters:
        return list(files)
    kept: set[Path] = set()
    for pattern in filters:
        hits = [f for f in files if _matches(pattern, f, bases)]
        if not hits:
            declared = ", ".join(display_path(f, bases[0]) for f in files)
            raise ConfigError(
                f"--eval-filter {pattern!r} matches none of the experiment's evals",
                hint=f"declared evals: {declared} (matching is case-sensitive)",
            )
        kept.update(hits)
    return [f for f in files if f in kept]


def display_path(path: Path, base: Path) -> str:
    """``path`` relative to ``base`` when it can be, with forward slashes."""
    try:
        return Path(os.path.relpath(path, base)).as_posix()
    except ValueError:
        return str(path)
