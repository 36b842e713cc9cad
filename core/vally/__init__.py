"""vally: evaluate AI agents.

This module is the public API for plugin authors and library users. Import from here
(``from vally import BaseGrader, GraderMetadata, hookimpl``), never from pluggy.
Names are resolved lazily so that ``vally --help`` stays fast.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
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
    "MissingExecutorError": "vally.errors",
    "TrialTimeoutError": "vally.errors",
    # metadata
    "ExecutorMetadata": "vally.contracts.metadata",
    "GraderBehavior": "vally.contracts.metadata",
    "GraderMetadata": "vally.contracts.metadata",
    "PluginMetadata": "vally.contracts.metadata",
    "ReporterMetadata": "vally.contracts.metadata",
    # hooks and registration
    "hookimpl": "vally.contracts.hookspecs",
    "KindRegistrar": "vally.plugins.registrar",
    "Registrar": "vally.plugins.registrar",
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
    "Exporter": "vally.contracts.protocols",
    "LoadedEval": "vally.contracts.protocols",
    "ShardStrategy": "vally.contracts.protocols",
    "Runner": "vally.contracts.protocols",
    "LLMGate": "vally.contracts.protocols",
    "TrialDispatch": "vally.contracts.protocols",
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
    "safe_name": "vally.engine.rundir",
    "find_trial_dir": "vally.engine.rundir",
    # the layout of a run folder, for readers of runs (the history store's ingest)
    "trial_relpath": "vally.engine.rundir",
    "METADATA_FILE": "vally.engine.rundir",
    "EVENTS_FILE": "vally.engine.rundir",
    "ARTIFACTS_DIR": "vally.engine.rundir",
    # bounded parsing of untrusted JSON
    "loads_bounded": "vally.models.jsontext",
    "JsonTooDeepError": "vally.models.jsontext",
    "order_records": "vally.engine.shards",
    "is_errored": "vally.engine.scoring",
    "is_graded": "vally.engine.scoring",
    # reading and writing run folders, for packages that compare runs (vally_compare)
    "SUMMARY_FILE": "vally.engine.rundir",
    "results_file": "vally.engine.rundir",
    "iter_records": "vally.engine.rundir",
    "reading_results": "vally.engine.rundir",
    "iter_raw_json_lines": "vally.engine.rundir",
    "output_errors": "vally.engine.rundir",
    "write_text_atomic": "vally.engine.rundir",
    "case_fingerprint": "vally.models.fingerprint",
    "suite_fingerprint": "vally.models.fingerprint",
    # promotion rules (the experiment file's promotion: section, vally compare --rules)
    "PromotionRules": "vally.models.promotion",
    "NoRegressedCases": "vally.models.promotion",
    "NoMoreFailed": "vally.models.promotion",
    "Improves": "vally.models.promotion",
    "NonInferior": "vally.models.promotion",
    "WinRate": "vally.models.promotion",
    "NoMissing": "vally.models.promotion",
    "SameSuite": "vally.models.promotion",
    # YAML files with file:line:column errors, and specs and projects found on disk
    "SourceLocation": "vally.errors",
    "load_yaml": "vally.specs.yamlio",
    "validate_model": "vally.specs.yamlio",
    "find_project": "vally.specs.loading",
    "parse_params": "vally.specs.params",
    # LLM judges outside a run: the provider, the judge cache and what judging cost
    "provider_config_from_settings": "vally.engine.llm",
    "is_pairwise": "vally.plugins.capabilities",
    "CachedJudge": "vally.engine.judge_cache",
    "JudgeCache": "vally.engine.judge_cache",
    "JudgeSpend": "vally.engine.judge_cache",
    "cache_root": "vally.engine.judge_cache",
    "bypass_cache": "vally.engine.judge_cache",
    "PriceTable": "vally.models.pricing",
    # experiment hooks (hook plugins, entry-point group vally.hooks)
    "FinishedExperiment": "vally.tools.experiment_hooks",
    "ExperimentGate": "vally.tools.experiment_hooks",
    "PlannedTrial": "vally.engine.planner",
    "model_label": "vally.engine.planner",
    # command extensions (entry-point group vally.cli)
    "command_group": "vally.cli.common",
    "user_errors": "vally.cli.common",
    # the run API, for Python scripts and notebooks
    "EvalRequest": "vally.engine.evals",
    "run_eval": "vally.engine.evals",
    "ExperimentRequest": "vally.engine.experiments",
    "run_experiment": "vally.engine.experiments",
    "RunResult": "vally.engine.runner",
    "RunRequest": "vally.engine.run",
    "PreparedRun": "vally.engine.run",
    "prepare_run": "vally.engine.run",
    "ReporterChoice": "vally.engine.run",
    "BackendChoice": "vally.engine.run",
    "RunnerChoice": "vally.engine.run",
    "TrialJob": "vally.engine.remote",
    "TrialOutcome": "vally.engine.remote",
    "run_trial_job": "vally.engine.remote",
    "SpecArchive": "vally.engine.spec_files",
    "PlanInput": "vally.engine.planner",
    "PlanOptions": "vally.engine.planner",
    "Session": "vally.plugins.session",
    # skills
    "SkillInfo": "vally.specs.skills",
    "read_skill": "vally.specs.skills",
}

_MODEL_NAMES = (
    "AssistantMessageEvent Constraints EndReason EnvironmentConfig ErrorData ErrorEvent "
    "EvalConfig EvalSpec ExperimentBlock FileEntry GradeResult GraderConfig GraderResult "
    "LLMSettings McpServerConfig MessageData ReasoningEvent RunSummaryRecord SkillActivationData "
    "SkillActivationEvent Stimulus TokenUsageData TokenUsageEvent ToolCallData "
    "ToolCallEvent ToolResultData ToolResultEvent Trajectory TrajectoryEvent "
    "TrajectoryMetadata TrajectoryMetrics TrajectoryRecorder TrialError "
    "TrialResources TrialResultRecord Turn TurnData TurnEndEvent TurnStartEvent UserMessageEvent "
    "compute_metrics last_assistant_text utc_now"
).split()
_EXPORTS.update({name: "vally.models" for name in _MODEL_NAMES})

__all__ = ["__version__", "lazy_attributes", *sorted(_EXPORTS)]


def lazy_attributes(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` that import each exported name from its
    module on first use (``exports`` maps name -> module), so importing the package stays
    cheap. Use as ``__getattr__, __dir__ = lazy_attributes(__name__, EXPORTS)``."""
    namespace = sys.modules[package].__dict__

    def get(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def names() -> list[str]:
        return sorted({*exports, *namespace.get("__all__", ())})

    return get, names


__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)


if TYPE_CHECKING:  # pragma: no cover - static re-exports for type checkers
    from vally.cli.common import (
        command_group as command_group,
        user_errors as user_errors,
    )
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
        ExecutorMetadata as ExecutorMetadata,
        GraderBehavior as GraderBehavior,
        GraderMetadata as GraderMetadata,
        PluginMetadata as PluginMetadata,
        ReporterMetadata as ReporterMetadata,
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
        Exporter as Exporter,
        GradeContext as GradeContext,
        Grader as Grader,
        JudgeSettings as JudgeSettings,
        LLMGate as LLMGate,
        LLMProvider as LLMProvider,
        LoadedEval as LoadedEval,
        PairwiseContext as PairwiseContext,
        PairwiseJudge as PairwiseJudge,
        PairwiseVerdict as PairwiseVerdict,
        Process as Process,
        Runner as Runner,
        Sandbox as Sandbox,
        ShardStrategy as ShardStrategy,
        SkillRef as SkillRef,
        ToolCall as ToolCall,
        ToolSpec as ToolSpec,
        TrialContext as TrialContext,
        TrialDispatch as TrialDispatch,
        TrialKey as TrialKey,
    )
    from vally.engine.evals import (
        EvalRequest as EvalRequest,
        run_eval as run_eval,
    )
    from vally.engine.experiments import (
        ExperimentRequest as ExperimentRequest,
        run_experiment as run_experiment,
    )
    from vally.engine.judge_cache import (
        CachedJudge as CachedJudge,
        JudgeCache as JudgeCache,
        JudgeSpend as JudgeSpend,
        bypass_cache as bypass_cache,
        cache_root as cache_root,
    )
    from vally.engine.llm import (
        provider_config_from_settings as provider_config_from_settings,
    )
    from vally.engine.planner import (
        PlanInput as PlanInput,
        PlannedTrial as PlannedTrial,
        PlanOptions as PlanOptions,
        model_label as model_label,
    )
    from vally.engine.remote import (
        TrialJob as TrialJob,
        TrialOutcome as TrialOutcome,
        run_trial_job as run_trial_job,
    )
    from vally.engine.run import (
        BackendChoice as BackendChoice,
        PreparedRun as PreparedRun,
        ReporterChoice as ReporterChoice,
        RunnerChoice as RunnerChoice,
        RunRequest as RunRequest,
        prepare_run as prepare_run,
    )
    from vally.engine.rundir import (
        ARTIFACTS_DIR as ARTIFACTS_DIR,
        EVENTS_FILE as EVENTS_FILE,
        METADATA_FILE as METADATA_FILE,
        SUMMARY_FILE as SUMMARY_FILE,
        find_trial_dir as find_trial_dir,
        iter_raw_json_lines as iter_raw_json_lines,
        iter_records as iter_records,
        output_errors as output_errors,
        reading_results as reading_results,
        results_file as results_file,
        safe_name as safe_name,
        trial_relpath as trial_relpath,
        write_text_atomic as write_text_atomic,
    )
    from vally.engine.runner import (
        RunResult as RunResult,
    )
    from vally.engine.scoring import (
        is_errored as is_errored,
        is_graded as is_graded,
        pass_at_k as pass_at_k,
    )
    from vally.engine.shards import (
        order_records as order_records,
    )
    from vally.engine.spec_files import SpecArchive as SpecArchive
    from vally.errors import (
        BackendError as BackendError,
        CleanupError as CleanupError,
        ConfigError as ConfigError,
        ExecutionError as ExecutionError,
        GradingError as GradingError,
        LLMError as LLMError,
        MissingExecutorError as MissingExecutorError,
        OutputError as OutputError,
        PathEscapeError as PathEscapeError,
        PluginConflictError as PluginConflictError,
        PluginError as PluginError,
        PluginLoadError as PluginLoadError,
        PluginNotFoundError as PluginNotFoundError,
        PluginValidationError as PluginValidationError,
        SchemaError as SchemaError,
        SetupError as SetupError,
        SourceLocation as SourceLocation,
        TrialTimeoutError as TrialTimeoutError,
        UnsupportedError as UnsupportedError,
        VallyError as VallyError,
    )
    from vally.models import *  # every model name (see _MODEL_NAMES)
    from vally.models.durations import (
        Duration as Duration,
        format_duration as format_duration,
        parse_duration as parse_duration,
    )
    from vally.models.fingerprint import (
        case_fingerprint as case_fingerprint,
        suite_fingerprint as suite_fingerprint,
    )
    from vally.models.jsontext import (
        JsonTooDeepError as JsonTooDeepError,
        loads_bounded as loads_bounded,
    )
    from vally.models.pricing import PriceTable as PriceTable
    from vally.models.promotion import (
        Improves as Improves,
        NoMissing as NoMissing,
        NoMoreFailed as NoMoreFailed,
        NonInferior as NonInferior,
        NoRegressedCases as NoRegressedCases,
        PromotionRules as PromotionRules,
        SameSuite as SameSuite,
        WinRate as WinRate,
    )
    from vally.plugins.capabilities import is_pairwise as is_pairwise
    from vally.plugins.registrar import (
        KindRegistrar as KindRegistrar,
        Registrar as Registrar,
    )
    from vally.plugins.session import (
        Session as Session,
    )
    from vally.specs.loading import (
        find_project as find_project,
        load_eval_file as load_eval_file,
    )
    from vally.specs.params import parse_params as parse_params
    from vally.specs.skills import (
        SkillInfo as SkillInfo,
        read_skill as read_skill,
    )
    from vally.specs.yamlio import (
        load_yaml as load_yaml,
        validate_model as validate_model,
    )
    from vally.tools.experiment_hooks import (
        ExperimentGate as ExperimentGate,
        FinishedExperiment as FinishedExperiment,
    )
