"""vally: evaluate AI agents.

This module is the public API for plugin authors and library users. Import from here
(``from vally import BaseGrader, GraderMetadata, hookimpl``), never from pluggy or stevedore.
Names are resolved lazily so that ``vally --help`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from vally._version import __version__

_EXPORTS: dict[str, str] = {
    # errors
    "VallyError": "vally.errors",
    "ConfigError": "vally.errors",
    "SchemaError": "vally.errors",
    "PluginError": "vally.errors",
    "PluginLoadError": "vally.errors",
    "PluginNotFoundError": "vally.errors",
    "PluginConflictError": "vally.errors",
    "PluginValidationError": "vally.errors",
    "ExecutionError": "vally.errors",
    "UnsupportedError": "vally.errors",
    "SetupError": "vally.errors",
    "GradingError": "vally.errors",
    "BackendError": "vally.errors",
    "CleanupError": "vally.errors",
    "OutputError": "vally.errors",
    "LLMError": "vally.errors",
    # metadata
    "PluginMetadata": "vally.metadata",
    "GraderMetadata": "vally.metadata",
    "GraderBehavior": "vally.metadata",
    # hooks
    "hookimpl": "vally.hookspecs",
    "RunInfo": "vally.events",
    "RunOutcome": "vally.events",
    # protocols and values
    "Backend": "vally.protocols",
    "Sandbox": "vally.protocols",
    "Process": "vally.protocols",
    "ExecResult": "vally.protocols",
    "Executor": "vally.protocols",
    "ExecutorOptions": "vally.protocols",
    "Grader": "vally.protocols",
    "GradeContext": "vally.protocols",
    "JudgeSettings": "vally.protocols",
    "PairwiseContext": "vally.protocols",
    "PairwiseJudge": "vally.protocols",
    "PairwiseVerdict": "vally.protocols",
    "EvalProvider": "vally.protocols",
    "LoadedEval": "vally.protocols",
    "ShardStrategy": "vally.protocols",
    "LLMProvider": "vally.protocols",
    "ChatMessage": "vally.protocols",
    "ChatRequest": "vally.protocols",
    "ChatResponse": "vally.protocols",
    "ToolCall": "vally.protocols",
    "ToolSpec": "vally.protocols",
    "SkillRef": "vally.protocols",
    "TrialContext": "vally.protocols",
    "TrialKey": "vally.protocols",
    # bases
    "BaseBackend": "vally.bases",
    "BaseExecutor": "vally.bases",
    "BaseGrader": "vally.bases",
    "BaseReporter": "vally.bases",
    "EmptyConfig": "vally.bases",
    "StrictConfig": "vally.bases",
    # durations
    "Duration": "vally.durations",
    "parse_duration": "vally.durations",
    # skills
    "SkillInfo": "vally.skills",
    "read_skill": "vally.skills",
}

_MODEL_NAMES = (
    "AssistantMessageEvent Constraints EnvironmentConfig ErrorEvent EvalConfig EvalSpec "
    "ExperimentBlock FileEntry GradeResult GraderConfig GraderResult McpServerConfig "
    "ReasoningEvent RunSummaryRecord SkillActivationEvent Stimulus TokenUsageEvent "
    "ToolCallEvent ToolResultEvent Trajectory TrajectoryEvent TrajectoryMetadata "
    "TrajectoryMetrics TrialError TrialResultRecord Turn TurnEndEvent TurnStartEvent "
    "UserMessageEvent compute_metrics utc_now"
).split()
_EXPORTS.update({name: "vally.models" for name in _MODEL_NAMES})

__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'vally' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # pragma: no cover
    from vally.bases import (
        BaseBackend,
        BaseExecutor,
        BaseGrader,
        BaseReporter,
        EmptyConfig,
        StrictConfig,
    )
    from vally.durations import Duration, parse_duration
    from vally.errors import (
        BackendError,
        CleanupError,
        ConfigError,
        ExecutionError,
        GradingError,
        LLMError,
        OutputError,
        PluginConflictError,
        PluginError,
        PluginLoadError,
        PluginNotFoundError,
        PluginValidationError,
        SchemaError,
        SetupError,
        UnsupportedError,
        VallyError,
    )
    from vally.events import RunInfo, RunOutcome
    from vally.hookspecs import hookimpl
    from vally.metadata import GraderBehavior, GraderMetadata, PluginMetadata
    from vally.models import *
    from vally.protocols import (
        Backend,
        ChatMessage,
        ChatRequest,
        ChatResponse,
        EvalProvider,
        ExecResult,
        Executor,
        ExecutorOptions,
        GradeContext,
        Grader,
        JudgeSettings,
        LLMProvider,
        LoadedEval,
        PairwiseContext,
        PairwiseJudge,
        PairwiseVerdict,
        Process,
        Sandbox,
        ShardStrategy,
        SkillRef,
        ToolCall,
        ToolSpec,
        TrialContext,
        TrialKey,
    )
    from vally.skills import SkillInfo, read_skill
