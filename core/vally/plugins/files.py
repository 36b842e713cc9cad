"""Importing plugin files and folders: unique synthetic module names, never ``sys.path``.

A ``.py`` file or a package folder (with ``__init__.py``) is imported as
``vally._plugins.<stem>_<8 hex of sha256(path)>``, so two files with one name never clash and
the folder is never added to ``sys.path``. Its source is parsed first, and a file without an
entry function is never run (:func:`vally.plugins.entry_functions.precheck_source`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import sys
import types
from pathlib import Path

from vally.errors import PluginLoadError
from vally.plugins.entry_functions import precheck_source

SYNTHETIC_PACKAGE = "vally._plugins"
"""The package under which file plugins are imported."""


def file_sha256(path: Path) -> str:
    """The sha256 of a file, or of a package folder's ``.py`` files (path and content)."""
    digest = hashlib.sha256()
    if path.is_dir():
        for file in sorted(path.rglob("*.py")):
            if "__pycache__" in file.parts:
                continue
            digest.update(file.relative_to(path).as_posix().encode())
            digest.update(b"\0")
            digest.update(file.read_bytes())
            digest.update(b"\0")
    else:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def synthetic_module_name(path: Path) -> str:
    """``vally._plugins.<stem>_<8 hex of sha256(path)>``: unique per resolved path."""
    stem = re.sub(r"\W", "_", path.stem if path.is_file() else path.name) or "plugin"
    if stem[0].isdigit():
        stem = "_" + stem
    tag = hashlib.sha256(str(path).encode()).hexdigest()[:8]
    return f"{SYNTHETIC_PACKAGE}.{stem}_{tag}"


def _ensure_synthetic_package() -> None:
    if SYNTHETIC_PACKAGE not in sys.modules:
        package = types.ModuleType(SYNTHETIC_PACKAGE, "File plugins loaded by vally.")
        package.__path__ = []
        sys.modules[SYNTHETIC_PACKAGE] = package


def import_plugin_file(path: Path, *, package: bool, specifier: str) -> types.ModuleType:
    """Import the resolved ``path`` (a ``.py`` file, or a package folder when ``package``).

    The module is in ``sys.modules`` while it runs (dataclasses and pickling need that) and
    is removed again, with its submodules, when running it fails.

    Raises:
        PluginLoadError: The source has no entry function or cannot be parsed, or running
            it raised (cause chained). The message names ``specifier`` and the file.
    """
    entry_file = path / "__init__.py" if package else path
    precheck_source(entry_file, specifier)
    module_name = synthetic_module_name(path)
    _ensure_synthetic_package()
    import_spec = importlib.util.spec_from_file_location(
        module_name,
        entry_file,
        submodule_search_locations=[str(path)] if package else None,
    )
    if import_spec is None or import_spec.loader is None:  # pragma: no cover - defensive
        raise PluginLoadError(f"plugin {specifier!r}: cannot import {entry_file}")
    module = importlib.util.module_from_spec(import_spec)
    sys.modules[module_name] = module
    try:
        import_spec.loader.exec_module(module)
    except BaseException as exc:
        for name in [n for n in sys.modules if n == module_name or n.startswith(module_name + ".")]:
            del sys.modules[name]
        if not isinstance(exc, Exception):
            raise
        raise PluginLoadError(
            f"plugin {specifier!r}: importing {entry_file} failed: {type(exc).__name__}: {exc}",
            hint="run the file with python to see the full error",
        ) from exc
    return module
