"""Durations with a required unit suffix: ``30000ms``, ``300s``, ``5m``, ``1h``.

A bare number is rejected with a message that says which unit to add, because vally's
files historically accepted both seconds and milliseconds and a bare ``120`` is ambiguous.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer, WithJsonSchema

from vally.errors import DurationError

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)\s*$")


def parse_duration(value: Any, *, field: str = "duration") -> float:
    """Parse ``value`` into seconds.

    Accepts a string with a unit suffix (``ms``, ``s``, ``m``, ``h``). Raises
    :class:`DurationError` for bare numbers, negative values and unknown units.
    """
    if isinstance(value, bool):
        raise DurationError(f"{field}: expected a duration like '5m', got {value!r}")
    if isinstance(value, (int, float)):
        raise DurationError(
            f"{field}: a duration needs a unit suffix; write '{value}s' for seconds or "
            f"'{value}ms' for milliseconds (got the bare number {value})"
        )
    if not isinstance(value, str):
        raise DurationError(f"{field}: expected a duration like '5m', got {type(value).__name__}")
    match = _PATTERN.match(value)
    if not match:
        if value.strip().lstrip("-").replace(".", "", 1).isdigit():
            raise DurationError(
                f"{field}: a duration needs a unit suffix; write '{value.strip()}s' or "
                f"'{value.strip()}ms' (got {value!r})"
            )
        raise DurationError(
            f"{field}: cannot read {value!r} as a duration; use a number with a unit: "
            "'30000ms', '300s', '5m' or '1h'"
        )
    return float(match.group(1)) * _UNITS[match.group(2)]


def format_duration(seconds: float) -> str:
    """Render seconds in the shortest exact unit form (``120.0`` -> ``'2m'``)."""
    ms = round(seconds * 1000)
    if ms % 3_600_000 == 0 and ms:
        return f"{ms // 3_600_000}h"
    if ms % 60_000 == 0 and ms:
        return f"{ms // 60_000}m"
    if ms % 1000 == 0:
        return f"{ms // 1000}s"
    return f"{ms}ms"


def _validate(value: Any) -> float:
    try:
        return parse_duration(value)
    except DurationError as exc:
        # pydantic turns ValueError into a field error that carries the location.
        raise ValueError(exc.message) from None


Duration = Annotated[
    float,
    BeforeValidator(_validate),
    PlainSerializer(format_duration, return_type=str),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": r"^\d+(\.\d+)?(ms|s|m|h)$",
            "description": "A duration with a unit suffix: 30000ms, 300s, 5m, 1h.",
        }
    ),
]
"""A pydantic field type: parsed from a suffixed string, stored as seconds, dumped as a string."""
