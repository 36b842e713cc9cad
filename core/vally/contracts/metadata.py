"""Frozen metadata every plugin class declares as ``metadata = ...``.

The kernel reads it without instantiating the class: to list plugins, lint specs, and pick
graders by cost. Identity (distribution, version) comes from packaging, never from here.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

PluginKind = Literal[
    "backend",
    "executor",
    "grader",
    "reporter",
    "eval_provider",
    "shard_strategy",
    "llm_provider",
    "exporter",
]
"""The kinds of plugin vally loads; each has one entry-point group
(see :mod:`vally.plugins.groups`)."""


class PluginMetadata(BaseModel):
    """Name (kebab-case, what users type), kind and a one-line description."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*(/[a-z0-9][a-z0-9._-]*)?$")
    kind: PluginKind
    description: str = ""


class GraderBehavior(BaseModel):
    """How the pipeline must treat a grader."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    execution: Literal["single", "comparative"] = "single"
    requires_llm_client: bool = False
    requires_workspace: bool = False


class GraderMetadata(PluginMetadata):
    """A grader's metadata with the taxonomy of vally's grader catalogue.

    Attributes:
        determinism: ``static`` (same input, same result), ``complex-static`` (deterministic
            but heavier: regex, command), ``slm`` or ``llm`` (model judged).
        cost_profile: ``free`` (CPU only), ``low`` (local I/O or command), ``medium`` (SLM or
            API call), ``high`` (LLM inference).
        portability: ``t1-universal`` to ``t3b-system``: how broadly the grader applies.
        reference: whether a gold answer is needed.
        temporal_scope: final state, whole run, or several runs.
    """

    kind: Literal["grader"] = "grader"
    behavior: GraderBehavior = Field(default_factory=GraderBehavior)
    determinism: Literal["static", "complex-static", "slm", "llm"] = "static"
    cost_profile: Literal["free", "low", "medium", "high"] = "free"
    portability: Literal["t1-universal", "t2-domain", "t3a-scenario", "t3b-system"] = "t1-universal"
    reference: Literal["reference-free", "reference-based"] = "reference-free"
    temporal_scope: Literal["point-in-time", "trajectory-level", "cross-trajectory"] = (
        "point-in-time"
    )
