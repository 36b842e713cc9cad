"""Named lookup of plugin classes: one :class:`Registry` per plugin kind.

A registry resolves a name from two sources, in this order:

1. **explicit registrations**: classes registered through a :class:`Registrar` by a plugin
   file, a ``module:Attr`` specifier or a test;
2. **entry points** of the kind's group (see :mod:`vally.plugins.groups`), loaded lazily by name
   through stevedore, so that only the plugin asked for is imported.

Two providers of one name (two distributions, or a file and a distribution) are a
:class:`~vally.errors.PluginConflictError` naming both; the same class registered twice counts
once. Every class is checked against its kind's contract when it is first loaded: a
``metadata`` of the right kind whose name is the name it was found under, a ``judge_pair``
method when a grader declares ``pairwise``, and a ``Config`` that is a pydantic model.

Environment escape hatches, read when a registry is built:

* ``VALLY_BLOCK_PLUGINS=a,b``: these names are never resolved, whatever provides them;
* ``VALLY_ONLY_DISTRIBUTIONS=vally,...``: entry points of other distributions are ignored.
"""

from __future__ import annotations

import difflib
import importlib.metadata
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from vally.contracts.metadata import PluginKind
from vally.errors import (
    PluginConflictError,
    PluginLoadError,
    PluginNotFoundError,
    PluginValidationError,
)
from vally.plugins.groups import ENTRY_POINT_GROUPS

T = TypeVar("T", bound=type)

BLOCK_ENV = "VALLY_BLOCK_PLUGINS"
ONLY_DISTRIBUTIONS_ENV = "VALLY_ONLY_DISTRIBUTIONS"

KIND_LABELS: dict[PluginKind, str] = {
    "backend": "backend",
    "executor": "executor",
    "grader": "grader",
    "reporter": "reporter",
    "eval_provider": "eval provider",
    "shard_strategy": "shard strategy",
    "llm_provider": "LLM provider",
    "exporter": "exporter",
}
"""Human-readable kind names for messages."""


def kind_label(kind: PluginKind) -> str:
    """``eval_provider`` -> ``eval provider``: the kind as users read it."""
    return KIND_LABELS.get(kind, kind)


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


@dataclass(frozen=True)
class Provenance:
    """Where a plugin class came from, as recorded in a run's outputs.

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

    def same_origin(self, other: Provenance) -> bool:
        """True when both describe the same class from the same source."""
        return (self.target, self.path, self.distribution) == (
            other.target,
            other.path,
            other.distribution,
        )


@dataclass(frozen=True)
class Registration:
    """A validated plugin class and its provenance."""

    name: str
    kind: PluginKind
    cls: type
    provenance: Provenance


def class_target(obj: Any) -> str:
    """``module:qualname`` of a class (what an entry point pointing at it would say)."""
    return f"{getattr(obj, '__module__', '?')}:{getattr(obj, '__qualname__', repr(obj))}"


def validate_plugin_class(
    kind: PluginKind, obj: Any, *, expected_name: str | None, specifier: str
) -> str:
    """Check that ``obj`` satisfies the contract of ``kind`` and return its name.

    Args:
        kind: The kind it must be.
        obj: The loaded object (should be a class).
        expected_name: The name it was found under (entry-point name), or None when the
            class names itself (registrar).
        specifier: What the user gave, for the message.

    Raises:
        PluginValidationError: Not a class, no ``metadata``, wrong kind, name mismatch,
            ``pairwise`` without ``judge_pair``, ``Config`` missing or not a pydantic model.
    """
    from pydantic import BaseModel

    from vally.contracts.metadata import GraderMetadata, PluginMetadata

    label = kind_label(kind)
    where = f"{label} plugin {specifier!r} ({class_target(obj)})"
    if not isinstance(obj, type):
        raise PluginValidationError(
            f"{where} is a {type(obj).__name__}, not a class",
            hint=f"point the specifier at the {label} class itself",
        )
    metadata = getattr(obj, "metadata", None)
    if not isinstance(metadata, PluginMetadata):
        raise PluginValidationError(
            f"{where} has no 'metadata' class attribute holding a vally PluginMetadata",
            hint="declare e.g. metadata = GraderMetadata(name='my-grader', description='...')",
        )
    if metadata.kind != kind:
        raise PluginValidationError(
            f"{where} declares kind {metadata.kind!r} but was loaded as a {label}",
            hint=f"load it with the flag or group for {kind_label(metadata.kind)} plugins",
        )
    if kind == "grader" and not isinstance(metadata, GraderMetadata):
        raise PluginValidationError(
            f"{where}: a grader's metadata must be a GraderMetadata",
            hint="use vally.GraderMetadata(name=..., description=...)",
        )
    pairwise = isinstance(metadata, GraderMetadata) and metadata.pairwise
    if pairwise and not callable(getattr(obj, "judge_pair", None)):
        raise PluginValidationError(
            f"{where} declares pairwise=True but has no judge_pair method",
            hint="implement async judge_pair(self, context) -> PairwiseVerdict "
            "(see vally.PairwiseJudge), or drop pairwise=True",
        )
    if expected_name is not None and metadata.name != expected_name:
        raise PluginValidationError(
            f"{where} is registered as {expected_name!r} but its metadata.name is "
            f"{metadata.name!r}",
            hint="make the entry-point name and metadata.name identical",
        )
    config = getattr(obj, "Config", None)
    if not (isinstance(config, type) and issubclass(config, BaseModel)):
        raise PluginValidationError(
            f"{where}: 'Config' must be a pydantic BaseModel subclass, got {config!r}",
            hint="declare class Config(vally.StrictConfig): ... (or use vally.EmptyConfig)",
        )
    return metadata.name


def _dist_of(ep: importlib.metadata.EntryPoint) -> tuple[str | None, str | None]:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return None, None
    return dist.metadata["Name"], dist.version


def _provenance_of_ep(kind: PluginKind, ep: importlib.metadata.EntryPoint) -> Provenance:
    dist, version = _dist_of(ep)
    return Provenance(
        kind=kind,
        name=ep.name,
        source="entry-point",
        target=ep.value,
        distribution=dist,
        version=version,
    )


def load_entry_point(group: str, ep: importlib.metadata.EntryPoint) -> Any:
    """Import exactly one entry point through stevedore and return its target.

    Only entry points named ``ep.name`` are looked at; of those, the one whose target is
    ``ep.value`` is kept (other providers of the name were filtered out before).
    """
    from stevedore import DriverManager
    from stevedore.exception import NoMatches

    def on_failure(
        _manager: Any, failed: importlib.metadata.EntryPoint, exc: BaseException
    ) -> None:
        if failed.value == ep.value:
            raise exc

    def pick(_ns: str, _name: str, extensions: list[Any]) -> Any:
        for extension in extensions:
            if extension.entry_point.value == ep.value:
                return extension
        return extensions[0]

    try:
        manager: Any = DriverManager(
            namespace=group,
            name=ep.name,
            invoke_on_load=False,
            on_load_failure_callback=on_failure,
            on_missing_entrypoints_callback=None,
            conflict_resolver=pick,
        )
    except NoMatches:  # stevedore's cache does not know it yet: load it directly
        return ep.load()
    return manager.driver


class Registry:
    """The plugins of one kind: explicit registrations first, then entry points.

    Args:
        kind: The plugin kind this registry serves.
        settings: Block list and distribution filter.
    """

    def __init__(self, kind: PluginKind, settings: PluginSettings | None = None) -> None:
        self.kind: PluginKind = kind
        self.group = ENTRY_POINT_GROUPS[kind]
        self.settings = settings or PluginSettings()
        self._registered: dict[str, Registration] = {}
        self._loaded: dict[str, Registration] = {}
        self._entry_points: dict[str, list[importlib.metadata.EntryPoint]] | None = None

    # ------------------------------------------------------------------ entry points

    def entry_points(self) -> dict[str, list[importlib.metadata.EntryPoint]]:
        """Entry points of this kind's group by name, after the distribution filter.

        Reads packaging metadata only; nothing is imported. One name may have several
        providers (a conflict, reported when the name is used).
        """
        if self._entry_points is None:
            found: dict[str, list[importlib.metadata.EntryPoint]] = {}
            for ep in importlib.metadata.entry_points(group=self.group):
                dist, _ = _dist_of(ep)
                if not self.settings.allows_distribution(dist):
                    continue
                providers = found.setdefault(ep.name, [])
                if not any(_same_ep(ep, other) for other in providers):
                    providers.append(ep)
            self._entry_points = found
        return self._entry_points

    def entry_point(self, name: str) -> importlib.metadata.EntryPoint | None:
        """The one entry point providing ``name``, or None.

        ``dist-name/name`` picks the provider from one distribution.

        Raises:
            PluginConflictError: Several distributions provide the name.
        """
        dist_name, sep, short = name.rpartition("/")
        if sep:
            wanted = canonical_distribution_name(dist_name)
            for ep in self.entry_points().get(short, []):
                ep_dist, _ = _dist_of(ep)
                if ep_dist and canonical_distribution_name(ep_dist) == wanted:
                    return ep
            return None
        providers = self.entry_points().get(name, [])
        if len(providers) > 1:
            described = ", ".join(
                f"{_provenance_of_ep(self.kind, ep).label()} ({ep.value})" for ep in providers
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

    def registered(self) -> dict[str, Registration]:
        """The explicit registrations, by name."""
        return dict(self._registered)

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
        name = validate_plugin_class(self.kind, cls, expected_name=None, specifier=specifier)
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
                    f"{_provenance_of_ep(self.kind, ep).label()} ({ep.value})",
                    hint="give your plugin another metadata.name",
                )
        registration = Registration(name=name, kind=self.kind, cls=cls, provenance=provenance)
        self._registered[name] = registration
        return registration

    # ------------------------------------------------------------------ lookup

    def get(self, name: str, *, specifier: str | None = None) -> Registration:
        """Resolve ``name`` to a validated plugin class, importing only that plugin.

        Raises:
            PluginNotFoundError: No such name (with a did-you-mean suggestion), or blocked.
            PluginConflictError: Several distributions provide it.
            PluginLoadError: Its module failed to import (cause chained).
            PluginValidationError: The class breaks the kind's contract.
        """
        label = kind_label(self.kind)
        if name in self.settings.blocked or name.rpartition("/")[2] in self.settings.blocked:
            raise PluginNotFoundError(
                f"{label} {name!r} is blocked by {BLOCK_ENV}",
                hint=f"remove it from {BLOCK_ENV} to use it",
            )
        if name in self._registered:
            return self._registered[name]
        if name in self._loaded:
            return self._loaded[name]
        ep = self.entry_point(name)
        if ep is None:
            raise self.not_found(name)
        return self._load_entry_point(name, ep, specifier or name)

    def _load_entry_point(
        self, name: str, ep: importlib.metadata.EntryPoint, specifier: str
    ) -> Registration:
        label = kind_label(self.kind)
        provenance = _provenance_of_ep(self.kind, ep)
        provenance = Provenance(**{**provenance.as_dict(), "specifier": specifier})
        try:
            obj = load_entry_point(self.group, ep)
        except Exception as exc:
            raise PluginLoadError(
                f"could not load {label} {specifier!r} from {ep.value} ({provenance.label()}): "
                f"{type(exc).__name__}: {exc}",
                hint="check that the plugin and its dependencies are installed",
            ) from exc
        try:
            validate_plugin_class(self.kind, obj, expected_name=ep.name, specifier=specifier)
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

    def distribution_entry_points(self, distribution: str) -> list[importlib.metadata.EntryPoint]:
        """The entry points of this kind declared by one installed distribution."""
        dist = importlib.metadata.distribution(distribution)
        return [ep for ep in dist.entry_points if ep.group == self.group]

    def adopt_entry_point(
        self, ep: importlib.metadata.EntryPoint, *, specifier: str
    ) -> Registration:
        """Load one specific entry point of a distribution the user named explicitly.

        An explicitly named distribution is used even when ``VALLY_ONLY_DISTRIBUTIONS``
        leaves it out; conflicts with other providers are still reported.

        Raises:
            PluginNotFoundError: The name is blocked.
            PluginConflictError, PluginLoadError, PluginValidationError: As for :meth:`get`.
        """
        if ep.name in self.entry_points() or ep.name in self._registered:
            return self.get(ep.name, specifier=specifier)
        if ep.name in self.settings.blocked:
            return self.get(ep.name, specifier=specifier)
        if ep.name in self._loaded:
            return self._loaded[ep.name]
        return self._load_entry_point(ep.name, ep, specifier)


def _same_ep(a: importlib.metadata.EntryPoint, b: importlib.metadata.EntryPoint) -> bool:
    return (a.value, _dist_of(a)[0]) == (b.value, _dist_of(b)[0])


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
    """Registers classes of one kind through a :class:`Registrar`: ``register(cls)``."""

    def __init__(self, registrar: Registrar, kind: PluginKind) -> None:
        self.registrar = registrar
        self.kind: PluginKind = kind

    def register(self, cls: T) -> T:
        """Register ``cls`` as a plugin of this registrar's kind."""
        return self.registrar._add(self.kind, cls)


def names_of(registrations: Iterable[Registration], kind: PluginKind) -> list[str]:
    """The names of the registrations of one kind, in order, without duplicates."""
    out: list[str] = []
    for registration in registrations:
        if registration.kind == kind and registration.name not in out:
            out.append(registration.name)
    return out
