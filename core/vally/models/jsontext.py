"""Parsing JSON text from untrusted sources without ever raising ``RecursionError``.

``json.loads`` recurses once per nesting level: a line of 100,000 ``[`` raises
``RecursionError`` (which no ``except ValueError`` catches), and a value just under the
interpreter's limit makes every later recursive walk (validation, scrubbing, dumping) fail
instead. :func:`loads_bounded` refuses values nested deeper than a limit with
:class:`JsonTooDeepError`, a :class:`ValueError` like the errors of malformed JSON, so a
caller that already handles bad JSON handles deep JSON too.

Text that nests no deeper than the limit is parsed by ``orjson`` when it is installed (about
three times faster on trial records) and by ``json`` otherwise, or when ``orjson`` refuses
it (``NaN``, lone surrogates) or the text holds 19 digits in a row (``orjson`` reads an
integer beyond 64 bits as a float), so the value and the errors are those of
``json.loads`` either way.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from vally.models.limits import JSON_DEPTH


def _fast_loads() -> Callable[[str | bytes], Any] | None:
    """``orjson.loads`` when orjson is installed (optional: only the dev extra requires it)."""
    import importlib

    try:
        module = importlib.import_module("orjson")
    except ImportError:
        return None
    loads: Callable[[str | bytes], Any] = module.loads
    return loads


_FAST_LOADS = _fast_loads()


_DIGIT_TABLE = bytes(ord("0") if 0x30 <= c <= 0x39 else ord(" ") for c in range(256))
"""Maps each ASCII digit to ``0`` and every other byte to a space (for :func:`_long_digits`)."""
_LONG_RUN = b"0" * 19
_SHAPE_TABLE = bytes(
    ord("0") if 0x30 <= c <= 0x39 else ord("[") if c in b"[{" else ord(" ") for c in range(256)
)
""":data:`_DIGIT_TABLE` that also maps ``{`` to ``[``: one pass gives both the opening
brackets and the digit runs of a text (for :func:`loads_bounded`)."""


def _long_digits(data: bytes) -> bool:
    """Whether ``data`` holds 19 ASCII digits in a row: maybe an integer beyond 64 bits,
    which ``orjson`` reads as a float. Two C passes over the bytes (a regular expression
    takes about eight times as long on a trial record)."""
    return _LONG_RUN in data.translate(_DIGIT_TABLE)


def _opening_brackets(shape: bytes) -> int:
    """How many ``[`` a translated line holds: its length less that of the line without
    them. Deleting one byte value finds each with ``memchr``, about a half of the
    instructions of ``bytes.count``, which tests every byte (a line holds a few dozen
    brackets in some thousands of bytes)."""
    return len(shape) - len(shape.replace(b"[", b""))


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``, parsed by ``orjson`` when it is installed and accepts the text
    (and holds no run of 19 digits, which may be an integer ``orjson`` would round)."""
    if _FAST_LOADS is not None:
        try:
            data = text.encode("utf-8") if isinstance(text, str) else text
        except UnicodeEncodeError:  # lone surrogates: orjson refuses them, json reads them
            return json.loads(text)
        return _parse(data, long_digits=_long_digits(data))
    return json.loads(text)


def _parse(data: bytes, *, long_digits: bool) -> Any:
    """``data`` parsed by ``orjson`` unless it holds a run of 19 digits (``long_digits``),
    or there is no ``orjson``, or it refuses the text; by ``json`` otherwise."""
    if _FAST_LOADS is not None and not long_digits:
        try:
            return _FAST_LOADS(data)
        except ValueError:  # orjson.JSONDecodeError: let json parse it or say why not
            pass
    return json.loads(data)


class JsonTooDeepError(ValueError):
    """A JSON value nests arrays and objects deeper than the limit allows.

    Attributes:
        limit: The depth that was allowed.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(
            f"JSON nested deeper than {limit} levels "
            f"(the limit is {JSON_DEPTH.env}, default {JSON_DEPTH.default})"
        )


def json_depth(value: Any, *, stop_after: int | None = None) -> int:
    """The nesting depth of a parsed JSON value (a scalar is 0, ``[]`` is 1), found without
    recursion. With ``stop_after`` the walk ends as soon as the depth exceeds it."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        depth += 1
        if depth > deepest:
            deepest = depth
            if stop_after is not None and deepest > stop_after:
                return deepest
        stack.extend((child, depth) for child in children if isinstance(child, dict | list))
    return deepest


def _utf8(text: str) -> str | bytes:
    """``text`` encoded as UTF-8, or itself when it holds lone surrogates (which orjson
    refuses and json reads)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return text


def loads_bounded(text: str | bytes, *, max_depth: int | None = None) -> Any:
    """``json.loads(text)``, refusing values nested deeper than ``max_depth``.

    Args:
        text: The JSON text.
        max_depth: The deepest nesting allowed; None for :data:`~vally.models.limits.JSON_DEPTH`
            (``VALLY_MAX_JSON_DEPTH``).

    Raises:
        JsonTooDeepError: The value nests deeper than the limit (a ``ValueError``).
        json.JSONDecodeError: The text is not JSON (a ``ValueError``).
    """
    limit = JSON_DEPTH.value() if max_depth is None else max_depth
    if _FAST_LOADS is not None and isinstance(text, str):
        text = _utf8(text)  # orjson reads bytes: one pass then makes both checks below
    if isinstance(text, bytes):
        shape = text.translate(_SHAPE_TABLE)  # one pass: brackets and digit runs
        if _opening_brackets(shape) <= limit:  # cannot nest deeper than the brackets it holds
            return _parse(text, long_digits=_LONG_RUN in shape)
    elif text.count("[") + text.count("{") <= limit:
        return loads(text)
    try:
        value = json.loads(text)
    except RecursionError:
        raise JsonTooDeepError(limit) from None
    if json_depth(value, stop_after=limit) > limit:
        raise JsonTooDeepError(limit)
    return value
