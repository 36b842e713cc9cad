"""What a plugin needs and what it can do, answered from its declared metadata.

This module is the only place in the kernel that answers these questions; every reader
(run setup, grading, ``vally grade``, ``vally compare``, lint, observer registration) calls
one of its functions. Each function takes a plugin class or instance and reads its
``metadata`` (an instance may narrow its class's metadata for its config, as the
``command`` executor does for multi-turn):

* :func:`needs_llm`: an executor or grader calls models through the project's provider;
* :func:`supports_turns`: an executor runs multi-turn stimuli in one session;
* :func:`needs_workspace`: an executor or grader works in the trial's workspace;
* :func:`declares_no_workspace`: an executor says explicitly that it needs none;
* :func:`is_critical`: a reporter's failure fails the run;
* :func:`is_pairwise`: a grader can compare two runs (``vally compare``);
* :func:`is_judged`: a grader's verdict comes from a model, not a deterministic check.

Plugins written before capabilities lived in metadata declared some of them as class
attributes (``supports_turns = True``, ``requires_llm = True``, ``critical = True``) or,
for pairwise judges, only by having a ``judge_pair`` method. :func:`declared_metadata` is
the one compatibility point that still honours them: each such declaration turns the
capability on and raises a :class:`DeprecationWarning` naming the plugin and the metadata
field to declare instead.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from vally.contracts.metadata import (
    ExecutorMetadata,
    GraderMetadata,
    PluginKind,
    PluginMetadata,
    ReporterMetadata,
    metadata_model,
)

__all__ = [
    "LEGACY_DECLARATIONS",
    "LegacyDeclaration",
    "capability_names",
    "declared_metadata",
    "declares_no_workspace",
    "is_critical",
    "is_judged",
    "is_pairwise",
    "needs_llm",
    "needs_workspace",
    "supports_turns",
]


@dataclass(frozen=True)
class LegacyDeclaration:
    """A capability declared the old way, outside metadata.

    Attributes:
        kind: The plugin kind the declaration belongs to.
        attribute: The class attribute (or method) that declared it.
        field: The metadata field that declares it now.
    """

    kind: PluginKind
    attribute: str
    field: str


LEGACY_DECLARATIONS: tuple[LegacyDeclaration, ...] = (
    LegacyDeclaration("executor", "supports_turns", "multi_turn"),
    LegacyDeclaration("executor", "requires_llm", "needs_llm"),
    LegacyDeclaration("reporter", "critical", "critical"),
    LegacyDeclaration("grader", "judge_pair", "pairwise"),
)
"""The declarations :func:`declared_metadata` still honours, with a deprecation warning."""


def declared_metadata(plugin: object) -> PluginMetadata | None:
    """The metadata a plugin class or instance declares, in its kind's model.

    A plain :class:`PluginMetadata` of a kind with capabilities becomes that kind's model
    with every capability off. This is the one compatibility point for legacy
    declarations (:data:`LEGACY_DECLARATIONS`): a truthy one whose capability the metadata
    does not declare turns it on and warns.

    Args:
        plugin: A plugin class or instance.

    Returns:
        The metadata, or None when ``plugin`` declares none (an internal observer).
    """
    metadata = getattr(plugin, "metadata", None)
    if not isinstance(metadata, PluginMetadata):
        return None
    model = metadata_model(metadata.kind)
    upgrades: dict[str, bool] = {}
    for legacy in LEGACY_DECLARATIONS:
        if legacy.kind != metadata.kind or getattr(metadata, legacy.field, False):
            continue
        if getattr(plugin, legacy.attribute, None):
            _warn_legacy(plugin, metadata, legacy, model)
            upgrades[legacy.field] = True
    if isinstance(metadata, model):
        return metadata.model_copy(update=upgrades) if upgrades else metadata
    base = {name: getattr(metadata, name) for name in PluginMetadata.model_fields}
    return model.model_validate({**base, **upgrades})


def _warn_legacy(
    plugin: object,
    metadata: PluginMetadata,
    legacy: LegacyDeclaration,
    model: type[PluginMetadata],
) -> None:
    cls = plugin if isinstance(plugin, type) else type(plugin)
    how = (
        f"has a {legacy.attribute} method but its metadata does not declare {legacy.field}"
        if legacy.attribute == "judge_pair"
        else f"declares {legacy.attribute} as a class attribute, which is deprecated"
    )
    warnings.warn(
        f"{metadata.kind} plugin {metadata.name!r} ({cls.__module__}.{cls.__qualname__}) "
        f"{how}; declare metadata = {model.__name__}(..., {legacy.field}=True) instead "
        "(see docs/plugins/migration.md)",
        DeprecationWarning,
        stacklevel=4,
    )


def needs_llm(plugin: object) -> bool:
    """True when the executor or grader calls models through the project's LLM provider
    (metadata ``needs_llm``), so the run must build one and hand it over."""
    metadata = declared_metadata(plugin)
    return isinstance(metadata, (ExecutorMetadata, GraderMetadata)) and metadata.needs_llm


def supports_turns(plugin: object) -> bool:
    """True when the executor runs a multi-turn stimulus in one session (metadata
    ``multi_turn``)."""
    metadata = declared_metadata(plugin)
    return isinstance(metadata, ExecutorMetadata) and metadata.multi_turn


def needs_workspace(plugin: object) -> bool:
    """True when the executor or grader works in the trial's workspace (metadata
    ``needs_workspace``), so it cannot run without a sandbox."""
    metadata = declared_metadata(plugin)
    return isinstance(metadata, (ExecutorMetadata, GraderMetadata)) and metadata.needs_workspace


def declares_no_workspace(plugin: object) -> bool:
    """True when the executor sets ``needs_workspace=False`` explicitly in its metadata (the
    default, unset, does not count), so its trials may run without opening the backend."""
    metadata = declared_metadata(plugin)
    return (
        isinstance(metadata, ExecutorMetadata)
        and "needs_workspace" in metadata.model_fields_set
        and not metadata.needs_workspace
    )


def is_critical(plugin: object) -> bool:
    """True when a failure of the reporter must fail the run (metadata ``critical``)."""
    metadata = declared_metadata(plugin)
    return isinstance(metadata, ReporterMetadata) and metadata.critical


def is_nonblocking(plugin: object) -> bool:
    """True when the grader declares it never blocks (metadata ``nonblocking``), so the run
    may await it on its own event loop instead of on a grader thread."""
    metadata = declared_metadata(plugin)
    return isinstance(metadata, GraderMetadata) and metadata.nonblocking


def is_pairwise(plugin: object) -> bool:
    """True when the grader can compare two runs (metadata ``pairwise``)."""
    metadata = declared_metadata(plugin)
    return isinstance(metadata, GraderMetadata) and metadata.pairwise


def is_judged(plugin: object) -> bool:
    """True when a model judges the grader's verdict: it calls the project's LLM provider
    (metadata ``needs_llm``) or its taxonomy says a model decides (``determinism`` ``slm``
    or ``llm``)."""
    metadata = declared_metadata(plugin)
    return isinstance(metadata, GraderMetadata) and (
        metadata.needs_llm or metadata.determinism in ("slm", "llm")
    )


CAPABILITY_NAMES: dict[str, str] = {
    "needs_llm": "needs-llm",
    "multi_turn": "multi-turn",
    "needs_workspace": "needs-workspace",
    "critical": "critical",
    "pairwise": "pairwise",
}
"""Capability field -> the label shown to users (``vally plugins list``)."""


def capability_names(plugin: object) -> tuple[str, ...]:
    """The labels of the capabilities a plugin declares, in a fixed order (for listings)."""
    metadata = declared_metadata(plugin)
    if metadata is None:
        return ()
    return tuple(
        label for field, label in CAPABILITY_NAMES.items() if getattr(metadata, field, False)
    )
