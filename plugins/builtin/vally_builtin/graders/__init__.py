"""vally's built-in graders, and the small helpers they share.

Grader modules: :mod:`.output` (final output text), :mod:`.files` (workspace files),
:mod:`.command` (``run-command``), :mod:`.program` (``program``) and :mod:`.trajectory`
(tool calls, skills, budgets, liveness). Each is registered under the ``vally.graders``
entry-point group by name. :mod:`.process` runs the commands of the graders that run one
and words the evidence of how they ended.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field, model_validator

from vally import BaseGrader, GradeContext, GraderResult, GradingError, Sandbox, StrictConfig

if TYPE_CHECKING:  # regex is imported by the first pattern compiled, not at start-up
    import regex

__all__ = [
    "REGEX_TIMEOUT",
    "ConditionGrader",
    "RegexConfig",
    "TextTest",
    "TimedPattern",
    "compile_pattern",
    "confined_relative",
    "copy_folder_in",
    "describe_list",
    "find_text",
    "require_sandbox",
    "shorten",
]

_FLAG_LETTERS = {
    "i": re.IGNORECASE,
    "m": re.MULTILINE,
    "s": re.DOTALL,
    "x": re.VERBOSE,
    "a": re.ASCII,
    "u": 0,  # Python patterns are Unicode already
    "g": 0,  # "global" means nothing for a search
}
_INLINE_GLOBAL = re.compile(r"(?<!\\)\(\?([aiLmsux]+)\)")
_NAMED_GROUP = re.compile(r"(?<!\\)\(\?<(?![=!])([A-Za-z_][A-Za-z0-9_]*)>")
_NAMED_BACKREF = re.compile(r"\\k<([A-Za-z_][A-Za-z0-9_]*)>")


REGEX_TIMEOUT = 10.0
"""Seconds one regular-expression search may take before its grader errors."""


class TimedPattern:
    """A compiled regular expression whose searches stop after :data:`REGEX_TIMEOUT`.

    Patterns are matched by the ``regex`` package rather than ``re``: it takes a
    ``timeout`` and releases the interpreter lock while it matches, so a pattern that
    backtracks exponentially (``^(\\w+\\s?)+$`` on a long line) errors its grader instead
    of freezing the run. It also keeps Python's syntax (look-arounds, back-references),
    which RE2 does not have.

    Args:
        compiled: The compiled pattern.
        source: The pattern as the spec wrote it (for messages).
    """

    def __init__(self, compiled: regex.Pattern[str], source: str) -> None:
        self.compiled = compiled
        self.source = source
        self.pattern = compiled.pattern

    def search(self, text: str) -> regex.Match[str] | None:
        """The first match in ``text``, or None.

        Raises:
            GradingError: The search took longer than :data:`REGEX_TIMEOUT`.
        """
        try:
            return self.compiled.search(text, timeout=REGEX_TIMEOUT)
        except TimeoutError:
            raise GradingError(
                f"the regular expression /{self.source}/ took longer than "
                f"{REGEX_TIMEOUT:g}s on {len(text):,} characters and was stopped",
                hint="simplify the pattern: nested quantifiers such as (\\w+\\s?)+ backtrack "
                "exponentially; anchor it or use possessive/atomic groups",
            ) from None


@lru_cache(maxsize=1024)
def compile_pattern(pattern: str, flags: str | None = None) -> TimedPattern:
    """Compile a regex written for vally's (JavaScript/PCRE-flavoured) specs.

    Accepts, beyond Python syntax: inline global flags such as ``(?i)`` anywhere (they are
    moved to the front), ``(?<name>...)`` named groups and ``\\k<name>`` back-references,
    and a ``flags`` string of letters (``i`` ignore case, ``m`` multi-line, ``s`` dot matches
    newline, ``x`` verbose; ``g`` and ``u`` are accepted and ignored).

    Raises:
        ValueError: The pattern or a flag is invalid (message says which and why).
    """
    value = 0
    for letter in flags or "":
        if letter not in _FLAG_LETTERS:
            raise ValueError(f"unknown regex flag {letter!r} in {flags!r}; use letters of 'imsx'")
        value |= _FLAG_LETTERS[letter]
    translated = _NAMED_GROUP.sub(r"(?P<\1>", pattern)
    translated = _NAMED_BACKREF.sub(r"(?P=\1)", translated)
    try:
        re.compile(translated, value)  # Python's syntax is the contract: check it first
    except re.error as first:
        hoisted = "".join(_INLINE_GLOBAL.findall(translated))
        if hoisted:
            rest = _INLINE_GLOBAL.sub("", translated)
            try:
                candidate = f"(?{''.join(sorted(set(hoisted)))}){rest}"
                re.compile(candidate, value)
            except re.error:
                pass
            else:
                return _timed(candidate, value, pattern)
        raise ValueError(f"invalid regular expression {pattern!r}: {first}") from None
    return _timed(translated, value, pattern)


def _timed(translated: str, flags: int, source: str) -> TimedPattern:
    import regex

    try:
        return TimedPattern(regex.compile(translated, flags | regex.VERSION0), source)
    except regex.error as exc:
        raise ValueError(f"invalid regular expression {source!r}: {exc}") from None


TextTest = TimedPattern | tuple[str, bool]
"""What a text grader looks for: a compiled pattern, or ``(text, case_sensitive)``."""


def find_text(text: str, test: TextTest) -> str | None:
    """The part of ``text`` that ``test`` finds (the pattern's match or the searched text),
    or None when it finds nothing."""
    if isinstance(test, tuple):
        needle, case_sensitive = test
        found = needle in text if case_sensitive else needle.casefold() in text.casefold()
        return needle if found else None
    match = test.search(text)
    return None if match is None else match.group(0)


class RegexConfig(StrictConfig):
    """Config fields of the graders that search a regular expression.

    Attributes:
        pattern: A regular expression (inline flags like ``(?i)`` work anywhere in it).
        flags: Optional flag letters: ``i`` (ignore case), ``m`` (multi-line), ``s`` (dot
            matches newline), ``x`` (verbose).
    """

    pattern: str = Field(min_length=1)
    flags: str | None = None

    @model_validator(mode="after")
    def _compiles(self) -> RegexConfig:
        compile_pattern(self.pattern, self.flags)
        return self

    def text_test(self) -> TextTest:
        """The compiled pattern."""
        return compile_pattern(self.pattern, self.flags)

    def shown(self) -> str:
        """The pattern between slashes, as evidence shows it."""
        return f"/{self.pattern}/"


class ConditionGrader(BaseGrader[Any]):
    """Base of the grader pairs that check one condition (``output-contains``) or its
    absence (``output-not-contains``).

    A subclass finds what the condition holds on and calls :meth:`verdict`: the condition
    holding passes the grader, or fails it when ``negate`` is set. ``hit_text`` (the
    condition held) and ``miss_text`` (it did not) are the evidence templates, formatted
    with the values the subclass passes.
    """

    negate: ClassVar[bool] = False
    hit_text: ClassVar[str]
    miss_text: ClassVar[str]

    def verdict(
        self,
        context: GradeContext,
        *,
        hit: bool,
        values: dict[str, str],
        miss_text: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> GraderResult:
        """The result: passed when ``hit`` differs from ``negate``; ``metadata`` is kept on
        a hit only; ``miss_text`` replaces the class's template for this miss."""
        if hit:
            evidence = self.hit_text.format(**values)
            return self.result(
                context, passed=not self.negate, evidence=evidence, metadata=metadata
            )
        evidence = (miss_text or self.miss_text).format(**values)
        return self.result(context, passed=self.negate, evidence=evidence)


def require_sandbox(context: GradeContext, grader: str) -> Sandbox:
    """The trial's sandbox, or a :class:`GradingError` saying the grader needs one."""
    if context.trajectory.workspace_status == "remote":
        raise GradingError(
            f"grader '{context.grader.label}' ({grader}) needs the trial workspace, but the "
            "executor kept it remote (workspaceStatus 'remote'); use an executor that "
            "materializes the workspace, or drop this grader"
        )
    if context.sandbox is None:
        raise GradingError(
            f"grader '{context.grader.label}' ({grader}) needs the trial workspace, but none "
            "is available (saved trajectories are re-graded without one); pass a workspace "
            "or use graders that only read the trajectory"
        )
    return context.sandbox


def confined_relative(path: str, *, what: str) -> str:
    """Normalise a workspace-relative POSIX path; reject absolute paths and ``..`` escapes.

    Raises:
        ValueError: The path is empty, absolute or climbs out of its root.
    """
    text = path.replace("\\", "/").strip()
    if not text:
        raise ValueError(f"{what} must not be empty")
    if text.startswith("/") or re.match(r"^[A-Za-z]:/", text):
        raise ValueError(f"{what} {path!r} must be relative to the workspace, not absolute")
    parts: list[str] = []
    for part in PurePosixPath(text).parts:
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise ValueError(f"{what} {path!r} points outside the workspace")
            parts.pop()
            continue
        parts.append(part)
    if not parts:
        raise ValueError(f"{what} {path!r} names the workspace itself, not a file")
    return "/".join(parts)


def resolve_host_source(spec_dir: Path, src: str, *, what: str) -> Path:
    """Resolve ``src`` against ``spec_dir`` and make sure it stays inside it.

    Raises:
        GradingError: The path escapes ``spec_dir`` or does not exist.
    """
    root = spec_dir.resolve()
    candidate = (root / src).resolve()
    if candidate != root and root not in candidate.parents:
        raise GradingError(
            f"{what} {src!r} resolves outside the eval file's folder ({candidate}); keep "
            "grader files next to the eval file"
        )
    if not candidate.exists():
        raise GradingError(
            f"{what} {src!r} does not exist (looked for {candidate}, relative to the eval "
            "file's folder)"
        )
    return candidate


async def copy_folder_in(
    sandbox: Sandbox, source: Path, dest: str, *, timeout: float | None = None
) -> None:
    """Copy every regular file below the host folder ``source`` to ``dest/<relative path>`` in
    the sandbox in one transfer (symbolic links are skipped): the files are staged in a
    temporary folder, then copied in by one ``copy_in``, so a folder of 2,000 files costs one
    backend call, not 2,000.

    Raises:
        GradingError: Staging and copying took longer than ``timeout`` seconds.
    """

    def stage(into: Path) -> None:
        for item in sorted(source.rglob("*")):
            if item.is_symlink() or not item.is_file():
                continue
            target = into / item.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(item, target)

    async def copy() -> None:
        with tempfile.TemporaryDirectory(prefix="vally-stage-") as folder:
            staged = Path(folder) / "files"
            staged.mkdir()
            await asyncio.to_thread(stage, staged)
            await sandbox.copy_in(staged, dest)

    try:
        await asyncio.wait_for(copy(), timeout)
    except TimeoutError:
        raise GradingError(
            f"copying {source} into the sandbox took longer than {timeout:g}s",
            hint="keep the folder small, or raise the grader's timeout",
        ) from None


def shorten(text: str, limit: int = 200) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def describe_list(items: list[str], limit: int = 20) -> str:
    """``a, b, c`` with at most ``limit`` items and ``(+N more)`` after."""
    shown = ", ".join(items[:limit])
    if len(items) > limit:
        shown += f" (+{len(items) - limit} more)"
    return shown


def pattern_validator(value: Any) -> Any:
    """Pydantic helper: check a regex compiles (with vally's translations) and keep it."""
    if isinstance(value, str):
        compile_pattern(value)
    return value
