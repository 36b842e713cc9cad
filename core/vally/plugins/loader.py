"""Turn plugin specifiers into registrations.

A specifier (``--grader-plugin``, ``--backend``, ``.vally.yaml plugins.*``, ...) is one of,
tried in this order:

1. a name in the kind's entry-point group (``docker``, ``by-stimulus``), or
   ``DISTRIBUTION/NAME`` to pick one provider of a name;
2. an installed distribution name: that distribution's entry points of the kind are loaded;
3. ``package.module:Attr``: ``Attr`` is a plugin class, a module, or a ``register`` function;
   a bare importable ``package.module`` is accepted too (it must register its plugins);
4. a path to a ``.py`` file or a folder. A folder with ``__init__.py`` is one package plugin;
   any other folder means each ``*.py`` directly inside it (sorted, names starting with
   ``_`` skipped). Relative paths resolve against ``base_dir``.

A module loaded by path or by name registers what it provides through a top-level
``register(registrar)`` function or a ``vally_register_components(registrar)`` hook
implementation (marked with :data:`vally.hookimpl`); the registrar is a
:class:`vally.plugins.registry.Registrar`. Files are imported under a unique synthetic module name
(``vally._plugins.<stem>_<8 hex>``) and are never added to ``sys.path``. The same resolved
file, or the same module, loads once however often it is named.

Loading a file runs its code with your privileges: only load plugins you trust.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.metadata
import importlib.util
import re
import sys
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vally.contracts.metadata import PluginKind
from vally.errors import (
    PluginError,
    PluginLoadError,
    PluginNotFoundError,
    PluginValidationError,
)
from vally.plugins.groups import kind_label
from vally.plugins.provenance import Provenance, Registration, class_target
from vally.plugins.registrar import Registrar
from vally.plugins.registry import Registry

if TYPE_CHECKING:
    from vally.plugins.groups import RegistryKind

SYNTHETIC_PACKAGE = "vally._plugins"
"""The package under which file plugins are imported."""

KIND_ENTRY_FUNCTIONS: dict[str, PluginKind] = {
    "register_graders": "grader",
    "register_executors": "executor",
    "register_backends": "backend",
    "register_reporters": "reporter",
    "register_eval_providers": "eval_provider",
    "register_shard_strategies": "shard_strategy",
    "register_llm_providers": "llm_provider",
    "register_exporters": "exporter",
}
"""Per-kind entry functions (``register_graders(registry)`` calling ``registry.register(cls)``),
the naming of vally's JavaScript plugins."""

ENTRY_FUNCTIONS = ("register", "vally_register_components", *KIND_ENTRY_FUNCTIONS)
"""Top-level functions that make a module a plugin module."""


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


def precheck_source(file: Path, specifier: str) -> None:
    """Parse ``file`` and require a top-level ``register`` or ``vally_register_components``.

    Raises:
        PluginLoadError: The file cannot be read or parsed, or declares no entry function.
    """
    try:
        source = file.read_text(encoding="utf-8")
        tree = ast.parse(source, filename=str(file))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError) as exc:
        raise PluginLoadError(
            f"plugin {specifier!r}: cannot parse {file}: {type(exc).__name__}: {exc}"
        ) from exc
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in (
            ENTRY_FUNCTIONS
        ):
            return
        if isinstance(node, ast.ImportFrom | ast.Import) and any(
            (alias.asname or alias.name) in ENTRY_FUNCTIONS for alias in node.names
        ):
            return
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in ENTRY_FUNCTIONS for t in node.targets
        ):
            return
    raise PluginLoadError(
        f"plugin {specifier!r}: no plugin entry found in {file}",
        hint="define a top-level 'def register(registrar):' that calls e.g. "
        "registrar.grader(MyGrader), or a @vally.hookimpl 'vally_register_components', or "
        "'def register_graders(registry):' calling registry.register(MyGrader)",
    )


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
            and (dist_error is None or self._has_entry_function(spec))
        ):
            return self._load_module(spec, spec)
        if dist_error is not None:
            raise dist_error
        raise self._not_found(kind, spec, candidate)

    @staticmethod
    def _has_entry_function(module_name: str) -> bool:
        try:
            found = importlib.util.find_spec(module_name)
        except Exception:
            return False
        origin = found.origin if found is not None else None
        if not origin or not origin.endswith(".py"):
            return False
        try:
            precheck_source(Path(origin), module_name)
        except PluginLoadError:
            return False
        return True

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
            self._call_entry(obj, registrar, spec)
            registrations = tuple(registrar.registrations)
        else:
            raise PluginValidationError(
                f"plugin {spec!r} is a {type(obj).__name__}: expected a plugin class, a "
                "module or a register(registrar) function"
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
        if not any(callable(getattr(module, name, None)) for name in ENTRY_FUNCTIONS):
            raise PluginLoadError(
                f"plugin {spec!r}: module {module.__name__!r} has no 'register(registrar)' "
                "function nor a 'vally_register_components' hook",
                hint="point the specifier at a class (package.module:Class) or add register()",
            )
        registrar = self._registrar(self._module_provenance(spec))
        self._run_entries(module, registrar, spec)
        loaded = LoadedModule(key, module.__name__, tuple(registrar.registrations))
        self.modules[key] = loaded
        return list(loaded.registrations)

    # ------------------------------------------------------------------ entry functions

    @staticmethod
    def _call_entry(function: Callable[..., Any], registrar: object, spec: str) -> None:
        try:
            function(registrar)
        except PluginError:
            raise
        except Exception as exc:
            raise PluginLoadError(
                f"plugin {spec!r}: {getattr(function, '__qualname__', function)!s}(registrar) "
                f"raised {type(exc).__name__}: {exc}"
            ) from exc

    def _run_entries(self, module: types.ModuleType, registrar: Registrar, spec: str) -> None:
        register = getattr(module, "register", None)
        if callable(register):
            self._call_entry(register, registrar, spec)
        for function_name, kind in KIND_ENTRY_FUNCTIONS.items():
            function = getattr(module, function_name, None)
            if callable(function):
                self._call_entry(function, registrar.for_kind(kind), spec)
        hook = getattr(module, "vally_register_components", None)
        if not callable(hook):
            return
        from vally.contracts.events import new_plugin_manager
        from vally.contracts.hookspecs import PROJECT

        if getattr(hook, f"{PROJECT}_impl", None) is None:  # an unmarked function
            self._call_entry(hook, registrar, spec)
            return
        import pluggy

        manager = new_plugin_manager()
        try:
            manager.register(module, name=module.__name__)
            manager.check_pending()
        except pluggy.PluginValidationError as exc:
            raise PluginValidationError(
                f"plugin {spec!r}: invalid hook implementation in {module.__name__}: {exc}",
                hint="hook names and arguments must match vally.contracts.hookspecs",
            ) from exc
        try:
            manager.hook.vally_register_components(registrar=registrar)
        except PluginError:
            raise
        except Exception as exc:
            raise PluginLoadError(
                f"plugin {spec!r}: vally_register_components raised {type(exc).__name__}: {exc}"
            ) from exc

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
        entry_file = path / "__init__.py" if package else path
        precheck_source(entry_file, spec)
        sha256 = file_sha256(path)
        module_name = synthetic_module_name(path)
        _ensure_synthetic_package()
        import_spec = importlib.util.spec_from_file_location(
            module_name,
            entry_file,
            submodule_search_locations=[str(path)] if package else None,
        )
        if import_spec is None or import_spec.loader is None:  # pragma: no cover - defensive
            raise PluginLoadError(f"plugin {spec!r}: cannot import {entry_file}")
        module = importlib.util.module_from_spec(import_spec)
        sys.modules[module_name] = module
        try:
            import_spec.loader.exec_module(module)
        except BaseException as exc:
            for name in [
                n for n in sys.modules if n == module_name or n.startswith(module_name + ".")
            ]:
                del sys.modules[name]
            if not isinstance(exc, Exception):
                raise
            raise PluginLoadError(
                f"plugin {spec!r}: importing {entry_file} failed: {type(exc).__name__}: {exc}",
                hint="run the file with python to see the full error",
            ) from exc

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
        self._run_entries(module, registrar, spec)
        loaded = LoadedModule(
            key, module_name, tuple(registrar.registrations), path=str(path), sha256=sha256
        )
        self.modules[key] = loaded
        return list(loaded.registrations)


def _article(label: str) -> str:
    """``label`` with its indefinite article ("an eval provider", "a grader")."""
    return f"{'an' if label[:1] in 'aeiou' else 'a'} {label}"
