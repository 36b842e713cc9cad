"""Fuzz the judge cache's reader: whatever a cache entry holds (an entry of the right shape
with random values, any JSON, deep nesting, bytes that are not JSON), reading it returns
either no answer (a miss, which the provider's answer then replaces) or an answer whose
token counts are whole, finite and not negative. It never raises."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import example, given, strategies as st

from vally.engine.trials.judge_cache import read_entry

from . import FUZZ

KEY = "0123abcd"

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["assistant", "user", "tool", "system", "stop", KEY]),
)
VALUES = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=15,
)
MESSAGE_KEYS = ["role", "content", "tool_calls", "tool_call_id", "name"]
RESPONSE_KEYS = [
    "message", "finish_reason", "input_tokens", "output_tokens", "cache_read_tokens", "model",
]


@st.composite
def entries(draw: st.DrawFn) -> str:
    """The text of one cache entry file."""
    kind = draw(st.sampled_from(["shaped", "shaped", "json", "deep", "text"]))
    if kind == "shaped":
        message = draw(st.fixed_dictionaries({}, optional=dict.fromkeys(MESSAGE_KEYS, VALUES)))
        response: dict[str, Any] = draw(
            st.fixed_dictionaries({}, optional=dict.fromkeys(RESPONSE_KEYS, VALUES))
        )
        if draw(st.booleans()):
            response["message"] = message
        key = draw(st.sampled_from([KEY, KEY, "other"]))
        return json.dumps({"key": key, "response": response}, allow_nan=True)
    if kind == "json":
        return json.dumps(draw(VALUES), allow_nan=True)
    if kind == "deep":
        depth = draw(st.integers(min_value=50, max_value=50_000))
        return '{"key": "' + KEY + '", "response": ' + "[" * depth + "]" * depth + "}"
    return draw(st.text(max_size=80))


def _whole(count: Any) -> bool:
    return type(count) is int and count >= 0 and math.isfinite(count)


@FUZZ
@given(text=entries())
@example(
    text=json.dumps(
        {
            "key": KEY,
            "response": {
                "message": {"role": "assistant", "content": "ok"},
                "finish_reason": "stop",
                "input_tokens": 1,
                "output_tokens": 2,
            },
        }
    )
)
def test_a_cache_entry_reads_as_a_valid_answer_or_as_none(text: str) -> None:
    response = read_entry(text, KEY)
    if response is None:
        return
    assert isinstance(response.message.content, str) or response.message.content is None
    for count in (response.input_tokens, response.output_tokens, response.cache_read_tokens):
        assert _whole(count), count
    assert read_entry(text, "another-key") is None
