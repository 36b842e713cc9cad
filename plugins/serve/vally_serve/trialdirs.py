"""Finding a trial's folder in a run folder, and what the store keeps from it: the events
(when the record carries none) and the artifact files (names, sizes, small text contents).

The folder is looked up where the run engine writes it
(``[<variant>/]<eval>/<stimulus>/<model>/trial-<n>``); when it is not there (a layout that
names folders differently), the run folder's ``metadata.json`` files are indexed once by
their ``runId`` and ``trialId``.

The names of that layout (``vally.trial_relpath``, ``vally.EVENTS_FILE``, ...) are imported
where a trial folder is looked at: their module imports the record models, about a tenth of
a second of start-up that an ingest of results without trial folders does not need.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from vally import loads_bounded
from vally_serve.rows import OutcomeRow

MAX_EVENTS_BYTES = 16 * 1024 * 1024
"""A larger ``events.jsonl`` is not copied into the store."""
MAX_ARTIFACTS = 200
"""Artifacts listed per trial."""
MAX_TEXT_BYTES = 16 * 1024
"""Artifact files up to this size that are UTF-8 text are stored with their content."""
MAX_TEXT_TOTAL = 64 * 1024
"""Stored artifact text per trial."""


class TrialFolders:
    """The trial folders of one run folder."""

    def __init__(self, run_folder: Path) -> None:
        self.run_folder = run_folder
        self._index: dict[tuple[str, str], Path] | None = None
        try:
            with os.scandir(run_folder) as entries:
                self._has_folders = any(e.is_dir() for e in entries)
        except OSError:
            self._has_folders = False

    @property
    def has_folders(self) -> bool:
        """False when the run folder holds no folder at all (results without trial
        folders): no trial's folder is then looked up."""
        return self._has_folders

    def find(self, outcome: OutcomeRow) -> Path | None:
        """The folder of the trial ``outcome`` (a row of ``outcomes``), or None."""
        if not self._has_folders:  # results without trial folders: nothing to look up
            return None
        from vally import TrialKey, safe_name, trial_relpath

        variant = outcome.variant
        base = self.run_folder
        if variant and base.name == safe_name(variant):
            base = base.parent
        key = TrialKey(
            variant, outcome.eval_name, outcome.stimulus, outcome.model, outcome.trial_index
        )
        candidate = os.path.join(base, trial_relpath(key))
        if os.path.isdir(candidate):
            return Path(candidate)
        return self._indexed().get((outcome.run_id, outcome.trial_id))

    def _indexed(self) -> dict[tuple[str, str], Path]:
        if self._index is None:
            from vally import METADATA_FILE

            self._index = {}
            for folder, _dirs, files in os.walk(self.run_folder):
                if METADATA_FILE in files:
                    _dirs.clear()
                    meta = _read_json(Path(folder) / METADATA_FILE)
                    if isinstance(meta.get("runId"), str) and isinstance(meta.get("trialId"), str):
                        self._index[(meta["runId"], meta["trialId"])] = Path(folder)
        return self._index


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = loads_bounded(path.read_bytes())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def read_events(trial_dir: Path) -> str | None:
    """The trial's ``events.jsonl`` as a JSON array text (its object lines), or None."""
    from vally import EVENTS_FILE

    path = trial_dir / EVENTS_FILE
    try:
        if path.stat().st_size > MAX_EVENTS_BYTES:
            return None
        lines = path.read_bytes().splitlines()
    except OSError:
        return None
    events: list[Any] = []
    for line in lines:
        try:
            value = loads_bounded(line)
        except ValueError:
            continue  # a torn line of a killed executor, or one nested too deep
        if isinstance(value, dict):
            events.append(value)
    return json.dumps(events) if events else None


def list_artifacts(trial_dir: Path) -> str:
    """The trial's artifacts as a JSON array of ``{path, size, text}`` (``text`` is the
    content of small UTF-8 files, else null)."""
    from vally import ARTIFACTS_DIR

    root = trial_dir / ARTIFACTS_DIR
    if not root.is_dir():
        return "[]"
    items: list[dict[str, Any]] = []
    budget = MAX_TEXT_TOTAL
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        if len(items) >= MAX_ARTIFACTS:
            break
        size = path.stat().st_size
        text: str | None = None
        if size <= min(MAX_TEXT_BYTES, budget):
            try:
                text = path.read_bytes().decode("utf-8")
                budget -= size
            except (OSError, UnicodeDecodeError):
                text = None
        items.append({"path": path.relative_to(root).as_posix(), "size": size, "text": text})
    return json.dumps(items)
