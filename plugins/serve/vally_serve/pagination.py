"""Cursor pagination and the errors of the REST API.

Every list the API returns is a page: the items and
``{"page": {"nextCursor", "limit", "hasMore", "total"}}``. A cursor is opaque to clients:
the sort key of the last item of the previous page, as URL-safe base64 of a JSON array.
Queries fetch ``limit + 1`` rows to know whether there is a next page (keyset pagination:
no OFFSET, so a deep page costs what the first one does).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_LIMIT = 50
MAX_LIMIT = 500


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
    def parse(cls, params: Mapping[str, str], *, default: int = DEFAULT_LIMIT) -> PageRequest:
        """Read ``limit`` (1..500) and ``cursor`` from query parameters.

        Raises:
            ApiError: A limit that is not a number in range, or a malformed cursor.
        """
        raw = params.get("limit")
        limit = default
        if raw is not None:
            if not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
                raise bad_request(f"limit must be a whole number from 1 to {MAX_LIMIT}")
            limit = int(raw)
        cursor = params.get("cursor")
        return cls(limit, decode_cursor(cursor) if cursor else None)


def encode_cursor(key: Sequence[Any]) -> str:
    """The cursor that resumes after an item whose sort key is ``key``."""
    text = json.dumps(list(key), separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[Any, ...]:
    """The sort key inside ``cursor``.

    Raises:
        ApiError: The cursor was not made by this server.
    """
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        value = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, binascii.Error):
        value = None
    if not isinstance(value, list) or not value:
        raise bad_request("cursor is not valid: pass the nextCursor of a previous page")
    return tuple(value)


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
