"""Where a plugin crashed: the traceback of an unexpected exception, and the file and line
of the plugin's own frame in it, kept in the trial's error record.

The plugin's frame is the innermost frame outside the vally kernel and the Python standard
library: for a grader that divides by zero it is the grader's line, even when the
exception was raised deeper inside a library the grader called.
"""

from __future__ import annotations

import sysconfig
import traceback
from pathlib import Path

TRACEBACK_LIMIT = 20_000
"""Characters of traceback kept in a record (the end, where the exception was raised)."""

_KERNEL = Path(__file__).resolve().parents[1]
_STDLIB = tuple(
    str(Path(p).resolve())
    for p in {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]}
)


def _is_plugin_file(filename: str) -> bool:
    path = Path(filename).resolve()
    if path.is_relative_to(_KERNEL):
        return False
    text = str(path)
    return not text.startswith(_STDLIB) or "site-packages" in text or "dist-packages" in text


def plugin_location(exc: BaseException) -> str | None:
    """``path:line`` of the innermost frame of ``exc``'s traceback that belongs to neither
    the kernel nor the standard library; None when there is no such frame."""
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        if frame.filename.startswith("<"):
            continue
        if _is_plugin_file(frame.filename):
            return f"{frame.filename}:{frame.lineno}"
    return None


def format_traceback(exc: BaseException) -> str:
    """The traceback of ``exc`` as Python prints it (chained causes included), cut to its
    last :data:`TRACEBACK_LIMIT` characters."""
    text = "".join(traceback.format_exception(exc)).rstrip()
    if len(text) > TRACEBACK_LIMIT:
        text = "…" + text[-TRACEBACK_LIMIT:]
    return text
