"""Trial folders are made with one ``mkdir`` per missing level, none failing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vally.engine.trials import trial_dirs
from vally.engine.trials.trial_dirs import FolderMaker


def _counting_mkdir(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """Count every ``os.mkdir`` the folder maker makes: (path, whether it failed)."""
    calls: list[tuple[str, bool]] = []
    real = os.mkdir

    def mkdir(path: os.PathLike[str] | str, mode: int = 0o777) -> None:
        try:
            real(path, mode)
        except OSError:
            calls.append((str(path), True))
            raise
        calls.append((str(path), False))

    monkeypatch.setattr(trial_dirs.os, "mkdir", mkdir)
    return calls


def test_a_new_stimulus_takes_one_mkdir_per_level(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counting_mkdir(monkeypatch)
    maker = FolderMaker(tmp_path)
    maker.make(tmp_path / "ev" / "s1" / "m" / "trial-0")
    maker.make(tmp_path / "ev" / "s2" / "m" / "trial-0")
    maker.make(tmp_path / "ev" / "s2" / "m" / "trial-1")
    assert (tmp_path / "ev" / "s2" / "m" / "trial-1").is_dir()
    assert [failed for _, failed in calls] == [False] * 8  # 4, then 3, then 1
    assert [Path(p).relative_to(tmp_path).as_posix() for p, _ in calls] == [
        "ev",
        "ev/s1",
        "ev/s1/m",
        "ev/s1/m/trial-0",
        "ev/s2",
        "ev/s2/m",
        "ev/s2/m/trial-0",
        "ev/s2/m/trial-1",
    ]


def test_folders_already_there_are_fine_and_a_file_in_the_way_is_not(tmp_path: Path) -> None:
    (tmp_path / "ev" / "s1" / "m" / "trial-0").mkdir(parents=True)
    maker = FolderMaker(tmp_path)
    maker.make(tmp_path / "ev" / "s1" / "m" / "trial-0")
    (tmp_path / "ev" / "s1" / "m" / "trial-1").write_text("x")
    with pytest.raises(FileExistsError):
        maker.make(tmp_path / "ev" / "s1" / "m" / "trial-1")


def test_a_remembered_folder_removed_meanwhile_is_made_again(tmp_path: Path) -> None:
    maker = FolderMaker(tmp_path)
    maker.make(tmp_path / "ev" / "s1" / "m" / "trial-0")
    (tmp_path / "ev" / "s1" / "m" / "trial-0").rmdir()
    (tmp_path / "ev" / "s1" / "m").rmdir()
    maker.make(tmp_path / "ev" / "s1" / "m" / "trial-1")
    assert (tmp_path / "ev" / "s1" / "m" / "trial-1").is_dir()


def test_it_remembers_a_bounded_number_of_folders(tmp_path: Path) -> None:
    maker = FolderMaker(tmp_path, remembered=4)
    for index in range(10):
        maker.make(tmp_path / "ev" / f"s{index}" / "trial-0")
    assert len(maker._made) == 4
    assert all((tmp_path / "ev" / f"s{index}" / "trial-0").is_dir() for index in range(10))


def test_an_eval_makes_its_trial_folders_without_a_failing_mkdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three stimuli of two runs each: no ``mkdir`` below the eval's folder fails
    (``Path.mkdir(parents=True)`` failed twice for each new stimulus), and every trial
    folder is there."""
    from vally import EvalRequest, run_eval

    failed: list[str] = []
    real = os.mkdir

    def mkdir(path: os.PathLike[str] | str, mode: int = 0o777, **kwargs: object) -> None:
        try:
            real(path, mode, **kwargs)  # type: ignore[arg-type]
        except OSError:
            failed.append(str(path))
            raise

    (tmp_path / "eval.yaml").write_text(
        "name: dirs\n"
        "defaults: {runs: 2, executor: {name: mock, config: {output: '{prompt}'}}}\n"
        "stimuli:\n"
        + "".join(
            f"  - {{name: s{i}, prompt: 'task {i}', "
            "graders: [{type: output-contains, config: {substring: task}}]}\n"
            for i in range(3)
        ),
        encoding="utf-8",
    )
    monkeypatch.setattr(os, "mkdir", mkdir)
    result = run_eval(
        EvalRequest(
            eval_specs=[str(tmp_path / "eval.yaml")],
            output_dir=str(tmp_path / "out"),
            console=False,
        )
    )
    assert len(result.records) == 6
    assert all(r.status == "success" for r in result.records)
    assert len(list((tmp_path / "out").glob("*/dirs-*/s*/*/trial-*/metadata.json"))) == 6
    assert [path for path in failed if "/dirs-" in path] == []
