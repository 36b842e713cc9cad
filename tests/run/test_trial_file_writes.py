"""A trial's own files are written with plain system calls (no buffered file object), with
the bytes and the mode ``Path.write_bytes`` and ``Path.write_text`` give."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from vally.engine.trials.trial_files import write_file, write_text_file


def test_the_bytes_and_mode_are_those_of_write_bytes(tmp_path: Path) -> None:
    data = b'{\n  "runId": "x"\n}\n' * 10_000  # larger than one write may take
    write_file(tmp_path / "new.json", data)
    (tmp_path / "ref.json").write_bytes(data)
    assert (tmp_path / "new.json").read_bytes() == data
    mode = stat.S_IMODE((tmp_path / "new.json").stat().st_mode)
    assert mode == stat.S_IMODE((tmp_path / "ref.json").stat().st_mode)


def test_a_longer_file_there_is_truncated(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"a much longer old content\n")
    write_file(tmp_path / "f", b"new\n")
    assert (tmp_path / "f").read_bytes() == b"new\n"


def test_text_is_written_as_utf8_and_a_lone_surrogate_is_refused(tmp_path: Path) -> None:
    write_text_file(tmp_path / "t", "caf\u00e9 \u2713\n")
    assert (tmp_path / "t").read_bytes() == "caf\u00e9 \u2713\n".encode()
    with pytest.raises(UnicodeEncodeError):
        write_text_file(tmp_path / "u", "\ud800")


def test_a_missing_folder_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        write_file(tmp_path / "missing" / "f", b"x")


def test_an_eval_writes_its_trial_files_without_a_file_object(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening a trial's ``metadata.json`` or ``events.jsonl`` as a Python file object
    fails here; the eval still writes both, with their usual content."""
    import json

    from vally import EvalRequest, run_eval

    real_open = Path.open

    def refusing_open(self: Path, *args: object, **kwargs: object) -> object:
        if self.name in ("metadata.json", "events.jsonl"):
            raise AssertionError(f"{self.name} opened as a file object")
        return real_open(self, *args, **kwargs)  # type: ignore[arg-type]

    (tmp_path / "eval.yaml").write_text(
        "name: files\n"
        "defaults: {executor: {name: mock, config: {output: '{prompt}'}}}\n"
        "stimuli:\n"
        "  - {name: s, prompt: task,\n"
        "     graders: [{type: output-contains, config: {substring: task}}]}\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(Path, "open", refusing_open)
    result = run_eval(
        EvalRequest(
            eval_specs=[str(tmp_path / "eval.yaml")],
            output_dir=str(tmp_path / "out"),
            console=False,
        )
    )
    monkeypatch.undo()
    assert [r.status for r in result.records] == ["success"]
    (folder,) = (tmp_path / "out").glob("*/files-*/s-*/*/trial-0")
    metadata = (folder / "metadata.json").read_text(encoding="utf-8")
    assert metadata.startswith('{\n  "runId": ') and metadata.endswith("}\n")
    assert json.loads(metadata)["status"] == "success"
    events = (folder / "events.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["type"] for line in events] == [
        "user_message",
        "turn_start",
        "assistant_message",
        "turn_end",
    ]
