"""Bad input to ``vally grade``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.badinput.conftest import vally


@pytest.fixture
def records(project: Path) -> str:
    """The results.jsonl text of a finished one-trial run."""
    result = vally("eval", "-e", "eval.yaml", "--output-dir", "runs", cwd=project)
    assert result.returncode == 0, result.stderr
    (run,) = (project / "runs").iterdir()
    return (run / "results.jsonl").read_text(encoding="utf-8")


def test_eval_spec_that_is_a_folder(project: Path, records: str) -> None:
    result = vally("grade", "-e", ".", cwd=project, stdin=records)
    assert result.returncode == 1
    assert "is a folder, not a file" in result.stderr


def test_unknown_stimulus_flag_is_an_error_not_ignored(project: Path, records: str) -> None:
    result = vally("grade", "-e", "eval.yaml", "--stimulus", "zzz", cwd=project, stdin=records)
    assert result.returncode == 1
    assert "--stimulus 'zzz' is not a stimulus of eval.yaml" in result.stderr
    assert "s1" in result.stderr


@pytest.mark.parametrize(
    ("stdin", "expected"),
    [("", "no trials on standard input"), ("not json\n", "line 1 is not valid JSON")],
)
def test_empty_or_non_json_stdin(project: Path, stdin: str, expected: str) -> None:
    result = vally("grade", "-e", "eval.yaml", cwd=project, stdin=stdin)
    assert result.returncode == 1
    assert expected in result.stderr


def test_standard_input_that_is_not_utf8_is_a_clear_error(project: Path) -> None:
    result = vally("grade", "-e", "eval.yaml", cwd=project, stdin=b'{"type": "caf\xe9"}\n')
    assert result.returncode == 1
    assert "standard input is not UTF-8 text (invalid continuation byte at byte 13)" in (
        result.stderr
    )


@pytest.mark.parametrize("before", [(1 << 16) - 1, (1 << 16) - 2, 5])
def test_the_byte_named_is_exact_across_the_chunks_read(before: int) -> None:
    # A two-byte character cut by the end of a chunk, its second byte invalid.
    import io

    from vally import ConfigError
    from vally_regrade.trial_input import _copy_utf8

    data = b"a" * before + b"\xc3\x28" + b"b" * 10
    with pytest.raises(ConfigError, match=f"at byte {before}\\)"):
        _copy_utf8(io.BytesIO(data), io.StringIO())
    text = io.StringIO()
    _copy_utf8(io.BytesIO(b"a" * before + "é".encode() + b"z"), text)
    assert text.getvalue() == "a" * before + "éz"
