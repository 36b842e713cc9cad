"""Which values of a record the store's columns can hold, and what to tell the user when
one cannot be held.

A record is plain JSON written by any program, so a field may hold what no column of
SQLite or PostgreSQL keeps: a NUL character (PostgreSQL text never holds one), a lone
surrogate (``"\\ud800"`` parses, but is not text and cannot be encoded as UTF-8), a
string longer than its column, ``NaN``, ``Infinity`` or a number beyond the integer
columns. The same rules hold on both backends, so a run stored in a SQLite file is stored
the same way in PostgreSQL.

Two kinds of fields, two answers (``docs/serve.md`` lists them):

* the fields that identify a trial (run id, trial id, eval, stimulus, model, variant) are
  checked with :func:`key_text`; a value that cannot be held is a :class:`RecordError`,
  and the record is skipped with the reason;
* the fields that describe it (durations, token counts, scores, end reason, ...) are
  checked with :func:`count`, :func:`real` and :func:`optional_text`; a value that cannot
  be held is left out of its column (``null``, not counted in the averages) and a note
  says so. The record's line itself is always kept verbatim, odd values included.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from sqlalchemy import Column

INTEGER_MAX = 2**31 - 1
"""The largest value of an integer column (PostgreSQL ``integer``, used on both backends)."""

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class RecordError(ValueError):
    """A record lacks a field the store needs, or holds one it cannot keep (the message
    names the field, says what is wrong and what to do)."""


def limit_of(column: Column[Any]) -> int | None:
    """The most characters ``column`` holds (None: any number)."""
    length = getattr(column.type, "length", None)
    return length if isinstance(length, int) else None


def describe(value: Any) -> str:
    """A short description of a JSON value for a message."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, int | float):
        text = repr(value)
        return text if len(text) <= 24 else f"a number of {len(text)} digits"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "a JSON object"
    if isinstance(value, list):
        return "a JSON array"
    return type(value).__name__


def text_fault(value: str, limit: int | None) -> str | None:
    """Why the text ``value`` cannot be held in a column of ``limit`` characters, or None
    when it can."""
    if "\x00" in value:
        return "holds a NUL character (\\u0000), which the store cannot keep"
    surrogate = None if value.isascii() else _LONE_SURROGATE.search(value)
    if surrogate is not None:
        code = f"\\u{ord(surrogate.group()):04x}"
        return f"holds a lone surrogate ({code}), which is not text"
    if limit is not None and len(value) > limit:
        return f"is {len(value):,} characters long; the store keeps up to {limit:,}"
    return None


def is_storable_text(value: Any, limit: int | None = None) -> bool:
    """True when ``value`` is a string a column of ``limit`` characters holds."""
    if type(value) is str and value.isascii():  # the common case: no surrogate can hide
        return "\x00" not in value and (limit is None or len(value) <= limit)
    return isinstance(value, str) and text_fault(value, limit) is None


def key_text(value: Any, name: str, limit: int | None, *, required: bool = True) -> str:
    """A field that identifies the trial, as the store keeps it ("" when optional and
    absent).

    Raises:
        RecordError: The field is missing (when required) or cannot be held.
    """
    if not isinstance(value, str) or (required and not value):
        if required:
            raise RecordError(f"the record has no {name!r} string")
        return ""
    fault = text_fault(value, limit)
    if fault is not None:
        raise RecordError(
            f"{name} {fault}; correct it in the record (or in the eval that names it) "
            "and ingest the folder again"
        )
    return value


def optional_text(value: Any, name: str, limit: int | None, notes: list[str]) -> str | None:
    """A descriptive text field, or None (with a note when it was present but cannot be
    held)."""
    if value is None:
        return None
    if (  # the common case, first: plain ASCII text (no surrogate can hide in it) that fits
        type(value) is str
        and value.isascii()
        and "\x00" not in value
        and (limit is None or len(value) <= limit)
    ):
        return value
    if not isinstance(value, str):
        notes.append(f"{name} is {describe(value)}, not a string; stored without it")
        return None
    fault = text_fault(value, limit)
    if fault is not None:
        notes.append(f"{name} {fault}; stored without it")
        return None
    return value


def count(value: Any, name: str, notes: list[str]) -> int | None:
    """A whole number of the record (a duration, a count of tokens, calls or turns) that
    an integer column holds, or None (with a note when it was present but is not a finite
    number from 0 to :data:`INTEGER_MAX`). A fraction is cut to its whole part."""
    if type(value) is int and 0 <= value <= INTEGER_MAX:  # the common case, first
        return value
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        notes.append(f"{name} is {describe(value)}, not a number; stored without it")
        return None
    if (isinstance(value, float) and not math.isfinite(value)) or not 0 <= value <= INTEGER_MAX:
        notes.append(
            f"{name} is {describe(value)}, not a number from 0 to {INTEGER_MAX:,}; "
            "stored without it"
        )
        return None
    return int(value)


def real(value: Any, name: str, notes: list[str]) -> float | None:
    """A finite number of the record (a score), or None (with a note when it was present
    but is not a finite number)."""
    if type(value) is float and math.isfinite(value):  # the common case, first
        return value
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        notes.append(f"{name} is {describe(value)}, not a number; stored without it")
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer beyond any float
        number = math.inf
    if not math.isfinite(number):
        notes.append(f"{name} is {describe(value)}, not a finite number; stored without it")
        return None
    return number


def path_text(path: Path) -> str:
    """``path`` as text a column holds: bytes of a file name that are not UTF-8 (kept by
    Python as lone surrogates) are shown as ``\\x..`` escapes."""
    text = str(path)
    if _LONE_SURROGATE.search(text) is None:
        return text
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate that no file name byte gave
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return raw.decode("utf-8", "backslashreplace")
