"""The contract a loaded plugin must satisfy, checked when it is first loaded.

A run plugin is a class with a ``metadata`` of its kind whose name is the name it was found
under, and a ``Config`` that is a pydantic model. A CLI command extension is a callable
``register(app)``. A hook plugin is a class (instantiated with no arguments); its hook
methods are checked when it is registered (:mod:`vally.engine.experiment_hooks`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vally.errors import PluginValidationError
from vally.plugins.groups import CLI_COMMAND_KIND, HOOK_KIND, kind_label
from vally.plugins.provenance import class_target

if TYPE_CHECKING:
    from vally.contracts.metadata import PluginKind
    from vally.plugins.groups import RegistryKind


def validate_plugin(
    kind: RegistryKind, obj: Any, *, expected_name: str | None, specifier: str
) -> str:
    """Check ``obj`` against the contract of ``kind`` and return its name.

    Raises:
        PluginValidationError: See :func:`validate_plugin_class`,
            :func:`validate_command_extension` and :func:`validate_hook_plugin`.
    """
    if kind == CLI_COMMAND_KIND:
        return validate_command_extension(obj, expected_name=expected_name, specifier=specifier)
    if kind == HOOK_KIND:
        return validate_hook_plugin(obj, expected_name=expected_name, specifier=specifier)
    return validate_plugin_class(kind, obj, expected_name=expected_name, specifier=specifier)


def validate_command_extension(obj: Any, *, expected_name: str | None, specifier: str) -> str:
    """Check that a ``vally.cli`` entry point is a ``register(app)`` function; return its name.

    Raises:
        PluginValidationError: ``obj`` is not callable, or it was not found under a name
            (CLI command extensions come only from the ``vally.cli`` entry-point group).
    """
    where = f"CLI command {specifier!r} ({class_target(obj)})"
    if expected_name is None:
        raise PluginValidationError(
            f"{where} cannot be registered explicitly",
            hint="declare it in the 'vally.cli' entry-point group of a distribution",
        )
    if not callable(obj) or isinstance(obj, type):
        raise PluginValidationError(
            f"{where} is a {type(obj).__name__}, not a register(app) function",
            hint="point the 'vally.cli' entry point at a function that adds commands to the app",
        )
    return expected_name


def validate_hook_plugin(obj: Any, *, expected_name: str | None, specifier: str) -> str:
    """Check that a ``vally.hooks`` entry point is a class; return its name.

    Raises:
        PluginValidationError: ``obj`` is not a class, or it was not found under a name
            (hook plugins come only from the ``vally.hooks`` entry-point group).
    """
    where = f"hook plugin {specifier!r} ({class_target(obj)})"
    if expected_name is None:
        raise PluginValidationError(
            f"{where} cannot be registered explicitly",
            hint="declare it in the 'vally.hooks' entry-point group of a distribution",
        )
    if not isinstance(obj, type):
        raise PluginValidationError(
            f"{where} is a {type(obj).__name__}, not a class",
            hint="point the 'vally.hooks' entry point at a class whose methods implement hooks",
        )
    return expected_name


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


def describe(plugin: Any) -> str:
    """The one-line description of a loaded plugin: its ``metadata.description``, or the
    first line of a CLI command extension's docstring."""
    metadata = getattr(plugin, "metadata", None)
    if metadata is not None:
        return str(getattr(metadata, "description", ""))
    doc = getattr(plugin, "__doc__", None) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""
