"""Trial folders made with one ``mkdir`` per missing level.

``Path.mkdir(parents=True)`` first tries the trial folder itself, and when its parents are
missing (the first trial of a stimulus: ``<eval>/<stimulus>/<model>/trial-<n>``) fails and
climbs: five calls, two of them failing, for the three folders a new stimulus needs. The
:class:`FolderMaker` remembers the folders it made (a bounded number of them), so it makes
each missing level once, from the top, and the trial folder with one call.
"""

from __future__ import annotations

import os
from pathlib import Path

REMEMBERED = 1024
"""How many made folders a :class:`FolderMaker` remembers (the oldest are forgotten
first): the parents of the trials running at once and of those just finished (two a
trial). Forgetting one costs a failing ``mkdir`` when a later trial needs it again; a
remembered folder holds about 300 bytes, so the bound keeps a run of many stimuli from
holding one of each."""


class FolderMaker:
    """Makes folders below a root that exists, remembering the parents it made.

    Args:
        root: A folder that exists (the run folder); the walk up from a new folder stops
            there.
        remembered: How many made folders are remembered at most.
    """

    def __init__(self, root: Path, remembered: int = REMEMBERED) -> None:
        self._root = root
        self._limit = remembered
        self._made: dict[Path, None] = {}

    def make(self, folder: Path) -> None:
        """Make ``folder`` and its missing parents, like ``folder.mkdir(parents=True,
        exist_ok=True)``.

        Raises:
            OSError: A folder cannot be made, or a file is in the way.
        """
        try:
            self._make_parents(folder.parent)
            _mkdir(folder)
        except FileNotFoundError:
            # A remembered folder was removed meanwhile: forget them all, make the long way.
            self._made.clear()
            folder.mkdir(parents=True, exist_ok=True)

    def _make_parents(self, parent: Path) -> None:
        """Make ``parent`` and the folders above it that are not remembered, top down."""
        missing: list[Path] = []
        current = parent
        while current != self._root and current not in self._made:
            above = current.parent
            if above == current:  # past the file system's root: nothing was remembered
                break
            missing.append(current)
            current = above
        for folder in reversed(missing):
            _mkdir(folder)
            self._remember(folder)

    def _remember(self, folder: Path) -> None:
        made = self._made
        made[folder] = None
        if len(made) > self._limit:
            del made[next(iter(made))]


def _mkdir(folder: Path) -> None:
    """``os.mkdir`` that accepts a folder already there (not a file in its way)."""
    try:
        os.mkdir(folder)
    except FileExistsError:
        if not folder.is_dir():
            raise
