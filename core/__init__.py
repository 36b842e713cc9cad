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


if TYPE_CHECKING:  # pragma: no cover - static re-exports for type checkers
    from vally.bases import (
        BaseBackend as BaseBackend,
        BaseExecutor as BaseExecutor,
        BaseGrader as BaseGrader,
        BaseReporter as BaseReporter,
        EmptyConfig as EmptyConfig,
        StrictConfig as StrictConfig,
    )
    from vally.durations import (
        Duration as Duration,
        parse_duration as parse_duration,
    )
    from vally.errors import (
        BackendError as BackendError,
        CleanupError as CleanupError,
        ConfigError as ConfigError,
        ExecutionError as ExecutionError,
        GradingError as GradingError,
        LLMError as LLMError,
        OutputError as OutputError,
        PluginConflictError as PluginConflictError,
        PluginError as PluginError,
        PluginLoadError as PluginLoadError,
        PluginNotFoundError as PluginNotFoundError,
        PluginValidationError as PluginValidationError,
        SchemaError as SchemaError,
        SetupError as SetupError,
        UnsupportedError as UnsupportedError,
        VallyError as VallyError,
    )
    from vally.events import (
        RunInfo as RunInfo,
        RunOutcome as RunOutcome,
    )
    from vally.hookspecs import (
        hookimpl as hookimpl,
    )
    from vally.metadata import (
        GraderBehavior as GraderBehavior,
        GraderMetadata as GraderMetadata,
        PluginMetadata as PluginMetadata,
    )
    from vally.models import (
        AssistantMessageEvent as AssistantMessageEvent,
        Constraints as Constraints,
        EnvironmentConfig as EnvironmentConfig,
        ErrorEvent as ErrorEvent,
        EvalConfig as EvalConfig,
        EvalSpec as EvalSpec,
        ExperimentBlock as ExperimentBlock,
        FileEntry as FileEntry,
        GraderConfig as GraderConfig,
        GradeResult as GradeResult,
        GraderResult as GraderResult,
        McpServerConfig as McpServerConfig,
        ReasoningEvent as ReasoningEvent,
        RunSummaryRecord as RunSummaryRecord,
        SkillActivationEvent as SkillActivationEvent,
        Stimulus as Stimulus,
        TokenUsageEvent as TokenUsageEvent,
        ToolCallEvent as ToolCallEvent,
        ToolResultEvent as ToolResultEvent,
        Trajectory as Trajectory,
        TrajectoryEvent as TrajectoryEvent,
        TrajectoryMetadata as TrajectoryMetadata,
        TrajectoryMetrics as TrajectoryMetrics,
        TrialError as TrialError,
        TrialResultRecord as TrialResultRecord,
        Turn as Turn,
        TurnEndEvent as TurnEndEvent,
        TurnStartEvent as TurnStartEvent,
        UserMessageEvent as UserMessageEvent,
        compute_metrics as compute_metrics,
        utc_now as utc_now,
    )
    from vally.protocols import (
        Backend as Backend,
        ChatMessage as ChatMessage,
        ChatRequest as ChatRequest,
        ChatResponse as ChatResponse,
        EvalProvider as EvalProvider,
        ExecResult as ExecResult,
        Executor as Executor,
        ExecutorOptions as ExecutorOptions,
        GradeContext as GradeContext,
        Grader as Grader,
        JudgeSettings as JudgeSettings,
        LLMProvider as LLMProvider,
        LoadedEval as LoadedEval,
        PairwiseContext as PairwiseContext,
        PairwiseJudge as PairwiseJudge,
        PairwiseVerdict as PairwiseVerdict,
        Process as Process,
        Sandbox as Sandbox,
        ShardStrategy as ShardStrategy,
        SkillRef as SkillRef,
        ToolCall as ToolCall,
        ToolSpec as ToolSpec,
        TrialContext as TrialContext,
        TrialKey as TrialKey,
    )
    from vally.skills import (
        SkillInfo as SkillInfo,
        read_skill as read_skill,
    )
