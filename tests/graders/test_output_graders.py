from __future__ import annotations

import pytest
from graders_support import context, run, say, trajectory
from pydantic import ValidationError

from vally_builtin.graders import compile_pattern
from vally_builtin.graders.output import (
    OutputContainsGrader,
    OutputMatchesGrader,
    OutputNotContainsGrader,
    OutputNotMatchesGrader,
)


def _ctx(kind: str, config: dict, output: str, **kw: object):
    return context(kind, config, traj=trajectory([say(output)]), **kw)  # type: ignore[arg-type]


def test_output_contains_pass_and_fail_evidence() -> None:
    ok = run(OutputContainsGrader, _ctx("output-contains", {"substring": "42"}, "The answer is 42"))
    assert ok.passed and ok.score == 1.0
    assert ok.evidence == "'42' found in output"
    assert ok.name == "output-contains" and ok.type == "output-contains"

    bad = run(
        OutputContainsGrader, _ctx("output-contains", {"substring": "43"}, "The answer is 42")
    )
    assert not bad.passed and bad.score == 0.0
    assert bad.evidence.startswith("'43' not found in output")


def test_output_contains_case_and_value_alias_and_name() -> None:
    ctx = _ctx("output-contains", {"substring": "HELLO"}, "hello world", name="greets")
    result = run(OutputContainsGrader, ctx)
    assert not result.passed and result.name == "greets"
    insensitive = {"value": "HELLO", "case_sensitive": False}
    assert run(OutputContainsGrader, _ctx("output-contains", insensitive, "hello world")).passed


def test_output_contains_config_is_strict() -> None:
    with pytest.raises(ValidationError):
        OutputContainsGrader.Config.model_validate({"substring": "x", "negate": True})
    with pytest.raises(ValidationError):
        OutputContainsGrader.Config.model_validate({})


def test_output_not_contains() -> None:
    ok = run(OutputNotContainsGrader, _ctx("output-not-contains", {"substring": "error"}, "done"))
    assert ok.passed and ok.evidence == "'error' not found in output"
    bad = run(OutputNotContainsGrader, _ctx("output-not-contains", {"substring": "do"}, "done"))
    assert not bad.passed and "'do' found in output" in bad.evidence


def test_output_matches_with_inline_and_config_flags() -> None:
    cfg = {"pattern": "(?i)^the ANSWER is \\d+$"}
    assert run(OutputMatchesGrader, _ctx("output-matches", cfg, "The answer is 42")).passed
    # A JS-flavoured inline flag that is not at the start still works.
    cfg2 = {"pattern": "answer(?i) IS"}
    assert run(OutputMatchesGrader, _ctx("output-matches", cfg2, "the answer is 4")).passed
    cfg3 = {"pattern": "ANSWER", "flags": "i"}
    assert run(OutputMatchesGrader, _ctx("output-matches", cfg3, "the answer")).passed
    bad = run(OutputMatchesGrader, _ctx("output-matches", {"pattern": "^\\d+$"}, "forty"))
    assert not bad.passed and "did not match output" in bad.evidence


def test_output_not_matches() -> None:
    ok = run(OutputNotMatchesGrader, _ctx("output-not-matches", {"pattern": "Traceback"}, "fine"))
    assert ok.passed
    bad = run(OutputNotMatchesGrader, _ctx("output-not-matches", {"pattern": "f.ne"}, "fine"))
    assert not bad.passed and "'fine'" in bad.evidence


def test_invalid_pattern_is_a_config_error() -> None:
    with pytest.raises(ValidationError, match="invalid regular expression"):
        OutputMatchesGrader.Config.model_validate({"pattern": "(unclosed"})
    with pytest.raises(ValidationError, match="unknown regex flag"):
        OutputMatchesGrader.Config.model_validate({"pattern": "a", "flags": "q"})


def test_compile_pattern_translates_named_groups() -> None:
    regex = compile_pattern(r"(?<word>\w+) \k<word>")
    assert regex.search("hello hello") is not None
    assert regex.search("hello world") is None
    # look-behinds are left alone
    assert compile_pattern(r"(?<=a)b").search("ab") is not None
