"""Cursor pagination and the errors of the REST API.

Every list the API returns is a page: the items and
``{"page": {"nextCursor", "limit", "hasMore", "total"}}``. A cursor is opaque to clients:
the sort key of the last item of the previous page, as URL-safe base64 of a JSON array.
Queries fetch ``limit + 1`` rows to know whether there is a next page (keyset pagination:
no OFFSET, so a deep page costs what the first one does).

A cursor comes from the client, so it is checked before any query sees it: its length
(:data:`MAX_CURSOR_CHARS`), its nesting (a flat array, parsed without recursion) and its
shape, which each list declares (:data:`TEXT_KEY`, :data:`SEQUENCE_KEY`, ...): so many
items, each a string the store could hold or a whole number in range. Anything else is a
400 that says to pass a ``nextCursor``, and names nothing of the query.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from vally import loads_bounded
from vally_serve.storable import text_fault

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
MAX_CURSOR_CHARS = 8192
"""The longest cursor accepted; the cursors this server makes are far shorter (a sort key
of at most three names of 300 characters)."""
MAX_KEY_TEXT = 300
"""The longest string of a cursor's sort key (the longest name a column holds)."""
MAX_KEY_NUMBER = 2**63 - 1
"""The largest number of a cursor's sort key (a row sequence or an event index)."""

KeyItem = Literal["text", "number"]
CursorShape = tuple[KeyItem, ...]
"""What a list's cursor holds, item by item: a string or a whole number."""

TEXT_KEY: CursorShape = ("text", "text")
"""Two strings: (eval, stimulus), or (start time, run id)."""
THREE_TEXT_KEY: CursorShape = ("text", "text", "text")
"""Three strings: (eval, stimulus, model)."""
SEQUENCE_KEY: CursorShape = ("number",)
"""One whole number: an outcome's ingestion sequence, or an event's index."""


class ApiError(Exception):
    """An error the API answers with the envelope ``{"error": {"code", "message"}}``.

    Args:
        status: The HTTP status.
        code: A stable snake_case code (``not_found``, ``bad_request``, ...).
        message: What is wrong and what to do, for the user.
    """

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def envelope(self) -> dict[str, Any]:
        """The JSON body of the error."""
        return {"error": {"code": self.code, "message": self.message}}


def not_found(what: str, key: str) -> ApiError:
    """A 404 for ``what`` (``run``, ``outcome``) named ``key``."""
    return ApiError(404, "not_found", f"no {what} {key!r} in the store")


def bad_request(message: str) -> ApiError:
    """A 400 with ``message``."""
    return ApiError(400, "bad_request", message)


@dataclass(frozen=True)
class PageRequest:
    """The ``limit`` and decoded ``cursor`` of a list request."""

    limit: int = DEFAULT_LIMIT
    after: tuple[Any, ...] | None = None

    @classmethod
    def parse(
        cls, params: Mapping[str, str], shape: CursorShape, *, default: int = DEFAULT_LIMIT
    ) -> PageRequest:
        """Read ``limit`` (1..500) and ``cursor`` (of ``shape``) from query parameters.

        Raises:
            ApiError: A limit that is not a number in range, or a cursor this server did
                not make for this list.
        """
        raw = params.get("limit")
        limit = default
        if raw is not None:
            if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= MAX_LIMIT:
                raise bad_request(f"limit must be a whole number from 1 to {MAX_LIMIT}")
            limit = int(raw)
        cursor = params.get("cursor")
        return cls(limit, decode_cursor(cursor, shape) if cursor else None)


def encode_cursor(key: Sequence[Any]) -> str:
    """The cursor that resumes after an item whose sort key is ``key``."""
    text = json.dumps(list(key), separators=(",", ":"), ensure_ascii=False)
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


_INVALID_CURSOR = "cursor is not valid: pass the nextCursor of a previous page of this list"


def decode_cursor(cursor: str, shape: CursorShape) -> tuple[Any, ...]:
    """The sort key inside ``cursor``, checked against ``shape``.

    Raises:
        ApiError: The cursor is too long, is not base64 of a flat JSON array, or its items
            are not those of ``shape`` (a string the store could hold, a whole number from
            0 to :data:`MAX_KEY_NUMBER`).
    """
    if len(cursor) > MAX_CURSOR_CHARS:
        raise bad_request(f"cursor is longer than {MAX_CURSOR_CHARS} characters: {_INVALID_CURSOR}")
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        value = loads_bounded(base64.urlsafe_b64decode(padded.encode("ascii")), max_depth=1)
    except (ValueError, binascii.Error):  # not base64, not UTF-8, not JSON, nested
        raise bad_request(_INVALID_CURSOR) from None
    if not isinstance(value, list) or len(value) != len(shape):
        raise bad_request(_INVALID_CURSOR)
    for item, kind in zip(value, shape, strict=True):
        if not _fits(item, kind):
            raise bad_request(_INVALID_CURSOR)
    return tuple(value)


def _fits(item: Any, kind: KeyItem) -> bool:
    if kind == "number":
        return type(item) is int and 0 <= item <= MAX_KEY_NUMBER
    return isinstance(item, str) and text_fault(item, MAX_KEY_TEXT) is None


def page_of(
    items: Sequence[Any], request: PageRequest, total: int, key: Any
) -> tuple[list[Any], dict[str, Any]]:
    """Trim ``items`` (``limit + 1`` fetched) to the page and describe it.

    Args:
        items: The rows fetched.
        request: The page request.
        total: How many items the whole list has.
        key: Gives the sort key of an item (for the next cursor).
    """
    more = len(items) > request.limit
    shown = list(items[: request.limit])
    cursor = encode_cursor(key(shown[-1])) if more and shown else None
    return shown, {"nextCursor": cursor, "limit": request.limit, "hasMore": more, "total": total}
