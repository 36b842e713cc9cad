"""Graders over the agent's workspace files: ``file-exists``, ``file-not-exists``,
``file-contains``, ``file-not-contains``, ``file-matches`` and ``file-not-matches``.

``path`` is a glob matched against workspace-relative POSIX paths: ``*`` matches within one
folder, ``**`` across folders (``src/**/*.py`` also matches ``src/a.py``), ``?`` one
character, ``[abc]`` a character class. A path without glob characters names one file.
Files are read only through the trial's sandbox, which lists regular files without following
symbolic links and skips ``.git`` and ``node_modules``.

Symbolic links matching ``path`` count too (when the sandbox can list them, see
``list_links`` in the backend guide): a program opening the link reads its target, so the
content graders read links that lead to files inside the workspace; ``file-not-exists``
fails on a link of that name wherever it points; and ``file-not-contains`` and
``file-not-matches`` fail on a link leading out of the workspace, whose content cannot be
checked (an agent cannot hide a file's content behind a link).

The content graders pass when **some** matching file contains (matches) the text, and their
negations pass when **no** matching file does. When no file matches ``path`` at all, the
positive graders fail and the negative ones pass (there is nothing that holds the text); add
a ``file-exists`` grader when the file must exist.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from functools import lru_cache
from typing import ClassVar

from pydantic import Field, field_validator

from vally import (
    GradeContext,
    GraderMetadata,
    GraderResult,
    PathEscapeError,
    Sandbox,
    StrictConfig,
)
from vally_builtin.graders import (
    ConditionGrader,
    RegexConfig,
    TextTest,
    confined_relative,
    describe_list,
    find_text,
    require_sandbox,
    shorten,
)

_GLOB_CHARS = set("*?[")


@lru_cache(maxsize=256)
def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """Translate a workspace glob (with ``**``) into an anchored regex over POSIX paths."""
    out: list[str] = []
    i = 0
    n = len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "*":
            if pattern.startswith("**", i):
                at_segment_start = i == 0 or pattern[i - 1] == "/"
                i += 2
                if at_segment_start and i < n and pattern[i] == "/":
                    out.append("(?:.*/)?")  # '**/' : zero or more folders
                    i += 1
                else:
                    out.append(".*")
                continue
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            end = pattern.find("]", i + 2 if pattern[i + 1 : i + 2] in ("!", "^") else i + 1)
            if end == -1:
                out.append(re.escape(ch))
            else:
                body = pattern[i + 1 : end]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append(f"[{body.replace(chr(92), chr(92) * 2)}]")
                i = end
        else:
            out.append(re.escape(ch))
        i += 1
    return re.compile("".join(out) + r"\Z")


def _static_prefix(pattern: str) -> str:
    """The folder part of ``pattern`` before its first glob character (``.`` if none)."""
    segments = pattern.split("/")
    folders: list[str] = []
    for segment in segments[:-1]:
        if _GLOB_CHARS & set(segment):
            break
        folders.append(segment)
    return "/".join(folders) or "."


async def _list_matching(
    list_paths: Callable[[str], Awaitable[list[str]]], pattern: str
) -> list[str]:
    """The paths ``list_paths`` gives under the glob's static prefix that match the glob,
    sorted."""
    regex = glob_to_regex(pattern)
    try:
        candidates = await list_paths(_static_prefix(pattern))
    except (FileNotFoundError, NotADirectoryError, PathEscapeError):
        # A missing folder holds no files; a folder that is a link leaving the workspace is
        # not followed, like every other link.
        return []
    return sorted(p for p in candidates if regex.match(p))


async def find_matching_files(sandbox: Sandbox, pattern: str) -> list[str]:
    """Workspace-relative paths of the regular files matching the glob, sorted."""
    return await _list_matching(sandbox.list_files, pattern)


async def find_matching_links(sandbox: Sandbox, pattern: str) -> list[str]:
    """Workspace-relative paths of the symbolic links matching the glob, sorted; empty
    when the sandbox cannot list links (its ``list_links`` is optional)."""
    list_links: Callable[[str], Awaitable[list[str]]] | None = getattr(sandbox, "list_links", None)
    if list_links is None:
        return []
    return await _list_matching(list_links, pattern)


class PathConfig(StrictConfig):
    """Config of ``file-exists`` / ``file-not-exists``.

    Attributes:
        path: A workspace-relative path or glob (``**`` spans folders).
    """

    path: str

    @field_validator("path")
    @classmethod
    def _confined(cls, value: str) -> str:
        return confined_relative(value, what="path")


class ContainsConfig(PathConfig):
    """Config of ``file-contains`` / ``file-not-contains``.

    Attributes:
        path: A workspace-relative path or glob.
        value: The text to look for.
        case_sensitive: Compare case-sensitively (default true).
    """

    value: str = Field(min_length=1)
    case_sensitive: bool = True

    def text_test(self) -> TextTest:
        """The text and its case sensitivity."""
        return self.value, self.case_sensitive

    def shown(self) -> str:
        """The text, quoted and shortened, as evidence shows it."""
        return f"'{shorten(self.value)}'"


class FilePatternConfig(RegexConfig, PathConfig):
    """Config of ``file-matches`` / ``file-not-matches``.

    Attributes:
        path: A workspace-relative path or glob.
        pattern: A regular expression searched in each file's content.
        flags: Optional flag letters (``i``, ``m``, ``s``, ``x``).
    """


def _metadata(name: str, description: str, *, nonblocking: bool = True) -> GraderMetadata:
    """A file grader's metadata; those that search with a user's regular expression may
    block (``nonblocking=False``)."""
    return GraderMetadata(
        name=name,
        description=description,
        cost_profile="low",
        portability="t1-universal",
        needs_workspace=True,
        nonblocking=nonblocking,
    )


async def _read_text(sandbox: Sandbox, path: str) -> str:
    return (await sandbox.read_file(path)).decode("utf-8", errors="replace")


class FileExistsGrader(ConditionGrader):
    """Passes when at least one workspace file matches ``path``."""

    metadata: ClassVar[GraderMetadata] = _metadata(
        "file-exists", "A file matching a path or glob exists in the workspace."
    )
    Config = PathConfig
    hit_text = "Files matching '{path}' found: {found}"
    miss_text = "No files matching '{path}' found"

    async def grade(self, context: GradeContext) -> GraderResult:
        """List what matches ``path`` through the sandbox (see :meth:`_matching`)."""
        sandbox = require_sandbox(context, self.metadata.name)
        found = await self._matching(sandbox, self.config.path)
        values = {"path": self.config.path, "found": describe_list(found)}
        return self.verdict(context, hit=bool(found), values=values, metadata={"files": found})

    async def _matching(self, sandbox: Sandbox, pattern: str) -> list[str]:
        """The workspace files matching ``pattern``."""
        return await find_matching_files(sandbox, pattern)


class FileNotExistsGrader(FileExistsGrader):
    """Passes when no workspace file, and no link, matches ``path``."""

    metadata: ClassVar[GraderMetadata] = _metadata(
        "file-not-exists", "No file matching a path or glob exists in the workspace."
    )
    negate = True
    hit_text = "Files matching '{path}' found (they must not exist): {found}"

    async def _matching(self, sandbox: Sandbox, pattern: str) -> list[str]:
        """The workspace files and links matching ``pattern``: a link of that name exists
        too, wherever it points."""
        found = await find_matching_files(sandbox, pattern)
        return sorted({*found, *await find_matching_links(sandbox, pattern)})


async def _files_with(
    sandbox: Sandbox, pattern: str, test: TextTest
) -> tuple[list[str], list[str], list[str]]:
    """(matching files and links, those whose content passes ``test``, links whose
    content cannot be read because they lead out of the workspace).

    Links are read through when they lead to a file inside the workspace: a program that
    opens ``config.py`` reads what the link points to, so the graders do too.
    """
    files = await find_matching_files(sandbox, pattern)
    links = await find_matching_links(sandbox, pattern)
    hits: list[str] = []
    escaping: list[str] = []
    for path in [*files, *links]:
        try:
            text = await _read_text(sandbox, path)
        except PathEscapeError:
            escaping.append(path)
            continue
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            continue  # a dangling link, or a link to a folder: it holds no text
        if find_text(text, test) is not None:
            hits.append(path)
    return sorted({*files, *links}), sorted(hits), escaping


class _FileContentGrader(ConditionGrader):
    """Shared logic of the content graders: read the files matching ``path`` through the
    sandbox and test each one's content with the config's ``text_test()``; subclasses set
    the verdict's direction and the evidence texts (formatted with ``what``, the config's
    ``shown()``, and ``path``, ``hits`` and ``found``);
    ``no_files_text`` is the evidence when no file matches ``path`` at all."""

    no_files_text: ClassVar[str]

    async def grade(self, context: GradeContext) -> GraderResult:
        """Read matching files through the sandbox and test their content."""
        sandbox = require_sandbox(context, self.metadata.name)
        path = self.config.path
        found, hits, escaping = await _files_with(sandbox, path, self.config.text_test())
        if self.negate and escaping and not hits:
            # What the agent's code reads through these links cannot be checked, so the
            # absence of the text cannot be shown.
            evidence = (
                f"{describe_list(escaping)} match '{path}' but link outside the workspace: "
                f"their content cannot be checked for {self.config.shown()} (it must be absent)"
            )
            return self.result(
                context, passed=False, evidence=evidence, metadata={"links": escaping}
            )
        values = {
            "what": self.config.shown(),
            "path": path,
            "hits": describe_list(hits),
            "found": describe_list(found),
        }
        return self.verdict(
            context,
            hit=bool(hits),
            values=values,
            miss_text=None if found else self.no_files_text,
            metadata={"files": hits},
        )


class FileContainsGrader(_FileContentGrader):
    """Passes when some file matching ``path`` contains ``value``."""

    metadata: ClassVar[GraderMetadata] = _metadata(
        "file-contains", "A workspace file matching a path or glob contains a text."
    )
    Config = ContainsConfig
    hit_text = "{what} found in {hits}"
    no_files_text = "No files matching '{path}' found"
    miss_text = "{what} not found in files matching '{path}' (checked: {found})"


class FileNotContainsGrader(FileContainsGrader):
    """Passes when no file matching ``path`` contains ``value``."""

    metadata: ClassVar[GraderMetadata] = _metadata(
        "file-not-contains", "No workspace file matching a path or glob contains a text."
    )
    negate = True
    hit_text = "{what} found in {hits} (it must be absent)"
    no_files_text = "No files matching '{path}' found (nothing holds the text)"
    miss_text = "{what} not found in {found}"


class FileMatchesGrader(_FileContentGrader):
    """Passes when the content of some file matching ``path`` matches ``pattern``."""

    metadata: ClassVar[GraderMetadata] = _metadata(
        "file-matches",
        "A workspace file's content matches a regular expression.",
        nonblocking=False,
    )
    Config = FilePatternConfig
    hit_text = "{what} matched in {hits}"
    no_files_text = "No files matching '{path}' found"
    miss_text = "{what} did not match any file matching '{path}' (checked: {found})"


class FileNotMatchesGrader(FileMatchesGrader):
    """Passes when no file matching ``path`` has content matching ``pattern``."""

    metadata: ClassVar[GraderMetadata] = _metadata(
        "file-not-matches",
        "No workspace file's content matches a regular expression.",
        nonblocking=False,
    )
    negate = True
    hit_text = "{what} matched in {hits} (it must not)"
    no_files_text = "No files matching '{path}' found (nothing to match)"
    miss_text = "{what} did not match {found}"
