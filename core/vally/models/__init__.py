"""vally's data models: what users write (specs) and what vally writes (records); each name
of the ``if TYPE_CHECKING:`` block is imported on first use, so a run loads only its own."""

import sys
from typing import TYPE_CHECKING

# The root's helper, with no import statement that the layer contracts would read as this
# layer importing everything the root re-exports for type checkers.
__getattr__, __dir__ = sys.modules["vally"].lazy_attributes(__name__)
if TYPE_CHECKING:  # pragma: no cover - static re-exports for type checkers
    from vally.models.base import RecordModel as RecordModel, SpecModel as SpecModel
    from vally.models.experiment import (
        ExperimentFile as ExperimentFile,
        MatrixAxis as MatrixAxis,
        VariantOverride as VariantOverride,
    )
    from vally.models.facts import USAGE_FIELDS as USAGE_FIELDS, TrialFacts as TrialFacts
    from vally.models.project import (
        LLMSettings as LLMSettings,
        PathsConfig as PathsConfig,
        PluginsConfig as PluginsConfig,
        ProjectConfig as ProjectConfig,
        ProjectDefaults as ProjectDefaults,
        SuiteConfig as SuiteConfig,
    )
    from vally.models.records import (
        ExperimentBlock as ExperimentBlock,
        GradeResult as GradeResult,
        GraderIdentity as GraderIdentity,
        GraderResult as GraderResult,
        MultiTrialMetrics as MultiTrialMetrics,
        OffloadedText as OffloadedText,
        RunSummaryRecord as RunSummaryRecord,
        StimulusSummary as StimulusSummary,
        TargetIdentity as TargetIdentity,
        TrialError as TrialError,
        TrialResultRecord as TrialResultRecord,
    )
    from vally.models.spec import (
        Constraints as Constraints,
        EnvironmentConfig as EnvironmentConfig,
        EvalConfig as EvalConfig,
        EvalSpec as EvalSpec,
        ExecutorRef as ExecutorRef,
        FileEntry as FileEntry,
        GitConfig as GitConfig,
        GraderConfig as GraderConfig,
        McpServerConfig as McpServerConfig,
        ScoringConfig as ScoringConfig,
        Stimulus as Stimulus,
        TrialResources as TrialResources,
        Turn as Turn,
    )
    from vally.models.trajectory import (
        AssistantMessageEvent as AssistantMessageEvent,
        EndReason as EndReason,
        ErrorData as ErrorData,
        ErrorEvent as ErrorEvent,
        MessageData as MessageData,
        ReasoningEvent as ReasoningEvent,
        SkillActivationData as SkillActivationData,
        SkillActivationEvent as SkillActivationEvent,
        TokenUsage as TokenUsage,
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
        TurnData as TurnData,
        TurnEndEvent as TurnEndEvent,
        TurnStartEvent as TurnStartEvent,
        UserMessageEvent as UserMessageEvent,
        compute_metrics as compute_metrics,
        last_assistant_text as last_assistant_text,
        utc_now as utc_now,
    )
