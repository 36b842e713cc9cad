"""Fixtures for the plugin-system tests: throwaway distributions on a fresh sys.path entry."""

from __future__ import annotations

import sys
import textwrap
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from kernel_helpers import MakeDist


@pytest.fixture
def unique() -> str:
    """A suffix that makes module names unique to one test."""
    return uuid.uuid4().hex[:8]


@pytest.fixture(autouse=True)
def _forget_new_modules() -> Iterator[None]:
    """Drop modules imported by a test so that the next test imports its own."""
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.startswith(("vally_t_", "vally._plugins")):
            sys.modules.pop(name, None)


@pytest.fixture
def make_dist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> MakeDist:
    """Create an installed-looking distribution: ``<name>-<version>.dist-info`` with
    ``METADATA`` and ``entry_points.txt``, plus module files, in a new folder put first on
    ``sys.path``. Returns that folder."""

    def make(
        name: str,
        version: str = "1.0",
        *,
        entry_points: Mapping[str, Mapping[str, str]] | None = None,
        modules: Mapping[str, str] | None = None,
    ) -> Path:
        root = tmp_path / f"site-{name}-{uuid.uuid4().hex[:6]}"
        root.mkdir()
        info = root / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8"
        )
        lines: list[str] = []
        for group, eps in (entry_points or {}).items():
            lines.append(f"[{group}]")
            lines.extend(f"{ep} = {target}" for ep, target in eps.items())
            lines.append("")
        (info / "entry_points.txt").write_text("\n".join(lines), encoding="utf-8")
        for relative, source in (modules or {}).items():
            path = root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(source), encoding="utf-8")
        record = [*(modules or {}), f"{info.name}/METADATA", f"{info.name}/entry_points.txt"]
        (info / "RECORD").write_text("".join(f"{r},,\n" for r in record), encoding="utf-8")
        monkeypatch.syspath_prepend(str(root))
        return root

    return make
