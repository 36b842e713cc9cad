"""JSON lines parse to what ``json.loads`` gives, whichever parser reads them."""

from __future__ import annotations

import importlib.util
import json

import pytest

from vally.models import jsontext

TEXTS = [
    '{"a": 1, "b": [true, null, 2.5], "c": "\\u00e9\\u2603"}',
    '{"score": NaN, "big": Infinity, "small": -Infinity}',  # orjson refuses these
    '{"n": 123456789012345678901234567890}',  # beyond 64 bits
    '{"n": -18446744073709551617, "m": 18446744073709551615}',
    '{"f": 0.1, "g": 1e-7, "h": 5e-324, "i": -0.0, "j": 1.7976931348623157e308}',
    '{"s": "\\ud800"}',  # a lone surrogate
    '{"k": 1, "k": 2}',  # a repeated key: the last one wins
    "1e400",
    '{"n": 9223372036854775808, "m": -9223372036854775809}',  # 19 digits, just past int64
    '{"id": "12345678901234567890123"}',  # a long digit run inside a string
    '{"s": "\ud800 raw"}',  # an unescaped lone surrogate: the text cannot be UTF-8
]


@pytest.mark.parametrize("text", TEXTS)
def test_loads_gives_what_json_gives(text: str) -> None:
    got, expected = jsontext.loads(text), json.loads(text)
    assert repr(got) == repr(expected)  # repr: NaN != NaN
    assert repr(jsontext.loads_bounded(text, max_depth=8)) == repr(expected)


@pytest.mark.parametrize("text", [t for t in TEXTS if "\ud800 raw" not in t])
def test_bytes_parse_as_the_text_does(text: str) -> None:
    data = text.encode("utf-8")
    assert repr(jsontext.loads(data)) == repr(json.loads(data))


def test_bad_json_raises_json_own_error() -> None:
    with pytest.raises(json.JSONDecodeError, match="Expecting value: line 1 column 7"):
        jsontext.loads('{"a": ')


def test_the_fast_parser_is_used_when_installed() -> None:
    installed = importlib.util.find_spec("orjson") is not None
    assert (jsontext._FAST_LOADS is not None) == installed


@pytest.mark.parametrize("limit", [1, 2, 3, 5])
def test_a_byte_line_at_the_bracket_bound_parses_and_one_deeper_is_refused(limit: int) -> None:
    """The opening brackets of a byte line are counted exactly: as many as the limit (and
    nested that deep) parse, one more nested level is refused."""
    at_limit = ("[" * limit + "]" * limit).encode()
    deeper = ("[" * (limit + 1) + "]" * (limit + 1)).encode()
    assert jsontext.loads_bounded(at_limit, max_depth=limit) == json.loads(at_limit)
    with pytest.raises(jsontext.JsonTooDeepError):
        jsontext.loads_bounded(deeper, max_depth=limit)


def test_opening_brackets_are_counted_as_bytes_count_counts_them() -> None:
    lines = [b"", b"[", b"[[0 0[", b" " * 5000 + b"[" * 70 + b"0" * 19, bytes(range(256)) * 3]
    for line in lines:
        assert jsontext._opening_brackets(line) == line.count(b"[")
