"""The plugin session: registries, loader, pluggy manager and event emitter of one run.

Nothing here is global: each command (and each test) builds its own :class:`Session`, so
plugins loaded by one never leak into another.

Typical use::

    session = Session(project, project_root)
    session.load_plugins("grader", ["./my_grader.py"], base_dir=spec_dir)
    grader = session.create("grader", "word-count", {"min_words": 3}, where="eval.yaml")
    session.register_observer(session.create("reporter", "jsonl"), "jsonl")
    session.emitter.emit("vally_run_start", run=run_info)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast, overload

from vally.errors import ConfigError, PluginError, PluginLoadError, VallyError
from vally.plugins.groups import ENTRY_POINT_GROUPS, REGISTRY_GROUPS, kind_label
from vally.plugins.provenance import Provenance, Registration, class_target, names_of
from vally.plugins.registrar import Registrar
from vally.plugins.registry import InstalledEntryPoints, Registry
from vally.plugins.settings import PluginSettings
from vally.plugins.validation import describe

if TYPE_CHECKING:
    import pluggy

    from vally.contracts.events import EventEmitter
    from vally.contracts.llm import LLMProvider
    from vally.contracts.metadata import PluginKind
    from vally.contracts.protocols import (
        Backend,
        EvalProvider,
        Executor,
        Exporter,
        Grader,
        Runner,
        ShardStrategy,
    )
    from vally.models.project import ProjectConfig
    from vally.plugins.groups import RegistryKind
    from vally.plugins.loader import PluginLoader

log = logging.getLogger("vally.plugins")

KINDS: tuple[PluginKind, ...] = tuple(ENTRY_POINT_GROUPS)
"""Every run plugin kind, in display order."""

LISTED_KINDS: tuple[RegistryKind, ...] = tuple(REGISTRY_GROUPS)
"""Every kind the registry serves, in the order ``vally plugins list`` shows them."""

AUTOLOADED_PROJECT_KINDS: frozenset[PluginKind] = frozenset(KINDS) - {"eval_provider"}
"""Kinds whose ``.vally.yaml`` ``plugins:`` list loads on first use of the kind."""

RawConfig = Mapping[str, Any] | None
"""A plugin's ``config:`` as written (or None), before its ``Config`` validates it."""


@dataclass(frozen=True)
class PluginInfo:
    """One row of ``vally plugins list``.

    Attributes:
        name: The plugin name.
        kind: The plugin kind.
        source: ``distribution version``, a file path, or a ``module:attr``.
        version: The distribution version, when there is one.
        description: The metadata description (empty when loading failed).
        status: ``ok`` or ``error``.
        error: What went wrong, for ``error`` rows.
        target: The ``module:attr`` the plugin points at.
        capabilities: The capabilities its metadata declares (``needs-llm``,
            ``multi-turn``, ``needs-workspace``, ``critical``, ``pairwise``).
    """

    name: str
    kind: str
    source: str
    version: str | None
    description: str
    status: str
    error: str | None = None
    target: str = ""
    capabilities: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The row as a JSON-ready dict."""
        return asdict(self)


class Session:
    """Registries, plugin loading, and event delivery for one command invocation.

    Args:
        project: The project configuration; its ``plugins:`` lists are loaded lazily,
            the first time a kind is used (relative paths from ``project_root``), except
            ``plugins.eval_provider`` (see :meth:`load_project_plugins`).
        project_root: The folder holding ``.vally.yaml`` (default: the current folder).
        environ: Environment for the escape hatches (default: the process environment).
    """

    def __init__(
        self,
        project: ProjectConfig | None = None,
        project_root: Path | None = None,
        *,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.project = project
        self.project_root = project_root if project_root is not None else Path.cwd()
        self.settings = PluginSettings.from_env(environ)
        installed = InstalledEntryPoints(self.settings)
        self.registries: dict[RegistryKind, Registry] = {
            kind: Registry(kind, self.settings, installed) for kind in LISTED_KINDS
        }
        self._loader: PluginLoader | None = None
        self._plugin_manager: pluggy.PluginManager | None = None
        self._emitter: EventEmitter | None = None
        self._created: list[Provenance] = []
        self._project_loaded: set[PluginKind] = set()
        self._project_names: dict[PluginKind, list[str]] = {}
        self._loading_project = False
        self.requested: list[tuple[PluginKind, str, Path]] = []
        """``(kind, specifier, base_dir)`` of every :meth:`load_plugins` call other than the
        project's own (``--grader-plugin``, ...), in order: a distributed run's workers
        load the same."""

    # ------------------------------------------------------------------ plumbing

    @property
    def loader(self) -> PluginLoader:
        """The specifier loader bound to this session's registries."""
        if self._loader is None:
            from vally.plugins.loader import PluginLoader

            self._loader = PluginLoader(self.registries)
        return self._loader

    @property
    def plugin_manager(self) -> pluggy.PluginManager:
        """The pluggy manager with vally's hookspecs; observers are registered into it."""
        if self._plugin_manager is None:
            from vally.contracts.events import new_plugin_manager

            self._plugin_manager = new_plugin_manager()
        return self._plugin_manager

    @property
    def emitter(self) -> EventEmitter:
        """Delivers run events to each registered observer separately."""
        if self._emitter is None:
            from vally.contracts.events import EventEmitter

            self._emitter = EventEmitter(self.plugin_manager)
        return self._emitter

    def registry(self, kind: PluginKind) -> Registry:
        """The registry of one kind."""
        self._check_kind(kind)
        self._load_project_plugins(kind)
        return self.registries[kind]

    def registrar(self, *, source: str = "test") -> Registrar:
        """A registrar that registers classes directly (for tests and embedding code)."""

        def provenance(kind: PluginKind, cls: type) -> Provenance:
            return Provenance(
                kind=kind,
                name=getattr(getattr(cls, "metadata", None), "name", "?"),
                source=source,
                target=class_target(cls),
            )

        return Registrar(
            lambda kind, cls, prov: self.registries[kind].register(cls, prov), provenance
        )

    @staticmethod
    def _check_kind(kind: str, kinds: tuple[str, ...] = KINDS) -> None:
        if kind not in kinds:
            raise ConfigError(f"unknown plugin kind {kind!r}; expected one of {', '.join(kinds)}")

    def _load_project_plugins(self, kind: RegistryKind) -> None:
        if kind in AUTOLOADED_PROJECT_KINDS:
            self.load_project_plugins(kind)

    def load_project_plugins(self, kind: PluginKind) -> list[str]:
        """Load ``.vally.yaml`` ``plugins.<kind>`` once (paths from ``project_root``) and
        return the names they provide (the same names on later calls).

        Called automatically the first time a kind other than ``eval_provider`` is used;
        ``eval_provider`` is left to the caller because ``--eval-plugin`` replaces it.
        """
        if kind in self._project_loaded:
            return list(self._project_names.get(kind, []))
        self._project_loaded.add(kind)
        if self.project is None:
            return []
        specifiers = list(getattr(self.project.plugins, kind, None) or [])
        if not specifiers:
            return []
        self._loading_project = True
        try:
            names = self.load_plugins(kind, specifiers, base_dir=self.project_root)
        finally:
            self._loading_project = False
        self._project_names[kind] = names
        return list(names)

    # ------------------------------------------------------------------ loading

    def load_plugins(
        self, kind: PluginKind, specifiers: Sequence[str], *, base_dir: Path
    ) -> list[str]:
        """Load plugin specifiers of one kind and return the names they provide.

        Each specifier must yield at least one plugin of ``kind``. A specifier given twice
        (or the same file reached twice) loads once; names are returned once, in order.

        Raises:
            PluginNotFoundError, PluginLoadError, PluginValidationError,
            PluginConflictError: Naming the specifier, with the cause chained.
        """
        self._check_kind(kind)
        self._load_project_plugins(kind)
        names: list[str] = []
        for specifier in specifiers:
            if not self._loading_project:
                self.requested.append((kind, specifier, base_dir))
            registrations = self.loader.load(kind, specifier, base_dir=base_dir)
            provided = names_of(registrations, kind)
            if not provided:
                other = sorted({kind_label(r.kind) for r in registrations})
                raise PluginLoadError(
                    f"plugin {specifier!r} registered no {kind_label(kind)} plugins"
                    + (f" (it registered: {', '.join(other)})" if other else ""),
                    hint=f"call registrar.{kind}(YourClass) in its register(registrar)",
                )
            names.extend(n for n in provided if n not in names)
        return names

    def resolve_single(self, kind: PluginKind, specifier: str, *, base_dir: Path) -> str:
        """Resolve a flag that selects one plugin (``--backend``, ``--eval-plugin``, ...).

        ``specifier`` is a name, or a distribution, module or path that registers exactly
        one plugin of ``kind``. Returns the plugin's name.

        Raises:
            PluginLoadError: The package or path registers more than one plugin of ``kind``.
            PluginError: As for :meth:`load_plugins`.
        """
        names = self.load_plugins(kind, [specifier], base_dir=base_dir)
        if len(names) != 1:
            raise PluginLoadError(
                f"{kind_label(kind)} plugin {specifier!r} provides {len(names)} "
                f"{kind_label(kind)}s ({', '.join(names)}); exactly one is needed here",
                hint="name one of them instead of the package or path",
            )
        return names[0]

    def plugin_class(self, kind: PluginKind, name: str) -> type:
        """The validated class of plugin ``name``; its metadata is readable without
        instantiating it.

        Raises:
            PluginNotFoundError, PluginLoadError, PluginValidationError, PluginConflictError
        """
        cls: type = self.registry(kind).get(name).cls
        return cls

    def registration(self, kind: PluginKind, name: str) -> Registration:
        """The class of plugin ``name`` with its provenance."""
        return self.registry(kind).get(name)

    @overload
    def create(
        self, kind: Literal["backend"], name: str, config: RawConfig = ..., *, where: str = ...
    ) -> Backend: ...

    @overload
    def create(
        self, kind: Literal["executor"], name: str, config: RawConfig = ..., *, where: str = ...
    ) -> Executor: ...

    @overload
    def create(
        self, kind: Literal["grader"], name: str, config: RawConfig = ..., *, where: str = ...
    ) -> Grader: ...

    @overload
    def create(
        self,
        kind: Literal["eval_provider"],
        name: str,
        config: RawConfig = ...,
        *,
        where: str = ...,
    ) -> EvalProvider: ...

    @overload
    def create(
        self,
        kind: Literal["shard_strategy"],
        name: str,
        config: RawConfig = ...,
        *,
        where: str = ...,
    ) -> ShardStrategy: ...

    @overload
    def create(
        self, kind: Literal["llm_provider"], name: str, config: RawConfig = ..., *, where: str = ...
    ) -> LLMProvider: ...

    @overload
    def create(
        self, kind: Literal["exporter"], name: str, config: RawConfig = ..., *, where: str = ...
    ) -> Exporter: ...

    @overload
    def create(
        self, kind: Literal["runner"], name: str, config: RawConfig = ..., *, where: str = ...
    ) -> Runner: ...

    @overload
    def create(
        self, kind: Literal["reporter"], name: str, config: RawConfig = ..., *, where: str = ...
    ) -> object: ...

    def create(
        self,
        kind: PluginKind,
        name: str,
        config: Mapping[str, Any] | None = None,
        *,
        where: str = "",
    ) -> object:
        """Validate ``config`` through the plugin's ``Config`` and construct the plugin.

        Args:
            kind: The plugin kind.
            name: The plugin name.
            config: The raw ``config:`` mapping (or an instance of the plugin's Config).
            where: Where the config was written (``eval.yaml: stimuli[0].graders[1]``), for
                error messages.

        Raises:
            ConfigError: The config does not validate; names the plugin, field and place.
            PluginLoadError: The constructor raised (cause chained).
        """
        registration = self.registration(kind, name)
        cls = registration.cls
        configured = self.project_plugin_config(kind, name)
        if configured and not _is_model(config):
            config = {**configured, **(config or {})}
            origin = f".vally.yaml plugin_config.{kind}.{name}"
            where = f"{where} and {origin}" if where else origin
        validated = validate_config(kind, name, cls, config, where=where)
        try:
            instance = cls(validated)
        except VallyError:
            raise
        except Exception as exc:
            raise PluginLoadError(
                f"{kind_label(kind)} {name!r} ({registration.provenance.label()}) failed to "
                f"start{_at(where)}: {type(exc).__name__}: {exc}"
            ) from exc
        if registration.provenance not in self._created:
            self._created.append(registration.provenance)
        return instance

    def project_plugin_config(self, kind: PluginKind, name: str) -> dict[str, Any]:
        """The ``.vally.yaml`` ``plugin_config`` of one plugin (empty when none)."""
        if self.project is None:
            return {}
        return dict(self.project.plugin_config.get(kind, {}).get(name, {}))

    # ------------------------------------------------------------------ listing

    def known_names(self, kind: PluginKind) -> set[str]:
        """Every name of ``kind`` that can be resolved, without importing any plugin."""
        return self.registry(kind).names()

    def list_plugins(
        self, kind: RegistryKind | None = None, *, warn: bool = True
    ) -> list[PluginInfo]:
        """Every installed or registered plugin (CLI command extensions included), imported
        to read its metadata.

        A plugin that fails to load becomes a row with ``status="error"`` and, when
        ``warn`` is true, a warning logged on ``vally.plugins``; this method never raises
        for a broken plugin.
        """
        kinds = [kind] if kind is not None else list(LISTED_KINDS)
        rows: list[PluginInfo] = []
        for k in kinds:
            self._check_kind(k, LISTED_KINDS)
            registry = self.registries[k]
            try:
                self._load_project_plugins(k)
            except PluginError as exc:
                log.warning("project plugins of kind %s failed to load: %s", k, exc.message)
            for name in sorted(registry.names()):
                rows.append(self._info(registry, name, warn=warn))
        return rows

    def _info(self, registry: Registry, name: str, *, warn: bool) -> PluginInfo:
        kind = registry.kind
        try:
            registration = registry.get(name)
        except PluginError as exc:
            if warn:
                log.warning("%s plugin %r is broken: %s", kind_label(kind), name, exc.message)
            source, version, target = "?", None, ""
            try:
                providers = registry.entry_points().get(name, [])
            except Exception:  # pragma: no cover - metadata itself unreadable
                providers = []
            if providers:
                labels = []
                for ep in providers:
                    dist = getattr(ep, "dist", None)
                    if dist is not None:
                        labels.append(f"{dist.metadata['Name']} {dist.version}")
                        version = dist.version
                source = ", ".join(labels) or "?"
                target = ", ".join(ep.value for ep in providers)
            return PluginInfo(
                name=name,
                kind=kind,
                source=source,
                version=version,
                description="",
                status="error",
                error=f"{exc.code}: {exc.message}",
                target=target,
            )
        from vally.plugins.capabilities import capability_names

        provenance = registration.provenance
        return PluginInfo(
            name=name,
            kind=kind,
            source=provenance.label(),
            version=provenance.version,
            description=describe(registration.cls),
            status="ok",
            target=provenance.target,
            capabilities=capability_names(registration.cls),
        )

    # ------------------------------------------------------------------ provenance

    def provenance(self) -> list[dict[str, str]]:
        """Every plugin loaded or created in this session, with where it came from."""
        seen: list[Provenance] = []
        for registry in self.registries.values():
            for registration in registry.loaded():
                if registration.provenance not in seen:
                    seen.append(registration.provenance)
        for provenance in self._created:
            if provenance not in seen:
                seen.append(provenance)
        return [p.as_dict() for p in seen]

    # ------------------------------------------------------------------ observers

    def register_observer(self, obj: object, name: str, *, critical: bool | None = None) -> None:
        """Register a selected observer (a reporter instance, ...) for run events.

        Args:
            obj: The observer; its methods marked with ``vally.hookimpl`` receive events.
            name: The name it is registered and reported under.
            critical: Whether its failures fail the run. Default: what its metadata
                declares (:func:`vally.plugins.capabilities.is_critical`); observers
                without metadata are not critical unless told so here.

        Raises:
            PluginValidationError: A hook method is misspelled or has unknown arguments.
        """
        import pluggy

        from vally.errors import PluginValidationError
        from vally.plugins.capabilities import is_critical

        if critical is None:
            critical = is_critical(obj)
        try:
            self.plugin_manager.register(obj, name=name)
            self.plugin_manager.check_pending()
        except (pluggy.PluginValidationError, ValueError) as exc:
            if self.plugin_manager.is_registered(obj):
                self.plugin_manager.unregister(obj)
            raise PluginValidationError(
                f"observer {name!r} ({type(obj).__name__}) cannot be registered: {exc}",
                hint="hook methods must be named and take arguments as in "
                "vally.contracts.hookspecs",
            ) from exc
        if critical:
            self.emitter.mark_critical(name)


def _at(where: str) -> str:
    return f" at {where}" if where else ""


def validate_config(
    kind: PluginKind,
    name: str,
    cls: type,
    config: Mapping[str, Any] | Any | None,
    *,
    where: str = "",
) -> Any:
    """Validate a raw config against ``cls.Config`` strictly (unknown keys are errors).

    Raises:
        ConfigError: Naming the plugin, the field path and ``where``.
    """
    from pydantic import BaseModel, ValidationError

    model = cast(type[BaseModel], cls.Config)  # type: ignore[attr-defined]
    if isinstance(config, model):
        return config
    raw: Any = {} if config is None else config
    label = f"{kind_label(kind)} {name!r}"
    if not isinstance(raw, Mapping):
        raise ConfigError(
            f"config of {label}{_at(where)} must be a mapping, got {type(raw).__name__}"
        )
    extra = model.model_config.get("extra")
    if extra not in ("forbid", "allow"):
        allowed: set[str] = set()
        for field_name, field in model.model_fields.items():
            allowed.add(field_name)
            if isinstance(field.alias, str):
                allowed.add(field.alias)
            if isinstance(field.validation_alias, str):
                allowed.add(field.validation_alias)
        unknown = sorted(str(k) for k in raw if str(k) not in allowed)
        if unknown:
            raise ConfigError(
                f"invalid config for {label}{_at(where)}: unknown key(s) {', '.join(unknown)}",
                hint=f"allowed keys: {', '.join(sorted(model.model_fields)) or '(none)'}",
            )
    try:
        return model.model_validate(dict(raw))
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            field_path = ".".join(str(p) for p in error.get("loc", ())) or "(config)"
            problems.append(f"{field_path}: {error.get('msg', 'invalid')}")
        raise ConfigError(
            f"invalid config for {label}{_at(where)}: " + "; ".join(problems),
            hint=f"allowed keys: {', '.join(sorted(model.model_fields)) or '(none)'}",
        ) from exc


def _is_model(value: Any) -> bool:
    from pydantic import BaseModel

    return isinstance(value, BaseModel)
