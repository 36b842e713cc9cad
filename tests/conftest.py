"""Fixtures shared by every test folder. Keep this file small."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _plugin_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run every test without the plugin escape hatches of the caller's environment.

    Entry points are read from the packaging metadata on ``sys.path`` each time a session
    is built, so distributions a test adds (``monkeypatch.syspath_prepend``) are seen
    without clearing any cache.
    """
    for name in ("VALLY_BLOCK_PLUGINS", "VALLY_ONLY_DISTRIBUTIONS"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def _own_cache(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Give every test (and the ``vally`` processes it starts) a judge cache of its own, so
    no test answers from another test's judge verdicts or from the user's cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
