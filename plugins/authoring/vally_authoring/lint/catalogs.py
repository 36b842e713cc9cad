"""Where lint finds grader and executor classes: a :class:`GraderCatalog`, over a plain
mapping (:class:`MappingGraderCatalog`) or a plugin session (:class:`SessionGraderCatalog`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Literal, Protocol

from vally import ConfigError

if TYPE_CHECKING:
    from vally import Session


class GraderCatalog(Protocol):
    """Where lint finds grader classes (each has ``.metadata`` and ``.Config``)."""

    def known_names(self) -> Iterable[str]:
        """Every grader name that can be resolved."""

    def get(self, name: str) -> type:
        """The class of grader ``name``.

        Raises:
            VallyError: The grader cannot be loaded.
        """


class MappingGraderCatalog:
    """A catalog over a plain ``name -> class`` mapping (tests, embedding code)."""

    def __init__(self, graders: Mapping[str, type]) -> None:
        self._graders = dict(graders)

    def known_names(self) -> Iterable[str]:
        """The mapping's names."""
        return self._graders.keys()

    def get(self, name: str) -> type:
        """The class registered as ``name``."""
        try:
            return self._graders[name]
        except KeyError:
            raise ConfigError(f"unknown grader type '{name}'") from None


class SessionGraderCatalog:
    """A catalog over a plugin :class:`vally.Session` (entry points, loaded
    ``--grader-plugin`` specifiers and ``.vally.yaml`` plugins).

    Args:
        session: The session.
        kind: ``grader`` (default) or ``executor``.
    """

    def __init__(self, session: Session, kind: Literal["grader", "executor"] = "grader") -> None:
        self.session = session
        self.kind: Literal["grader", "executor"] = kind

    def known_names(self) -> Iterable[str]:
        """Every name of the kind the session can resolve."""
        return self.session.known_names(self.kind)

    def get(self, name: str) -> type:
        """The plugin class (imported on demand)."""
        return self.session.plugin_class(self.kind, name)

