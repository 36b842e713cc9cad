"""Frozen metadata every plugin class declares as ``metadata = ...``.

The kernel reads it without instantiating the class: to list plugins, lint specs, pick
graders by cost, and decide what a plugin needs before a run starts. Identity
(distribution, version) comes from packaging, never from here.

Kinds with capabilities have their own model: :class:`ExecutorMetadata`,
:class:`GraderMetadata` and :class:`ReporterMetadata`. Every other kind declares a plain
:class:`PluginMetadata`. :mod:`vally.plugins.capabilities` is the one place that answers
questions about capabilities ("does this plugin need an LLM?").
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

PluginKind = Literal[
    "backend",
    "executor",
    "grader",
    "reporter",
    "eval_provider",
    "shard_strategy",
    "llm_provider",
    "exporter",
    "runner",
]
"""The kinds of plugin vally loads; each has one entry-point group
(see :mod:`vally.plugins.groups`)."""


class PluginMetadata(BaseModel):
    """Name (kebab-case, what users type), kind and a one-line description."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*(/[a-z0-9][a-z0-9._-]*)?$")
    kind: PluginKind
    description: str = ""


class ExecutorMetadata(PluginMetadata):
    """An executor's metadata with the capabilities the kernel checks before a run.

    Attributes:
        needs_llm: The executor calls models through the project's LLM provider
            (``.vally.yaml`` ``llm:``); the run builds one and passes it as
            ``ExecutorOptions.llm``.
        multi_turn: Stimuli with ``turns`` run in one shared session. Multi-turn stimuli
            given to an executor without it are rejected before any trial starts.
        needs_workspace: The executor works in the trial's workspace (runs commands or
            edits files there), so the trial needs a sandbox from a backend.
    """

    kind: Literal["executor"] = "executor"
    needs_llm: bool = False
    multi_turn: bool = False
    needs_workspace: bool = False


class ReporterMetadata(PluginMetadata):
    """A reporter's metadata.

    Attributes:
        critical: A failure of this reporter fails the run (the results writer is
            critical). Failures of other reporters are logged as warnings and the run
            goes on.
    """

    kind: Literal["reporter"] = "reporter"
    critical: bool = False


class GraderBehavior(BaseModel):
    """Deprecated: how the pipeline must treat a grader.

    Still accepted as ``GraderMetadata(behavior=GraderBehavior(...))``; the values are
    folded into :class:`GraderMetadata`'s ``needs_llm`` (``requires_llm_client``),
    ``needs_workspace`` (``requires_workspace``) and ``pairwise``
    (``execution="comparative"``). Declare those fields directly instead.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    execution: Literal["single", "comparative"] = "single"
    requires_llm_client: bool = False
    requires_workspace: bool = False


class GraderMetadata(PluginMetadata):
    """A grader's metadata: its capabilities and the taxonomy of vally's grader catalogue.

    Attributes:
        needs_llm: The grader calls a model (an LLM judge); the run builds the project's
            LLM provider and passes it as ``GradeContext.llm``.
        needs_workspace: The grader reads the trial's files or runs commands in its
            sandbox; re-grading without a workspace reports it and records an error.
        pairwise: The grader can also compare two runs (``judge_pair``, see
            :class:`~vally.contracts.protocols.PairwiseJudge`); ``vally compare`` uses it.
        nonblocking: The grader never blocks: ``grade`` only awaits (the sandbox, the LLM
            provider) and does little, bounded CPU work (no user-given regular expression),
            so the run awaits it on its own event loop, under the same timeout, instead of
            on a grader thread. Off by default: a grader that may block runs on a kept
            thread, so it cannot stall the run.
        determinism: ``static`` (same input, same result), ``complex-static`` (deterministic
            but heavier: regex, command), ``slm`` or ``llm`` (model judged).
        cost_profile: ``free`` (CPU only), ``low`` (local I/O or command), ``medium`` (SLM or
            API call), ``high`` (LLM inference).
        portability: ``t1-universal`` to ``t3b-system``: how broadly the grader applies.
        reference: whether a gold answer is needed.
        temporal_scope: final state, whole run, or several runs.
    """

    kind: Literal["grader"] = "grader"
    needs_llm: bool = False
    needs_workspace: bool = False
    pairwise: bool = False
    nonblocking: bool = False
    determinism: Literal["static", "complex-static", "slm", "llm"] = "static"
    cost_profile: Literal["free", "low", "medium", "high"] = "free"
    portability: Literal["t1-universal", "t2-domain", "t3a-scenario", "t3b-system"] = "t1-universal"
    reference: Literal["reference-free", "reference-based"] = "reference-free"
    temporal_scope: Literal["point-in-time", "trajectory-level", "cross-trajectory"] = (
        "point-in-time"
    )

    @model_validator(mode="before")
    @classmethod
    def _fold_behavior(cls, data: Any) -> Any:
        """Accept the deprecated ``behavior=GraderBehavior(...)`` and fold it into the
        capability fields (a capability is on when either form declares it)."""
        if not isinstance(data, dict) or "behavior" not in data:
            return data
        values = dict(data)
        behavior = GraderBehavior.model_validate(values.pop("behavior") or {})
        folded = {
            "needs_llm": behavior.requires_llm_client,
            "needs_workspace": behavior.requires_workspace,
            "pairwise": behavior.execution == "comparative",
        }
        for field_name, value in folded.items():
            values[field_name] = bool(values.get(field_name, False)) or value
        new = ", ".join(f"{k}={v}" for k, v in folded.items() if v) or "the capability fields"
        warnings.warn(
            f"grader {values.get('name')!r}: GraderMetadata(behavior=GraderBehavior(...)) is "
            f"deprecated; declare {new} on GraderMetadata instead "
            "(see docs/plugins/migration.md)",
            DeprecationWarning,
            stacklevel=2,
        )
        return values


METADATA_MODELS: dict[PluginKind, type[PluginMetadata]] = {
    "executor": ExecutorMetadata,
    "grader": GraderMetadata,
    "reporter": ReporterMetadata,
}
"""The metadata model of each kind with capabilities; other kinds use PluginMetadata."""


def metadata_model(kind: PluginKind) -> type[PluginMetadata]:
    """The metadata model plugins of ``kind`` declare (:class:`PluginMetadata` when the kind
    has no capabilities)."""
    return METADATA_MODELS.get(kind, PluginMetadata)
