"""The environment escape hatches of plugin discovery, read once per session.

* ``VALLY_BLOCK_PLUGINS=a,b``: these names are never resolved, whatever provides them;
* ``VALLY_ONLY_DISTRIBUTIONS=vally,...``: entry points of other distributions are ignored.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

BLOCK_ENV = "VALLY_BLOCK_PLUGINS"
ONLY_DISTRIBUTIONS_ENV = "VALLY_ONLY_DISTRIBUTIONS"


def canonical_distribution_name(name: str) -> str:
    """The normalized form of a distribution name (PEP 503): lower case, ``-`` separators."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _env_set(name: str, environ: Mapping[str, str]) -> frozenset[str]:
    return frozenset(part.strip() for part in environ.get(name, "").split(",") if part.strip())


@dataclass(frozen=True)
class PluginSettings:
    """The environment escape hatches, read once per session.

    Attributes:
        blocked: Plugin names that are never resolved (``VALLY_BLOCK_PLUGINS``).
        only_distributions: When set, the only distributions whose entry points count
            (canonical names, ``VALLY_ONLY_DISTRIBUTIONS``).
    """

    blocked: frozenset[str] = frozenset()
    only_distributions: frozenset[str] | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> PluginSettings:
        """Read the settings from ``environ`` (default: the process environment)."""
        env = os.environ if environ is None else environ
        only = _env_set(ONLY_DISTRIBUTIONS_ENV, env)
        return cls(
            blocked=_env_set(BLOCK_ENV, env),
            only_distributions=(
                frozenset(canonical_distribution_name(d) for d in only) if only else None
            ),
        )

    def allows_distribution(self, name: str | None) -> bool:
        """True when entry points of distribution ``name`` may be used."""
        if self.only_distributions is None:
            return True
        return name is not None and canonical_distribution_name(name) in self.only_distributions

    def is_blocked(self, name: str) -> bool:
        """True when ``name`` (or the name part of ``DISTRIBUTION/NAME``) is blocked."""
        return name in self.blocked or name.rpartition("/")[2] in self.blocked
