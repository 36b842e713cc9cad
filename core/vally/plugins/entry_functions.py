"""The two ways a plugin module (a file, a folder or an importable module) registers what it
provides, and how they are found and called.

1. ``register(registrar)``: a top-level function receiving a
   :class:`~vally.plugins.registrar.Registrar` (``registrar.grader(MyGrader)``, ...);
2. ``register_graders(registry)``, ``register_executors(registry)``, ... (one per kind, the
   naming of vally's JavaScript plugins): each receives a
   :class:`~vally.plugins.registrar.KindRegistrar` (``registry.register(MyGrader)``).

A module may define both. Older forms are recognised only to say what to rename
(:data:`RETIRED_ENTRY_FUNCTIONS`); ``docs/plugins/migration.md`` explains the change.
"""

from __future__ import annotations

import ast
import importlib.util
import types
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vally.errors import PluginError, PluginLoadError

if TYPE_CHECKING:
    from vally.contracts.metadata import PluginKind
    from vally.plugins.registrar import Registrar

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
"""Per-kind entry functions: ``register_graders(registry)`` calling ``registry.register(cls)``."""

ENTRY_FUNCTIONS = ("register", *KIND_ENTRY_FUNCTIONS)
"""Top-level functions that make a module a plugin module."""

RETIRED_ENTRY_FUNCTIONS: dict[str, str] = {"vally_register_components": "register"}
"""Entry functions vally no longer calls -> the function to rename them to."""

ENTRY_HINT = (
    "define a top-level 'def register(registrar):' that calls e.g. registrar.grader(MyGrader), "
    "or 'def register_graders(registry):' that calls registry.register(MyGrader)"
)


def _retired_message(where: str, names: Iterable[str]) -> tuple[str, str]:
    old = sorted(names)[0]
    new = RETIRED_ENTRY_FUNCTIONS[old]
    message = (
        f"{where} defines {old}(registrar), which vally no longer calls: rename it to "
        f"{new}(registrar) and remove any @vally.hookimpl decorator from it"
    )
    return message, "the registrar it receives is unchanged; see docs/plugins/migration.md"


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def precheck_source(file: Path, specifier: str) -> None:
    """Parse ``file`` without running it and require a top-level entry function.

    Raises:
        PluginLoadError: The file cannot be read or parsed, declares no entry function, or
            declares only a retired one (the message says what to rename).
    """
    try:
        tree = ast.parse(file.read_text(encoding="utf-8"), filename=str(file))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError) as exc:
        raise PluginLoadError(
            f"plugin {specifier!r}: cannot parse {file}: {type(exc).__name__}: {exc}"
        ) from exc
    names = _top_level_names(tree)
    if names.intersection(ENTRY_FUNCTIONS):
        return
    retired = names.intersection(RETIRED_ENTRY_FUNCTIONS)
    if retired:
        message, hint = _retired_message(f"plugin {specifier!r}: {file}", retired)
        raise PluginLoadError(message, hint=hint)
    raise PluginLoadError(f"plugin {specifier!r}: no plugin entry found in {file}", hint=ENTRY_HINT)


def source_defines_entry_function(module_name: str) -> bool:
    """True when the importable module ``module_name`` is a ``.py`` file whose source
    defines an entry function (checked without importing it)."""
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


def check_entry_functions(module: types.ModuleType, specifier: str) -> None:
    """Require an entry function on an imported module.

    Raises:
        PluginLoadError: None is defined, or only a retired one (saying what to rename).
    """
    if any(callable(getattr(module, name, None)) for name in ENTRY_FUNCTIONS):
        return
    where = f"plugin {specifier!r}: module {module.__name__!r}"
    retired = [name for name in RETIRED_ENTRY_FUNCTIONS if hasattr(module, name)]
    if retired:
        message, hint = _retired_message(where, retired)
        raise PluginLoadError(message, hint=hint)
    raise PluginLoadError(
        f"{where} has no 'register(registrar)' function nor a per-kind function such as "
        "'register_graders(registry)'",
        hint="point the specifier at a class (package.module:Class) or add register()",
    )


def call_entry_function(function: Callable[..., Any], registrar: object, specifier: str) -> None:
    """Call one entry function, turning any failure but a plugin error into a chained
    :class:`~vally.errors.PluginLoadError` naming the specifier."""
    try:
        function(registrar)
    except PluginError:
        raise
    except Exception as exc:
        raise PluginLoadError(
            f"plugin {specifier!r}: {getattr(function, '__qualname__', function)!s}(registrar) "
            f"raised {type(exc).__name__}: {exc}"
        ) from exc


def run_entry_functions(module: types.ModuleType, registrar: Registrar, specifier: str) -> None:
    """Call the module's ``register(registrar)`` and each of its per-kind functions.

    Raises:
        PluginLoadError: An entry function raised (cause chained).
        PluginError: A registration broke a kind's contract or conflicts.
    """
    register = getattr(module, "register", None)
    if callable(register):
        call_entry_function(register, registrar, specifier)
    for function_name, kind in KIND_ENTRY_FUNCTIONS.items():
        function = getattr(module, function_name, None)
        if callable(function):
            call_entry_function(function, registrar.for_kind(kind), specifier)
