"""Turn plugin specifiers into registrations.

A specifier (``--grader-plugin``, ``--backend``, ``.vally.yaml plugins.*``, ...) is one of,
tried in this order:

1. a name in the kind's entry-point group (``docker``, ``by-stimulus``), or
   ``DISTRIBUTION/NAME`` to pick one provider of a name;
2. an installed distribution name: that distribution's entry points of the kind are loaded;
3. ``package.module:Attr``: ``Attr`` is a plugin class, a module, or an entry function
   (``register`` or ``register_graders``-style); a bare importable ``package.module`` is
   accepted too (it must define an entry function);
4. a path to a ``.py`` file or a folder. A folder with ``__init__.py`` is one package plugin;
   any other folder means each ``*.py`` directly inside it (sorted, names starting with
   ``_`` skipped). Relative paths resolve against ``base_dir``.

A module loaded by path or by name registers what it provides through a top-level
``register(registrar)`` function or per-kind ``register_graders(registry)``-style functions
(see :mod:`vally.plugins.entry_functions`). Files are imported under a unique synthetic module
name (``vally._plugins.<stem>_<8 hex>``) and are never added to ``sys.path``. The same resolved
file, or the same module, loads once however often it is named.

Loading a file runs its code with your privileges: only load plugins you trust.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import re
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vally.errors import (
    PluginLoadError,
    PluginNotFoundError,
    PluginValidationError,
)
from vally.plugins.entry_functions import (
    KIND_ENTRY_FUNCTIONS,
    call_entry_function,
    check_entry_functions,
    run_entry_functions,
    source_defines_entry_function,
)
from vally.plugins.files import file_sha256, import_plugin_file
from vally.plugins.groups import kind_label
from vally.plugins.provenance import Provenance, Registration, class_target
from vally.plugins.registrar import Registrar

if TYPE_CHECKING:
    from vally.contracts.metadata import PluginKind
    from vally.plugins.groups import RegistryKind
    from vally.plugins.registry import Registry


@dataclass(frozen=True)
class LoadedModule:
    """A plugin module loaded by path or by name, and what it registered."""

    key: str
    module_name: str
    registrations: tuple[Registration, ...]
    path: str | None = None
    sha256: str | None = None


def looks_like_path(specifier: str) -> bool:
    """True when the specifier is written as a path (``./x``, ``/x``, ``a/b``, ``x.py``)."""
    return (
        specifier.startswith((".", "/", "~"))
        or "/" in specifier
        or "\\" in specifier
        or specifier.endswith(".py")
    )


def _is_dotted_name(text: str) -> bool:
    return all(part.isidentifier() for part in text.split("."))


class PluginLoader:
    """Resolves specifiers against the registries of one session.

    Args:
        registries: The session's registries, one per kind.
    """

    def __init__(self, registries: Mapping[RegistryKind, Registry]) -> None:
        self.registries = registries
        self.modules: dict[str, LoadedModule] = {}
        self._packages_distributions: Mapping[str, list[str]] | None = None

    # ------------------------------------------------------------------ entry

    def load(self, kind: PluginKind, specifier: str, *, base_dir: Path) -> list[Registration]:
        """Load what ``specifier`` names and return every registration it produced.

        Registrations of other kinds than ``kind`` are included (a file may register a
        grader and an executor); callers filter.

        Raises:
            PluginNotFoundError: Nothing matches the specifier.
            PluginLoadError: Importing or running the plugin failed (cause chained).
            PluginValidationError: A class breaks its kind's contract.
            PluginConflictError: A name is provided twice.
        """
        spec = specifier.strip()
        if not spec:
            raise PluginNotFoundError(f"empty {kind_label(kind)} plugin specifier")
        registry = self.registries[kind]
        path_like = looks_like_path(spec)
        candidate = self._candidate_path(spec, base_dir)
        # 1. a name in the kind's group (or DISTRIBUTION/NAME)
        if spec in registry.names() or spec in registry.settings.blocked:
            return [registry.get(spec, specifier=spec)]
        if "/" in spec and not candidate.exists() and registry.entry_point(spec) is not None:
            return [registry.get(spec, specifier=spec)]
        # 2. an installed distribution
        dist_error: PluginNotFoundError | None = None
        if not path_like:
            dist = self._distribution(spec)
            if dist is not None:
                try:
                    return self._load_distribution(kind, spec, dist)
                except PluginNotFoundError as exc:  # no entry points of this kind
                    dist_error = exc
        # 3. package.module:Attr
        if ":" in spec and not path_like:
            return self._load_module_attr(kind, spec)
        # 4. a path
        if path_like or candidate.exists():
            return self._load_path(spec, candidate)
        # 3b. an importable module with a register function
        if (
            _is_dotted_name(spec)
            and self._module_exists(spec)
            and (dist_error is None or source_defines_entry_function(spec))
        ):
            return self._load_module(spec, spec)
        if dist_error is not None:
            raise dist_error
        raise self._not_found(kind, spec, candidate)

    def _not_found(self, kind: PluginKind, spec: str, candidate: Path) -> PluginNotFoundError:
        base = self.registries[kind].not_found(spec)
        return PluginNotFoundError(
            f"{base.message}. {spec!r} is not {_article(kind_label(kind))} name, an installed "
            f"distribution, an importable module, nor an existing path ({candidate})",
            hint=base.hint,
        )

    @staticmethod
    def _candidate_path(spec: str, base_dir: Path) -> Path:
        path = Path(spec).expanduser()
        if not path.is_absolute():
            path = base_dir / path
        return path.resolve()

    # ------------------------------------------------------------------ distributions

    @staticmethod
    def _distribution(name: str) -> importlib.metadata.Distribution | None:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
            return None
        try:
            return importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            return None

    def _load_distribution(
        self, kind: PluginKind, spec: str, dist: importlib.metadata.Distribution
    ) -> list[Registration]:
        registry = self.registries[kind]
        eps = [ep for ep in dist.entry_points if ep.group == registry.group]
        if not eps:
            raise PluginNotFoundError(
                f"distribution {dist.metadata['Name']} {dist.version} (from specifier "
                f"{spec!r}) provides no {kind_label(kind)} plugins "
                f"(entry-point group {registry.group})",
                hint="check the plugin flag: this distribution may provide another kind",
            )
        return [registry.adopt_entry_point(ep, specifier=spec) for ep in eps]

    def _distribution_of_module(self, module_name: str) -> tuple[str | None, str | None]:
        if self._packages_distributions is None:
            self._packages_distributions = importlib.metadata.packages_distributions()
        names = self._packages_distributions.get(module_name.partition(".")[0], [])
        if not names:
            return None, None
        try:
            return names[0], importlib.metadata.version(names[0])
        except importlib.metadata.PackageNotFoundError:
            return names[0], None

    # ------------------------------------------------------------------ modules

    @staticmethod
    def _module_exists(name: str) -> bool:
        try:
            return importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            return False
        except Exception:  # a parent package raising on import: report it when loading
            return True

    @staticmethod
    def _import(module_name: str, spec: str) -> types.ModuleType:
        try:
            return importlib.import_module(module_name)
        except Exception as exc:
            raise PluginLoadError(
                f"plugin {spec!r}: cannot import module {module_name!r}: "
                f"{type(exc).__name__}: {exc}",
                hint="check the module path and that its dependencies are installed",
            ) from exc

    def _module_provenance(self, spec: str) -> Callable[[PluginKind, type], Provenance]:
        def make(kind: PluginKind, cls: type) -> Provenance:
            dist, version = self._distribution_of_module(getattr(cls, "__module__", ""))
            return Provenance(
                kind=kind,
                name=getattr(getattr(cls, "metadata", None), "name", "?"),
                source="module",
                target=class_target(cls),
                distribution=dist,
                version=version,
                specifier=spec,
            )

        return make

    def _registrar(self, provenance: Callable[[PluginKind, type], Provenance]) -> Registrar:
        return Registrar(
            lambda kind, cls, prov: self.registries[kind].register(cls, prov), provenance
        )

    def _load_module_attr(self, kind: PluginKind, spec: str) -> list[Registration]:
        module_name, _, attr_path = spec.partition(":")
        if not _is_dotted_name(module_name) or not _is_dotted_name(attr_path):
            raise PluginNotFoundError(
                f"plugin specifier {spec!r} is not of the form package.module:Attr"
            )
        key = f"module:{spec}"
        if key in self.modules:
            return list(self.modules[key].registrations)
        module = self._import(module_name, spec)
        obj: Any = module
        for part in attr_path.split("."):
            try:
                obj = getattr(obj, part)
            except AttributeError as exc:
                raise PluginLoadError(
                    f"plugin {spec!r}: module {module_name!r} has no attribute {attr_path!r}"
                ) from exc
        if isinstance(obj, types.ModuleType):
            return self._run_module(obj, key, spec)
        registrar = self._registrar(self._module_provenance(spec))
        if isinstance(obj, type):
            registration = self.registries[kind].register(
                obj, self._module_provenance(spec)(kind, obj)
            )
            registrations: tuple[Registration, ...] = (registration,)
        elif callable(obj):
            entry_kind = KIND_ENTRY_FUNCTIONS.get(attr_path.rpartition(".")[2])
            target = registrar if entry_kind is None else registrar.for_kind(entry_kind)
            call_entry_function(obj, target, spec)
            registrations = tuple(registrar.registrations)
        else:
            raise PluginValidationError(
                f"plugin {spec!r} is a {type(obj).__name__}: expected a plugin class, a "
                "module, a register(registrar) or a register_graders(registry)-style function"
            )
        self.modules[key] = LoadedModule(key, module_name, registrations)
        return list(registrations)

    def _load_module(self, module_name: str, spec: str) -> list[Registration]:
        key = f"module:{module_name}"
        if key in self.modules:
            return list(self.modules[key].registrations)
        module = self._import(module_name, spec)
        return self._run_module(module, key, spec)

    def _run_module(self, module: types.ModuleType, key: str, spec: str) -> list[Registration]:
        check_entry_functions(module, spec)
        registrar = self._registrar(self._module_provenance(spec))
        run_entry_functions(module, registrar, spec)
        loaded = LoadedModule(key, module.__name__, tuple(registrar.registrations))
        self.modules[key] = loaded
        return list(loaded.registrations)

    # ------------------------------------------------------------------ paths

    def _load_path(self, spec: str, path: Path) -> list[Registration]:
        if not path.exists():
            raise PluginNotFoundError(
                f"plugin path {spec!r} does not exist (resolved to {path})",
                hint="relative plugin paths resolve against the folder of the file that names "
                "them (or the current directory for flags of single-spec commands)",
            )
        if path.is_dir():
            if (path / "__init__.py").is_file():
                return self._load_file(spec, path, package=True)
            files = sorted(p for p in path.glob("*.py") if not p.name.startswith("_"))
            if not files:
                raise PluginNotFoundError(
                    f"plugin folder {spec!r} ({path}) holds no plugin files (*.py not "
                    "starting with '_') and is not a package (no __init__.py)"
                )
            registrations: list[Registration] = []
            for file in files:
                registrations.extend(self._load_file(spec, file.resolve(), package=False))
            return registrations
        if path.suffix != ".py":
            raise PluginNotFoundError(
                f"plugin path {spec!r} ({path}) is neither a .py file nor a folder"
            )
        return self._load_file(spec, path, package=False)

    def _load_file(self, spec: str, path: Path, *, package: bool) -> list[Registration]:
        key = f"path:{path}"
        if key in self.modules:
            return list(self.modules[key].registrations)
        module = import_plugin_file(path, package=package, specifier=spec)
        sha256 = file_sha256(path)

        def provenance(kind: PluginKind, cls: type) -> Provenance:
            return Provenance(
                kind=kind,
                name=getattr(getattr(cls, "metadata", None), "name", "?"),
                source="file",
                target=class_target(cls),
                path=str(path),
                sha256=sha256,
                specifier=spec,
            )

        registrar = self._registrar(provenance)
        run_entry_functions(module, registrar, spec)
        loaded = LoadedModule(
            key, module.__name__, tuple(registrar.registrations), path=str(path), sha256=sha256
        )
        self.modules[key] = loaded
        return list(loaded.registrations)


def _article(label: str) -> str:
    """``label`` with its indefinite article ("an eval provider", "a grader")."""
    return f"{'an' if label[:1] in 'aeiou' else 'a'} {label}"
