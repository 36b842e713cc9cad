"""Tests of the example plugin, written only against vally's public API and vally.testing."""

from __future__ import annotations

import pytest
from vally_word_count_grader import WordCountGrader, count_words

from vally import ConfigError
from vally.plugins.session import Session
from vally.testing import grade, make_trajectory


def test_counts_whitespace_separated_words() -> None:
    assert count_words("  one two\nthree\tfour ") == 4
    assert count_words("") == 0


def test_passes_within_bounds() -> None:
    result = grade(
        WordCountGrader, make_trajectory("the answer is 42"), {"min_words": 2, "max_words": 5}
    )
    assert result.passed
    assert result.score == 1.0
    assert result.type == WordCountGrader.metadata.name
    assert result.metadata["words"] == 4
    assert "4 words" in result.evidence


def test_too_short_fails_with_partial_score() -> None:
    result = grade(WordCountGrader, make_trajectory("one two"), {"min_words": 4})
    assert not result.passed
    assert result.score == pytest.approx(0.5)


def test_too_long_fails() -> None:
    result = grade(WordCountGrader, make_trajectory("a b c d e f"), {"max_words": 3})
    assert not result.passed
    assert result.score == pytest.approx(0.0)


def test_bad_config_is_a_config_error_naming_the_field() -> None:
    with pytest.raises(ConfigError, match="min_words"):
        grade(WordCountGrader, make_trajectory("x"), {"min_words": "many"})
    with pytest.raises(ConfigError, match="max_wordz"):
        grade(WordCountGrader, make_trajectory("x"), {"max_wordz": 3})
    with pytest.raises(ConfigError, match="greater than"):
        grade(WordCountGrader, make_trajectory("x"), {"min_words": 5, "max_words": 2})


def test_installed_entry_point_resolves_to_this_class() -> None:
    name = WordCountGrader.metadata.name
    session = Session(environ={})
    assert name in session.known_names("grader")
    assert session.plugin_class("grader", name) is WordCountGrader
    (record,) = [p for p in session.provenance() if p["name"] == name]
    assert record["distribution"] == "vally-word-count-grader"
