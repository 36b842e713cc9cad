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
