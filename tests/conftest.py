"""Fixtures shared by every test folder. Keep this file small."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolated_plugin_discovery(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Make entry-point discovery see the current ``sys.path`` in every test.

    stevedore caches entry points in-process (per group) and on disk (under
    ``XDG_CACHE_HOME``); tests that add distributions with ``monkeypatch.syspath_prepend``
    would otherwise see a stale list. The disk cache goes to a temporary folder so that
    ``~/.cache`` is never touched.
    """
    from stevedore import _cache
    from stevedore.extension import ExtensionManager

    cache_dir: Path = tmp_path_factory.mktemp("xdg-cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_dir))
    shared = getattr(_cache, "_c", None)  # the module-level cache, built at import time
    if shared is not None:
        monkeypatch.setattr(shared, "_dir", str(cache_dir / "python-entrypoints"))
        monkeypatch.setattr(shared, "_internal", {})
    monkeypatch.setattr(ExtensionManager, "ENTRY_POINT_CACHE", {})
    for name in ("VALLY_BLOCK_PLUGINS", "VALLY_ONLY_DISTRIBUTIONS"):
        monkeypatch.delenv(name, raising=False)
    yield
