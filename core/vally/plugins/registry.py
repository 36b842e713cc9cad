"""Named lookup of plugins: one :class:`Registry` per plugin kind.

A registry resolves a name from two sources, in this order:

1. **explicit registrations**: classes registered through a
   :class:`~vally.plugins.registrar.Registrar` by a plugin file, a ``module:Attr`` specifier
   or a test;
2. **entry points** of the kind's group (see :mod:`vally.plugins.groups`), read from the
   installed packaging metadata with :mod:`importlib.metadata`. Listing names imports
   nothing; resolving a name imports only the module of that name's entry point.

Two providers of one name (two distributions, or a file and a distribution) are a
:class:`~vally.errors.PluginConflictError` naming both; the same class registered twice counts
once. Every plugin is checked against its kind's contract (:mod:`vally.plugins.validation`)
when it is first loaded. Blocked names and the distribution filter
(:class:`~vally.plugins.settings.PluginSettings`) apply to every kind.
"""

from __future__ import annotations

import difflib
import importlib.metadata
from typing import TYPE_CHECKING, Any

from vally.errors import (
    PluginConflictError,
    PluginLoadError,
    PluginNotFoundError,
    PluginValidationError,
)
from vally.plugins.groups import REGISTRY_GROUPS, kind_label
from vally.plugins.provenance import Provenance, Registration, class_target, distribution_of
from vally.plugins.settings import (
    BLOCK_ENV,
    ONLY_DISTRIBUTIONS_ENV,
    PluginSettings,
    canonical_distribution_name,
)
from vally.plugins.validation import validate_plugin

if TYPE_CHECKING:
    from vally.plugins.groups import RegistryKind

EntryPoint = importlib.metadata.EntryPoint


class InstalledEntryPoints:
    """The installed entry points of every group of :data:`REGISTRY_GROUPS`, by name.

    Read once, on first use, from packaging metadata; nothing is imported. The registries of
    one session share one instance. Entry points of distributions the settings leave out are
    dropped; one name may keep several providers (a conflict, reported when it is used).

    Args:
        settings: The distribution filter.
    """

    def __init__(self, settings: PluginSettings) -> None:
        self.settings = settings
        self._groups: dict[str, dict[str, list[EntryPoint]]] | None = None

    def group(self, group: str) -> dict[str, list[EntryPoint]]:
        """Name -> providers of one group."""
        if self._groups is None:
            installed = importlib.metadata.entry_points()
            self._groups = {g: self._by_name(installed.select(group=g)) for g in self._wanted()}
        return self._groups.get(group, {})

    @staticmethod
    def _wanted() -> set[str]:
        return set(REGISTRY_GROUPS.values())

    def _by_name(self, entry_points: importlib.metadata.EntryPoints) -> dict[str, list[EntryPoint]]:
        found: dict[str, list[EntryPoint]] = {}
        filtered = self.settings.only_distributions is not None
        for ep in entry_points:
            if filtered and not self.settings.allows_distribution(distribution_of(ep)[0]):
                continue
            providers = found.setdefault(ep.name, [])
            if not any(_same_entry_point(ep, other) for other in providers):
                providers.append(ep)
        return found


def _same_entry_point(a: EntryPoint, b: EntryPoint) -> bool:
    return (a.value, distribution_of(a)[0]) == (b.value, distribution_of(b)[0])


class Registry:
    """The plugins of one kind: explicit registrations first, then entry points.

    Args:
        kind: The plugin kind this registry serves.
        settings: Block list and distribution filter.
        installed: The installed entry points, shared by the registries of one session
            (default: read for this registry alone).
    """

    def __init__(
        self,
        kind: RegistryKind,
        settings: PluginSettings | None = None,
        installed: InstalledEntryPoints | None = None,
    ) -> None:
        self.kind: RegistryKind = kind
        self.group = REGISTRY_GROUPS[kind]
        self.settings = settings or PluginSettings()
        self.installed = installed or InstalledEntryPoints(self.settings)
        self._registered: dict[str, Registration] = {}
        self._loaded: dict[str, Registration] = {}

    # ------------------------------------------------------------------ entry points

    def entry_points(self) -> dict[str, list[EntryPoint]]:
        """Entry points of this kind's group by name, after the distribution filter.

        Reads packaging metadata only; nothing is imported. One name may have several
        providers (a conflict, reported when the name is used).
        """
        return self.installed.group(self.group)

    def entry_point(self, name: str) -> EntryPoint | None:
        """The one entry point providing ``name``, or None.

        ``dist-name/name`` picks the provider from one distribution.

        Raises:
            PluginConflictError: Several distributions provide the name.
        """
        dist_name, sep, short = name.rpartition("/")
        if sep:
            wanted = canonical_distribution_name(dist_name)
            for ep in self.entry_points().get(short, []):
                ep_dist, _ = distribution_of(ep)
                if ep_dist and canonical_distribution_name(ep_dist) == wanted:
                    return ep
            return None
        providers = self.entry_points().get(name, [])
        if len(providers) > 1:
            described = ", ".join(
                f"{Provenance.of_entry_point(self.kind, ep).label()} ({ep.value})"
                for ep in providers
            )
            raise PluginConflictError(
                f"{kind_label(self.kind)} name {name!r} is provided by more than one "
                f"distribution in group {self.group}: {described}",
                hint="uninstall one of them, pick one with 'DISTRIBUTION/NAME', or limit "
                f"distributions with {ONLY_DISTRIBUTIONS_ENV}",
            )
        return providers[0] if providers else None

    # ------------------------------------------------------------------ names

    def names(self) -> set[str]:
        """Every resolvable name (registered and entry points), without importing anything."""
        names = set(self._registered) | set(self.entry_points())
        return {n for n in names if n not in self.settings.blocked}

    def loaded(self) -> list[Registration]:
        """Every registration this registry has imported or been given, in order."""
        seen = {**self._registered, **self._loaded}
        return list(seen.values())

    # ------------------------------------------------------------------ registration

    def register(self, cls: Any, provenance: Provenance) -> Registration:
        """Register ``cls`` explicitly under its ``metadata.name``.

        Raises:
            PluginValidationError: ``cls`` breaks the kind's contract.
            PluginConflictError: Another class or an installed distribution already
                provides the name.
        """
        specifier = provenance.specifier or provenance.path or provenance.target
        name = validate_plugin(self.kind, cls, expected_name=None, specifier=specifier)
        existing = self._registered.get(name)
        if existing is not None:
            if existing.cls is cls:
                return existing
            raise PluginConflictError(
                f"{kind_label(self.kind)} name {name!r} is registered twice: by "
                f"{existing.provenance.label()} ({existing.provenance.target}) and by "
                f"{provenance.label()} ({provenance.target})",
                hint="rename one of the plugins (metadata.name) or load only one of them",
            )
        for ep in self.entry_points().get(name, []):
            if ep.value != class_target(cls):
                raise PluginConflictError(
                    f"{kind_label(self.kind)} name {name!r} from {provenance.label()} "
                    f"clashes with the installed plugin from "
                    f"{Provenance.of_entry_point(self.kind, ep).label()} ({ep.value})",
                    hint="give your plugin another metadata.name",
                )
        registration = Registration(name=name, kind=self.kind, cls=cls, provenance=provenance)
        self._registered[name] = registration
        return registration

    # ------------------------------------------------------------------ lookup

    def get(self, name: str, *, specifier: str | None = None) -> Registration:
        """Resolve ``name`` to a validated plugin, importing only that plugin.

        Raises:
            PluginNotFoundError: No such name (with a did-you-mean suggestion), or blocked.
            PluginConflictError: Several distributions provide it.
            PluginLoadError: Its module failed to import (cause chained).
            PluginValidationError: The plugin breaks the kind's contract.
        """
        if self.settings.is_blocked(name):
            raise PluginNotFoundError(
                f"{kind_label(self.kind)} {name!r} is blocked by {BLOCK_ENV}",
                hint=f"remove it from {BLOCK_ENV} to use it",
            )
        found = self._registered.get(name) or self._loaded.get(name)
        if found is not None:
            return found
        ep = self.entry_point(name)
        if ep is None:
            raise self.not_found(name)
        return self._load_entry_point(name, ep, specifier or name)

    def _load_entry_point(self, name: str, ep: EntryPoint, specifier: str) -> Registration:
        provenance = Provenance.of_entry_point(self.kind, ep, specifier=specifier)
        try:
            obj = ep.load()
        except Exception as exc:
            raise PluginLoadError(
                f"could not load {kind_label(self.kind)} {specifier!r} from {ep.value} "
                f"({provenance.label()}): {type(exc).__name__}: {exc}",
                hint="check that the plugin and its dependencies are installed",
            ) from exc
        try:
            validate_plugin(self.kind, obj, expected_name=ep.name, specifier=specifier)
        except PluginValidationError as exc:
            raise PluginValidationError(
                f"{exc.message} [from {provenance.label()}]", hint=exc.hint
            ) from exc
        registration = Registration(name=name, kind=self.kind, cls=obj, provenance=provenance)
        self._loaded[name] = registration
        return registration

    def not_found(self, name: str) -> PluginNotFoundError:
        """The error for an unknown name, with close matches and the known names."""
        known = sorted(self.names())
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        label = kind_label(self.kind)
        message = f"unknown {label} {name!r}"
        if close:
            message += f"; did you mean {' or '.join(repr(c) for c in close)}?"
        plural = label[:-1] + "ies" if label.endswith("y") else label + "s"
        hint = (
            f"known {plural}: {', '.join(known)}" if known else f"no {label} plugins are installed"
        )
        hint += f". Install a distribution providing it (entry-point group {self.group}) or load "
        hint += "it with a plugin flag (a module:Attr, a .py file or a folder)"
        return PluginNotFoundError(message, hint=hint)

    def adopt_entry_point(self, ep: EntryPoint, *, specifier: str) -> Registration:
        """Load one specific entry point of a distribution the user named explicitly.

        An explicitly named distribution is used even when ``VALLY_ONLY_DISTRIBUTIONS``
        leaves it out; conflicts with other providers are still reported.

        Raises:
            PluginNotFoundError: The name is blocked.
            PluginConflictError, PluginLoadError, PluginValidationError: As for :meth:`get`.
        """
        if (
            ep.name in self.entry_points()
            or ep.name in self._registered
            or self.settings.is_blocked(ep.name)
        ):
            return self.get(ep.name, specifier=specifier)
        if ep.name in self._loaded:
            return self._loaded[ep.name]
        return self._load_entry_point(ep.name, ep, specifier)
