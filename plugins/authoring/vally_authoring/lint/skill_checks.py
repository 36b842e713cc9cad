"""The checks of SKILL.md files (``skill-invalid``): frontmatter present, ``name`` and
``description`` not empty."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from vally import SKILL_FILE, VallyError, find_skills, read_skill
from vally_authoring.lint.diagnostics import Diagnostic


def lint_skills(
    *roots: Path, folders: Sequence[Path] = ()
) -> tuple[list[Path], list[Diagnostic]]:
    """Check every SKILL.md below each of ``roots`` and in each of ``folders`` (not below
    them), each skill once: frontmatter present, ``name`` and ``description`` not empty."""
    found = {s for root in roots if root.is_dir() for s in find_skills(root)}
    found |= {f for f in folders if (f / SKILL_FILE).is_file()}
    skills = sorted(found)
    diagnostics: list[Diagnostic] = []
    for folder in skills:
        try:
            read_skill(folder)
        except VallyError as exc:
            loc = exc.location
            diagnostics.append(
                Diagnostic(
                    "skill-invalid", "error", loc.file if loc else str(folder / "SKILL.md"),
                    loc.line if loc else 1, exc.message + (f" ({exc.hint})" if exc.hint else ""),
                )
            )
    return skills, diagnostics


