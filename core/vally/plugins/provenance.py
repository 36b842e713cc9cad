"""Where a plugin came from: :class:`Provenance`, and a loaded plugin's :class:`Registration`."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vally.plugins.groups import RegistryKind


@dataclass(frozen=True)
class Provenance:
    """Where a plugin came from, as recorded in a run's outputs.

    Attributes:
        kind: The plugin kind.
        name: The name it is registered under.
        source: ``entry-point`` (an installed distribution), ``module`` (a ``module:Attr``
            specifier or an importable module) or ``file`` (a ``.py`` file or a folder).
        target: ``module:attr`` of the class.
        distribution: The distribution that provides it, when there is one.
        version: That distribution's version.
        path: The plugin file's absolute path (``file`` plugins).
        sha256: The plugin file's sha256 (``file`` plugins).
        specifier: What the user typed to load it, when it was loaded by a specifier.
    """

    kind: str
    name: str
    source: str
    target: str
    distribution: str | None = None
    version: str | None = None
    path: str | None = None
    sha256: str | None = None
    specifier: str | None = None

    @classmethod
    def of_entry_point(
        cls, kind: RegistryKind, ep: importlib.metadata.EntryPoint, *, specifier: str | None = None
    ) -> Provenance:
        """The provenance of an installed entry point: its distribution and version."""
        dist, version = distribution_of(ep)
        return cls(
            kind=kind,
            name=ep.name,
            source="entry-point",
            target=ep.value,
            distribution=dist,
            version=version,
            specifier=specifier,
        )

    def as_dict(self) -> dict[str, str]:
        """The provenance without empty fields, JSON-ready."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    def label(self) -> str:
        """A short description: ``dist 1.2`` or ``path (sha256 0123abcd)`` or the target."""
        if self.distribution:
            return f"{self.distribution} {self.version or '?'}".strip()
        if self.path:
            return f"{self.path} (sha256 {(self.sha256 or '')[:12]})"
        return self.target


@dataclass(frozen=True)
class Registration:
    """A validated plugin and its provenance.

    Attributes:
        name: The name it resolves under.
        kind: Its kind.
        cls: The plugin class (for CLI command extensions: the ``register(app)`` function).
        provenance: Where it came from.
    """

    name: str
    kind: RegistryKind
    cls: Any
    provenance: Provenance


def distribution_of(ep: importlib.metadata.EntryPoint) -> tuple[str | None, str | None]:
    """``(name, version)`` of the distribution declaring ``ep``, or ``(None, None)``."""
    return (None, None) if ep.dist is None else _name_and_version(ep.dist)


@lru_cache(maxsize=64)  # by identity: the entry points of one distribution share its object
def _name_and_version(dist: importlib.metadata.Distribution) -> tuple[str, str]:
    meta = dist.metadata  # read and parsed once, not once per field and entry point
    return meta["Name"], meta["Version"]


def class_target(obj: Any) -> str:
    """``module:qualname`` of a class (what an entry point pointing at it would say)."""
    return f"{getattr(obj, '__module__', '?')}:{getattr(obj, '__qualname__', repr(obj))}"


def names_of(registrations: Iterable[Registration], kind: RegistryKind) -> list[str]:
    """The names of the registrations of one kind, in order, without duplicates."""
    out: list[str] = []
    for registration in registrations:
        if registration.kind == kind and registration.name not in out:
            out.append(registration.name)
    return out
