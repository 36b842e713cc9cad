"""Skills: folders holding a ``SKILL.md`` with YAML frontmatter (``name``, ``description``)
followed by a Markdown body."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vally.errors import ConfigError, SourceLocation, YamlSyntaxError
from vally.specs.yamlio import compose, construct

SKILL_FILE = "SKILL.md"


@dataclass(frozen=True)
class SkillInfo:
    """A parsed skill."""

    name: str
    description: str
    path: Path
    """The skill's folder."""
    body: str


def read_skill(path: Path) -> SkillInfo:
    """Read a skill from its folder (or its ``SKILL.md``).

    Raises:
        ConfigError: No SKILL.md, no frontmatter, or ``name``/``description`` missing.
    """
    skill_md = path if path.name == SKILL_FILE else path / SKILL_FILE
    if not skill_md.is_file():
        raise ConfigError(
            f"no {SKILL_FILE} in skill folder {skill_md.parent}",
            hint="a skill is a folder with a SKILL.md file; point at the folder",
        )
    text = skill_md.read_text(encoding="utf-8", errors="replace")
    where = SourceLocation(str(skill_md), 1)
    if not text.startswith("---"):
        raise ConfigError(
            "SKILL.md has no YAML frontmatter",
            location=where,
            hint="start the file with '---', then 'name:' and 'description:', then '---'",
        )
    end = text.find("\n---", 3)
    if end < 0:
        raise ConfigError("SKILL.md frontmatter is not closed with '---'", location=where)
    try:
        front = construct(compose(text[3:end], str(skill_md)), str(skill_md)) or {}
    except YamlSyntaxError as exc:
        raise ConfigError(
            f"SKILL.md frontmatter is not valid YAML: {exc.message}",
            location=exc.location or where,
            hint=exc.hint,
        ) from None
    if not isinstance(front, dict):
        raise ConfigError("SKILL.md frontmatter must be a mapping", location=where)
    missing = [key for key in ("name", "description") if not str(front.get(key) or "").strip()]
    if missing:
        raise ConfigError(
            f"SKILL.md frontmatter is missing {' and '.join(repr(m) for m in missing)}",
            location=where,
        )
    body = text[end + 4 :].lstrip("\n")
    return SkillInfo(
        str(front["name"]).strip(), str(front["description"]).strip(), skill_md.parent, body
    )


def find_skills(root: Path) -> list[Path]:
    """Every folder below ``root`` (inclusive) that holds a SKILL.md, sorted; ``.git`` and
    ``node_modules`` are skipped and links are not followed."""
    found: list[Path] = []
    if (root / SKILL_FILE).is_file():
        found.append(root)
    stack = [root]
    while stack:
        current = stack.pop()
        try:
            entries = list(current.iterdir())
        except OSError:
            continue
        for entry in entries:
            if entry.is_symlink() or not entry.is_dir():
                continue
            if entry.name in {".git", "node_modules"}:
                continue
            if (entry / SKILL_FILE).is_file():
                found.append(entry)
            stack.append(entry)
    return sorted(set(found))
