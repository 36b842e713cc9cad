"""Plugin packages for ``vally new``, generated from the example plugins.

The template of each kind is the example distribution under ``plugins/examples/`` named in
:data:`EXAMPLES` (in a wheel they are shipped as ``vally_authoring/plugin_examples/``), so a
new package is exactly that example with its names replaced, and the two cannot drift. A
package is the example's ``pyproject.toml``, ``README.md``, ``src/`` and ``tests/``, with
these replacements and no others:

* the distribution name in its three spellings (``vally-word-count-grader``,
  ``vally_word_count_grader``, ``VALLY_WORD_COUNT_GRADER``), in file contents and paths;
* the class-name stem (the class name without the kind's suffix: ``WordCount``) wherever
  it starts an identifier (``WordCountGrader``, ``WordCountConfig``);
* the plugin name (``word-count``) in ``name="..."``, as the key of the entry-point line,
  and as a word inside code: inline and fenced code of ``README.md``, double-backquoted
  literals of Python docstrings. Examples refer to their own name nowhere else (their
  tests use ``Class.metadata.name``).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from vally import ConfigError, OutputError

EXAMPLES: dict[str, str] = {
    "grader": "vally-word-count-grader",
    "executor": "vally-script-executor",
    "backend": "vally-worktree-backend",
    "reporter": "vally-csv-reporter",
    "eval_provider": "vally-jsonl-provider",
    "shard_strategy": "vally-balanced-shards",
    "llm_provider": "vally-echo-llm",
    "exporter": "vally-prompt-set-exporter",
}
"""The example distribution each kind ``vally new`` scaffolds is generated from."""

SUFFIXES: dict[str, str] = {
    "grader": "Grader",
    "executor": "Executor",
    "backend": "Backend",
    "reporter": "Reporter",
    "eval_provider": "EvalProvider",
    "shard_strategy": "ShardStrategy",
    "llm_provider": "LLMProvider",
    "exporter": "Exporter",
}
"""The class-name suffix of each kind (``WordCountGrader``)."""

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
"""Plugin names ``vally new`` accepts: kebab-case, starting with a letter."""

PACKAGED_EXAMPLES = "plugin_examples"
"""The folder next to this module that holds the examples in a wheel."""

SKIPPED = frozenset({"__pycache__", "build", "dist", ".pytest_cache"})
"""Folders of an example that are never part of a package."""


class ScaffoldUsageError(ConfigError):
    """A kind or a plugin name ``vally new`` cannot scaffold (a usage error)."""


@dataclass(frozen=True)
class Identity:
    """The names of one plugin package.

    Attributes:
        name: The plugin name users type (``my-check``).
        distribution: The distribution name (``vally-my-check``).
        package: The import package (``vally_my_check``).
        class_name: The plugin class (``MyCheckGrader``).
        stem: The class name without the kind's suffix (``MyCheck``).
    """

    name: str
    distribution: str
    package: str
    class_name: str
    stem: str


@dataclass(frozen=True)
class Scaffold:
    """What ``vally new`` writes for one plugin.

    Attributes:
        kind: The plugin kind (``eval_provider``).
        identity: The new package's names.
        root: The folder the package is written to.
    """

    kind: str
    identity: Identity
    root: Path

    @property
    def name(self) -> str:
        """The plugin name."""
        return self.identity.name


# --------------------------------------------------------------------------- planning


def normalize_kind(value: str) -> str:
    """``eval-provider``/``eval_provider``/``eval-providers`` -> ``eval_provider``.

    Raises:
        ScaffoldUsageError: The kind is not one ``vally new`` scaffolds.
    """
    kind = value.strip().lower().replace("-", "_")
    if kind.endswith("s") and kind[:-1] in EXAMPLES:
        kind = kind[:-1]
    if kind not in EXAMPLES:
        choices = ", ".join(k.replace("_", "-") for k in EXAMPLES)
        raise ScaffoldUsageError(f"unknown kind {value!r}; expected one of {choices}")
    return kind


def identity_for(kind: str, name: str) -> Identity:
    """The names of a new ``kind`` plugin called ``name`` (a ``vally-`` prefix is
    dropped; the distribution always has it).

    Raises:
        ScaffoldUsageError: The name is not kebab-case.
    """
    plugin = name[len("vally-") :] if name.startswith("vally-") else name
    if not NAME_PATTERN.fullmatch(plugin):
        raise ScaffoldUsageError(
            f"plugin name {name!r} is not kebab-case (lower-case letters, digits and single "
            "hyphens, starting with a letter), e.g. 'my-check'"
        )
    distribution = f"vally-{plugin}"
    suffix = SUFFIXES[kind]
    stem = "".join(part.capitalize() for part in plugin.split("-"))
    if stem.lower().endswith(suffix.lower()) and len(stem) > len(suffix):
        stem = stem[: -len(suffix)]
    return Identity(plugin, distribution, distribution.replace("-", "_"), stem + suffix, stem)


def plan_scaffold(kind: str, name: str, output_dir: Path) -> Scaffold:
    """The names and the target folder of a new plugin package.

    Raises:
        ScaffoldUsageError: The kind is unknown or the name is not kebab-case.
    """
    kind = normalize_kind(kind)
    identity = identity_for(kind, name)
    return Scaffold(kind, identity, output_dir / identity.distribution)


# --------------------------------------------------------------------------- examples


def examples_root() -> Path:
    """The folder holding the example distributions: the copy shipped in the wheel, else
    ``plugins/examples/`` of the source checkout this module runs from.

    Raises:
        ConfigError: Neither exists (a broken installation).
    """
    here = Path(__file__).resolve()
    for candidate in (here.with_name(PACKAGED_EXAMPLES), here.parents[3] / "plugins" / "examples"):
        if candidate.is_dir():
            return candidate
    raise ConfigError(
        "this vally installation has no plugin examples to generate packages from",
        hint="reinstall vally (its wheel ships them in vally_authoring/plugin_examples)",
    )


def example_identity(kind: str, folder: Path) -> Identity:
    """The names of an example distribution, read from its ``pyproject.toml``.

    Raises:
        ConfigError: It declares no single entry point in the kind's group, or its class
            does not end with the kind's suffix.
    """
    from vally import ENTRY_POINT_GROUPS

    data = tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))
    group = ENTRY_POINT_GROUPS[kind]  # type: ignore[index]
    points = data.get("project", {}).get("entry-points", {}).get(group, {})
    suffix = SUFFIXES[kind]
    if len(points) != 1:
        raise ConfigError(f"{folder}: expected one entry point in {group}, found {len(points)}")
    ((name, target),) = points.items()
    package, _, class_name = str(target).partition(":")
    if not class_name.endswith(suffix) or class_name == suffix:
        raise ConfigError(f"{folder}: the class {class_name!r} does not end with {suffix!r}")
    distribution = str(data["project"]["name"])
    return Identity(name, distribution, package, class_name, class_name[: -len(suffix)])


def example_files(folder: Path) -> dict[str, str]:
    """The files of an example that make a package (relative POSIX path -> text):
    ``pyproject.toml``, ``README.md`` and everything below ``src/`` and ``tests/`` except
    caches and build output."""
    found = [folder / "pyproject.toml", folder / "README.md"]
    for part in ("src", "tests"):
        found += sorted(
            path
            for path in (folder / part).rglob("*")
            if path.is_file()
            and not SKIPPED.intersection(path.relative_to(folder).parts)
            and not path.name.endswith(".pyc")
            and ".egg-info" not in path.as_posix()
        )
    return {
        path.relative_to(folder).as_posix(): path.read_text(encoding="utf-8")
        for path in found
        if path.is_file()
    }


# --------------------------------------------------------------------------- renaming


def _name_in_code(old: str, new: str) -> Callable[[str], str]:
    """Replace ``old`` where it stands as a word of its own (not part of a path, a file
    name, a dotted or hyphenated name)."""
    word = re.compile(r"(?<![\w.\-/$])" + re.escape(old) + r"(?![\w.\-/])")
    return lambda text: word.sub(new, text)


def _rename_markdown_code(text: str, rename: Callable[[str], str]) -> str:
    """Apply ``rename`` inside fenced blocks and inline code spans only."""
    out: list[str] = []
    fenced = False
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced
            out.append(line)
        elif fenced:
            out.append(rename(line))
        else:
            out.append(re.sub(r"(`+)(.+?)\1", lambda m: rename(m.group(0)), line))
    return "".join(out)


def rename_text(text: str, path: str, old: Identity, new: Identity) -> str:
    """``text`` of the example file ``path`` with ``old``'s names replaced by ``new``'s
    (see the module documentation for the rules)."""
    in_code = _name_in_code(old.name, new.name)
    if path.endswith(".md"):
        text = _rename_markdown_code(text, in_code)
    elif path.endswith(".py"):
        text = re.sub(r"``[^`\n]+?``", lambda m: in_code(m.group(0)), text)
        text = text.replace(f'name="{old.name}"', f'name="{new.name}"')
    entry_point = rf'^{re.escape(old.name)}(?= = "{re.escape(old.package)}:)'
    text = re.sub(entry_point, new.name, text, flags=re.MULTILINE)
    spellings = {
        old.distribution: new.distribution,
        old.package: new.package,
        old.package.upper(): new.package.upper(),
    }
    pattern = "|".join(re.escape(s) for s in sorted(spellings, key=len, reverse=True))
    text = re.sub(pattern, lambda m: spellings[m.group(0)], text)
    return re.sub(rf"\b{re.escape(old.stem)}(?=[A-Z])", new.stem, text)


def render_files(scaffold: Scaffold) -> dict[str, str]:
    """The files of the new package, as relative path -> text."""
    folder = examples_root() / EXAMPLES[scaffold.kind]
    old = example_identity(scaffold.kind, folder)
    new = scaffold.identity
    return {
        path.replace(old.package, new.package): rename_text(text, path, old, new)
        for path, text in example_files(folder).items()
    }


def write_scaffold(scaffold: Scaffold, *, force: bool = False) -> list[Path]:
    """Write the package; returns the files written.

    Raises:
        ConfigError: The target folder exists and is not empty (and ``force`` is off).
        OutputError: The target (or a folder above it) is a file, or cannot be written.
    """
    root = scaffold.root
    for folder in (root, *root.parents):
        if folder.exists():
            if not folder.is_dir():
                raise OutputError(
                    f"cannot create the package folder {root}: {folder} is a file",
                    hint="pass another --output-dir, or move the file away",
                )
            break
    if root.exists() and any(root.iterdir()) and not force:
        raise ConfigError(
            f"{root} already exists and is not empty",
            hint="choose another name or --output-dir, or pass --force to overwrite",
        )
    written: list[Path] = []
    for relative, text in render_files(scaffold).items():
        path = root / relative
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise OutputError(
                f"cannot write {path}: {exc.strerror or exc}",
                hint="check that --output-dir is a writable folder",
            ) from exc
        written.append(path)
    return written
