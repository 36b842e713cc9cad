"""The optional dependencies of the history tools, with a clear error when missing."""

from __future__ import annotations

import importlib
from types import ModuleType

from vally import ConfigError

EXTRA = "serve"
"""The extra that installs the store and server dependencies."""


def require(module: str, purpose: str) -> ModuleType:
    """Import ``module`` or raise an error naming the ``serve`` extra.

    Raises:
        ConfigError: The module is not installed.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        top = module.split(".")[0]
        if exc.name is None or exc.name.split(".")[0] != top:
            raise
        raise ConfigError(
            f"{purpose} needs the Python package {top!r}, which is not installed",
            hint=f"install the extra: pip install 'vally[{EXTRA}]' (in a clone of vally: "
            f"pip install -e '.[{EXTRA}]')",
        ) from exc
