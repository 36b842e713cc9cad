"""The runs of an experiment folder: its variant folders and which one is the baseline,
read from the records' ``experiment`` blocks (used by ``vally compare EXPERIMENT_DIR``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from vally import ConfigError


def _variant_folder_paths(directory: Path) -> dict[str, Path]:
    """Every variant folder (one holding ``results.jsonl``) of an experiment folder.

    Raises:
        ConfigError: ``directory`` is not a folder, or holds no variant results.
    """
    if not directory.is_dir():
        problem = "is a file, not a directory" if directory.exists() else "does not exist"
        raise ConfigError(
            f"experiment directory {directory} {problem}",
            hint="pass the timestamped folder written by 'vally experiment run' (or a merged "
            "one); to compare two results files use --baseline and --treatment",
        )
    runs = {
        child.name: child
        for child in sorted(directory.iterdir())
        if child.is_dir() and (child / "results.jsonl").is_file()
    }
    if not runs:
        hint = "pass the timestamped experiment run directory (or a merged one)"
        if (directory / "results.jsonl").is_file():
            hint = (
                f"{directory} looks like a 'vally eval' run directory (it holds "
                "results.jsonl); compare two eval runs with --baseline <run-dir> "
                "--treatment <run-dir>"
            )
        raise ConfigError(f"no variant folders with results.jsonl in {directory}", hint=hint)
    return runs


def _baseline_folder(
    directory: Path,
    baseline_variant: str | None,
    recorded: set[str],
    variant_names: dict[str, str],
    folders: Mapping[str, object],
) -> str:
    """The folder of the baseline variant: ``--baseline-variant``, else the one baseline
    the records name.

    Raises:
        ConfigError: No single recorded baseline, or a baseline without a folder.
    """
    baseline = baseline_variant
    if baseline is None:
        if len(recorded) != 1:
            raise ConfigError(
                f"cannot tell the baseline variant of {directory} from its records",
                hint="pass --baseline-variant NAME",
            )
        baseline = next(iter(recorded))
    folder = variant_names.get(baseline, baseline)
    if folder not in folders:
        raise ConfigError(
            f"baseline variant {baseline!r} has no results in {directory}",
            hint="variants found: " + ", ".join(sorted(folders)),
        )
    return folder


def _experiment_blocks(file: Path) -> Iterator[dict[str, Any] | None]:
    """Each trial record's ``experiment`` object (None without one), read line by line
    without validating the records (the comparison validates the ones it judges)."""
    from vally import iter_raw_json_lines, reading_results

    with reading_results(file) as handle:
        for _number, _line, data in iter_raw_json_lines(handle, str(file)):
            if isinstance(data, dict) and data.get("type") == "trial-result":
                block = data.get("experiment")
                yield block if isinstance(block, dict) else None


def experiment_sources(
    directory: Path, baseline_variant: str | None
) -> tuple[str, dict[str, Path]]:
    """Every variant folder of an experiment output directory (baseline first) and the
    baseline's folder name, read from the records' ``experiment`` objects without holding
    the records (see :func:`load_experiment_runs`).

    Raises:
        ConfigError: No variant folders, no recorded baseline, or an unknown baseline.
    """
    from vally import results_file

    folders = _variant_folder_paths(directory)
    recorded: set[str] = set()
    variant_names: dict[str, str] = {}
    for name, path in folders.items():
        for block in _experiment_blocks(results_file(path)):
            if block is None:
                continue
            if block.get("baseline"):
                recorded.add(str(block["baseline"]))
            variant_names[str(block.get("variant"))] = name
    base = _baseline_folder(directory, baseline_variant, recorded, variant_names, folders)
    return base, {base: folders[base], **{k: v for k, v in folders.items() if k != base}}
