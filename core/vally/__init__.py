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
    "PathEscapeError": "vally.errors",
    # metadata
    "PluginMetadata": "vally.contracts.metadata",
    "GraderMetadata": "vally.contracts.metadata",
    "GraderBehavior": "vally.contracts.metadata",
    # hooks
    "hookimpl": "vally.contracts.hookspecs",
    "RunInfo": "vally.contracts.events",
    "RunOutcome": "vally.contracts.events",
    # protocols and values
    "Backend": "vally.contracts.protocols",
    "Sandbox": "vally.contracts.protocols",
    "Process": "vally.contracts.protocols",
    "ExecResult": "vally.contracts.protocols",
    "Executor": "vally.contracts.protocols",
    "ExecutorOptions": "vally.contracts.protocols",
    "Grader": "vally.contracts.protocols",
    "GradeContext": "vally.contracts.protocols",
    "JudgeSettings": "vally.contracts.protocols",
    "PairwiseContext": "vally.contracts.protocols",
    "PairwiseJudge": "vally.contracts.protocols",
    "PairwiseVerdict": "vally.contracts.protocols",
    "EvalProvider": "vally.contracts.protocols",
    "LoadedEval": "vally.contracts.protocols",
    "ShardStrategy": "vally.contracts.protocols",
    "LLMProvider": "vally.contracts.protocols",
    "ChatMessage": "vally.contracts.protocols",
    "ChatRequest": "vally.contracts.protocols",
    "ChatResponse": "vally.contracts.protocols",
    "ToolCall": "vally.contracts.protocols",
    "ToolSpec": "vally.contracts.protocols",
    "SkillRef": "vally.contracts.protocols",
    "TrialContext": "vally.contracts.protocols",
    "TrialKey": "vally.contracts.protocols",
    # bases
    "Plugin": "vally.contracts.bases",
    "BaseBackend": "vally.contracts.bases",
    "BaseExecutor": "vally.contracts.bases",
    "BaseGrader": "vally.contracts.bases",
    "BaseReporter": "vally.contracts.bases",
    "BaseSandbox": "vally.contracts.bases",
    "ExecRequest": "vally.contracts.bases",
    "EmptyConfig": "vally.contracts.bases",
    "StrictConfig": "vally.contracts.bases",
    # durations
    "Duration": "vally.models.durations",
    "parse_duration": "vally.models.durations",
    "format_duration": "vally.models.durations",
    # spec loading and scoring, for eval providers and reporters
    "load_eval_file": "vally.specs.loading",
    "pass_at_k": "vally.engine.scoring",
    # skills
    "SkillInfo": "vally.specs.skills",
    "read_skill": "vally.specs.skills",
}

_MODEL_NAMES = (
    "AssistantMessageEvent Constraints EndReason EnvironmentConfig ErrorData ErrorEvent "
    "EvalConfig EvalSpec ExperimentBlock FileEntry GradeResult GraderConfig GraderResult "
    "McpServerConfig MessageData ReasoningEvent RunSummaryRecord SkillActivationData "
    "SkillActivationEvent Stimulus TokenUsageData TokenUsageEvent ToolCallData "
    "ToolCallEvent ToolResultData ToolResultEvent Trajectory TrajectoryEvent "
    "TrajectoryMetadata TrajectoryMetrics TrajectoryRecorder TrialError "
    "TrialResultRecord Turn TurnData TurnEndEvent TurnStartEvent UserMessageEvent "
    "compute_metrics last_assistant_text utc_now"
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
    from vally.contracts.bases import (
        BaseBackend as BaseBackend,
        BaseExecutor as BaseExecutor,
        BaseGrader as BaseGrader,
        BaseReporter as BaseReporter,
        BaseSandbox as BaseSandbox,
        EmptyConfig as EmptyConfig,
        ExecRequest as ExecRequest,
        Plugin as Plugin,
        StrictConfig as StrictConfig,
    )
    from vally.contracts.events import (
        RunInfo as RunInfo,
        RunOutcome as RunOutcome,
    )
    from vally.contracts.hookspecs import (
        hookimpl as hookimpl,
    )
    from vally.contracts.metadata import (
        GraderBehavior as GraderBehavior,
        GraderMetadata as GraderMetadata,
        PluginMetadata as PluginMetadata,
    )
    from vally.contracts.protocols import (
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
    from vally.engine.scoring import (
        pass_at_k as pass_at_k,
    )
    from vally.errors import (
        BackendError as BackendError,
        CleanupError as CleanupError,
        ConfigError as ConfigError,
        ExecutionError as ExecutionError,
        GradingError as GradingError,
        LLMError as LLMError,
        OutputError as OutputError,
        PathEscapeError as PathEscapeError,
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
    from vally.models import (
        AssistantMessageEvent as AssistantMessageEvent,
        Constraints as Constraints,
        EndReason as EndReason,
        EnvironmentConfig as EnvironmentConfig,
        ErrorData as ErrorData,
        ErrorEvent as ErrorEvent,
        EvalConfig as EvalConfig,
        EvalSpec as EvalSpec,
        ExperimentBlock as ExperimentBlock,
        FileEntry as FileEntry,
        GraderConfig as GraderConfig,
        GradeResult as GradeResult,
        GraderResult as GraderResult,
        McpServerConfig as McpServerConfig,
        MessageData as MessageData,
        ReasoningEvent as ReasoningEvent,
        RunSummaryRecord as RunSummaryRecord,
        SkillActivationData as SkillActivationData,
        SkillActivationEvent as SkillActivationEvent,
        Stimulus as Stimulus,
        TokenUsageData as TokenUsageData,
        TokenUsageEvent as TokenUsageEvent,
        ToolCallData as ToolCallData,
        ToolCallEvent as ToolCallEvent,
        ToolResultData as ToolResultData,
        ToolResultEvent as ToolResultEvent,
        Trajectory as Trajectory,
        TrajectoryEvent as TrajectoryEvent,
        TrajectoryMetadata as TrajectoryMetadata,
        TrajectoryMetrics as TrajectoryMetrics,
        TrajectoryRecorder as TrajectoryRecorder,
        TrialError as TrialError,
        TrialResultRecord as TrialResultRecord,
        Turn as Turn,
        TurnData as TurnData,
        TurnEndEvent as TurnEndEvent,
        TurnStartEvent as TurnStartEvent,
        UserMessageEvent as UserMessageEvent,
        compute_metrics as compute_metrics,
        last_assistant_text as last_assistant_text,
        utc_now as utc_now,
    )
    from vally.models.durations import (
        Duration as Duration,
        format_duration as format_duration,
        parse_duration as parse_duration,
    )
    from vally.specs.loading import (
        load_eval_file as load_eval_file,
    )
    from vally.specs.skills import (
        SkillInfo as SkillInfo,
        read_skill as read_skill,
    )
