"""What a plugin module's entry function receives to register its classes.

A plugin file, folder or module registers what it provides in one of two ways:

* ``register(registrar)`` receives a :class:`Registrar`, with one method per kind
  (``registrar.grader(MyGrader)``, ``registrar.executor(...)``, ...) and ``add(cls)``;
* ``register_graders(registry)``, ``register_executors(registry)``, ... (one function per
  kind, the naming of vally's JavaScript plugins) each receive a :class:`KindRegistrar`
  whose ``register(cls)`` registers a class of that kind.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from vally.errors import PluginValidationError
from vally.plugins.provenance import Provenance, Registration, class_target

if TYPE_CHECKING:
    from vally.contracts.metadata import PluginKind

T = TypeVar("T", bound=type)


class Registrar:
    """What a plugin module's ``register(registrar)`` receives: typed registration methods.

    Each method validates the class, registers it under its ``metadata.name`` with the
    provenance of the module that registered it, and returns the class unchanged (so the
    methods also work as decorators).

    Args:
        register: The callback that stores one class of one kind with provenance.
        provenance: A factory giving the provenance of a class registered by this registrar.
    """

    def __init__(
        self,
        register: Callable[[PluginKind, type, Provenance], Registration],
        provenance: Callable[[PluginKind, type], Provenance],
    ) -> None:
        self._register = register
        self._provenance = provenance
        self.registrations: list[Registration] = []

    def _add(self, kind: PluginKind, cls: T) -> T:
        registration = self._register(kind, cls, self._provenance(kind, cls))
        if registration not in self.registrations:
            self.registrations.append(registration)
        return cls

    def add(self, cls: T) -> T:
        """Register ``cls`` as the kind its ``metadata.kind`` declares."""
        from vally.contracts.metadata import PluginMetadata

        metadata = getattr(cls, "metadata", None)
        if not isinstance(metadata, PluginMetadata):
            raise PluginValidationError(
                f"{class_target(cls)} has no 'metadata' class attribute holding a "
                "vally PluginMetadata, so its kind is unknown",
                hint="declare metadata = PluginMetadata(name=..., kind=...)",
            )
        return self._add(metadata.kind, cls)

    def grader(self, cls: T) -> T:
        """Register a grader class."""
        return self._add("grader", cls)

    def executor(self, cls: T) -> T:
        """Register an executor class."""
        return self._add("executor", cls)

    def backend(self, cls: T) -> T:
        """Register a backend class."""
        return self._add("backend", cls)

    def reporter(self, cls: T) -> T:
        """Register a reporter class."""
        return self._add("reporter", cls)

    def eval_provider(self, cls: T) -> T:
        """Register an eval provider class."""
        return self._add("eval_provider", cls)

    def shard_strategy(self, cls: T) -> T:
        """Register a shard strategy class."""
        return self._add("shard_strategy", cls)

    def llm_provider(self, cls: T) -> T:
        """Register an LLM provider class."""
        return self._add("llm_provider", cls)

    def exporter(self, cls: T) -> T:
        """Register an exporter class."""
        return self._add("exporter", cls)

    def for_kind(self, kind: PluginKind) -> KindRegistrar:
        """A view with a single ``register(cls)`` method for one kind (what
        ``register_graders(registry)``-style functions receive)."""
        return KindRegistrar(self, kind)


class KindRegistrar:
    """What ``register_graders(registry)``-style functions receive: ``register(cls)``
    registers a class of one kind through a :class:`Registrar`."""

    def __init__(self, registrar: Registrar, kind: PluginKind) -> None:
        self.registrar = registrar
        self.kind: PluginKind = kind

    def register(self, cls: T) -> T:
        """Register ``cls`` as a plugin of this registrar's kind."""
        return self.registrar._add(self.kind, cls)
