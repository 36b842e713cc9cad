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
    "LLMProvider": "vally.contracts.llm",
    "ChatMessage": "vally.contracts.llm",
    "ChatRequest": "vally.contracts.llm",
    "ChatResponse": "vally.contracts.llm",
    "ToolCall": "vally.contracts.llm",
    "ToolSpec": "vally.contracts.llm",
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
    "pass_at_k": "vally.engine.records.scoring",
    "safe_name": "vally.engine.records.run_folder",
    "find_trial_dir": "vally.engine.records.run_folder",
    # the layout of a run folder, for readers of runs (the history store's ingest)
    "trial_relpath": "vally.engine.records.run_folder",
    "METADATA_FILE": "vally.engine.records.run_folder",
    "EVENTS_FILE": "vally.engine.records.run_folder",
    "ARTIFACTS_DIR": "vally.engine.records.run_folder",
    # bounded parsing of untrusted JSON
    "loads_bounded": "vally.models.jsontext",
    "JsonTooDeepError": "vally.models.jsontext",
    "order_records": "vally.engine.shards.validation",
    # reading a finished run back, for scripts and notebooks
    "read_run": "vally.engine.records.reading",
    "RunRecords": "vally.engine.records.reading",
    "is_errored": "vally.engine.records.scoring",
    "is_graded": "vally.engine.records.scoring",
    # reading and writing run folders, for packages that compare runs (vally_compare)
    "SUMMARY_FILE": "vally.engine.records.run_folder",
    "results_file": "vally.engine.records.run_folder",
    "iter_records": "vally.engine.records.run_folder",
    "reading_results": "vally.engine.records.run_folder",
    "iter_raw_json_lines": "vally.engine.records.run_folder",
    "output_errors": "vally.engine.records.run_folder",
    "write_text_atomic": "vally.engine.records.run_folder",
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
    "validate_model": "vally.specs.schema_errors",
    "find_project": "vally.specs.loading",
    "parse_params": "vally.specs.params",
    # LLM judges outside a run: the provider, the judge cache and what judging cost
    "provider_config_from_settings": "vally.engine.trials.llm_config",
    "is_pairwise": "vally.plugins.capabilities",
    "CachedJudge": "vally.engine.trials.judge_cache",
    "JudgeCache": "vally.engine.trials.judge_cache",
    "JudgeSpend": "vally.engine.trials.judge_cache",
    "cache_root": "vally.engine.trials.judge_cache",
    "bypass_cache": "vally.engine.trials.judge_cache",
    "PriceTable": "vally.models.pricing",
    # experiment hooks (hook plugins, entry-point group vally.hooks)
    "FinishedExperiment": "vally.engine.experiment_hooks",
    "ExperimentGate": "vally.engine.experiment_hooks",
    "PlannedTrial": "vally.engine.planning.plan",
    "model_label": "vally.engine.records.run_folder",
    # command extensions (entry-point group vally.cli)
    "command_group": "vally.cli.common",
    "chosen_output": "vally.cli.common",
    "user_errors": "vally.cli.common",
    "source_excerpt": "vally.cli.common",
    # the run API, for Python scripts and notebooks
    "EvalRequest": "vally.engine.evals",
    "run_eval": "vally.engine.evals",
    "ExperimentRequest": "vally.engine.experiments",
    "run_experiment": "vally.engine.experiments",
    "RunResult": "vally.engine.trials.run_engine",
    "RunRequest": "vally.engine.run",
    "PreparedRun": "vally.engine.run",
    "prepare_run": "vally.engine.run",
    "ReporterChoice": "vally.engine.trials.components",
    "BackendChoice": "vally.engine.trials.components",
    "RunnerChoice": "vally.engine.trials.components",
    "TrialJob": "vally.engine.trials.remote",
    "TrialOutcome": "vally.engine.trials.remote",
    "run_trial_job": "vally.engine.trials.remote",
    "SpecArchive": "vally.engine.planning.spec_files",
    "PlanInput": "vally.engine.planning.plan",
    "PlanOptions": "vally.engine.planning.plan",
    "Session": "vally.plugins.session",
    # the judge cache: what a judge reading evidence through tools keys its answers on
    "judging_evidence": "vally.engine.trials.judge_cache",
    # skills
    "SkillInfo": "vally.specs.skills",
    "read_skill": "vally.specs.skills",
    "SKILL_FILE": "vally.specs.skills",
    "find_skills": "vally.specs.skills",
    # projects, eval files and params, as the commands find and read them
    "discover_eval_files": "vally.specs.loading",
    "eval_files_in": "vally.specs.loading",
    "resolve_environment": "vally.specs.environments",
    "parse_key_values": "vally.specs.params",
    "load_evals": "vally.engine.trials.components",
    # checking spec files where they are written (vally lint, vally schema)
    "SpecSchemaError": "vally.specs.schema_errors",
    "Positions": "vally.specs.yamlio",
    "schema_issues": "vally.specs.schema_errors",
    "format_path": "vally.specs.yamlio",
    "did_you_mean": "vally.specs.schema_errors",
    "load_eval_with_positions": "vally.specs.loading",
    "load_valid_parts": "vally.specs.partial",
    "source_root": "vally.specs.environments",
    "check_paths": "vally.specs.environments",
    "CONFIGURABLE_KINDS": "vally.models.project",
    "ENTRY_POINT_GROUPS": "vally.plugins.groups",
    "needs_llm": "vally.plugins.capabilities",
    "needs_workspace": "vally.plugins.capabilities",
    # grading saved trials again (vally grade)
    "grade_trial": "vally.engine.trials.grading",
    "merge_constraints": "vally.engine.planning.planner",
    "judge_settings": "vally.engine.planning.planner",
    "eval_name": "vally.engine.planning.planner",
    "restore_texts": "vally.engine.records.offload",
    "record_depth": "vally.models.limits",
    "CONSOLE_REPORTER": "vally.plugins.defaults",
    "RESULTS_REPORTER": "vally.plugins.defaults",
}

_MODEL_NAMES = (
    "AssistantMessageEvent Constraints EndReason EnvironmentConfig ErrorData ErrorEvent "
    "EvalConfig EvalSpec ExperimentBlock ExperimentFile FileEntry GradeResult GraderConfig "
    "GraderResult LLMSettings McpServerConfig MessageData ProjectConfig ReasoningEvent "
    "RunSummaryRecord SkillActivationData SkillActivationEvent Stimulus TokenUsageData "
    "TokenUsageEvent ToolCallData ToolCallEvent ToolResultData ToolResultEvent Trajectory "
    "TrajectoryEvent TrajectoryMetadata TrajectoryMetrics TrajectoryRecorder TrialError "
    "TrialResources TrialResultRecord Turn TurnData TurnEndEvent TurnStartEvent "
    "UserMessageEvent compute_metrics last_assistant_text utc_now"
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
        chosen_output as chosen_output,
        command_group as command_group,
        source_excerpt as source_excerpt,
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
    from vally.contracts.events import RunInfo as RunInfo, RunOutcome as RunOutcome
    from vally.contracts.hookspecs import hookimpl as hookimpl
    from vally.contracts.llm import (
        ChatMessage as ChatMessage,
        ChatRequest as ChatRequest,
        ChatResponse as ChatResponse,
        LLMProvider as LLMProvider,
        ToolCall as ToolCall,
        ToolSpec as ToolSpec,
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
        EvalProvider as EvalProvider,
        ExecResult as ExecResult,
        Executor as Executor,
        ExecutorOptions as ExecutorOptions,
        Exporter as Exporter,
        GradeContext as GradeContext,
        Grader as Grader,
        JudgeSettings as JudgeSettings,
        LLMGate as LLMGate,
        LoadedEval as LoadedEval,
        PairwiseContext as PairwiseContext,
        PairwiseJudge as PairwiseJudge,
        PairwiseVerdict as PairwiseVerdict,
        Process as Process,
        Runner as Runner,
        Sandbox as Sandbox,
        ShardStrategy as ShardStrategy,
        SkillRef as SkillRef,
        TrialContext as TrialContext,
        TrialDispatch as TrialDispatch,
        TrialKey as TrialKey,
    )
    from vally.engine.evals import EvalRequest as EvalRequest, run_eval as run_eval
    from vally.engine.experiment_hooks import (
        ExperimentGate as ExperimentGate,
        FinishedExperiment as FinishedExperiment,
    )
    from vally.engine.experiments import (
        ExperimentRequest as ExperimentRequest,
        run_experiment as run_experiment,
    )
    from vally.engine.planning.plan import (
        PlanInput as PlanInput,
        PlannedTrial as PlannedTrial,
        PlanOptions as PlanOptions,
    )
    from vally.engine.planning.planner import (
        eval_name as eval_name,
        judge_settings as judge_settings,
        merge_constraints as merge_constraints,
    )
    from vally.engine.planning.spec_files import SpecArchive as SpecArchive
    from vally.engine.records.offload import restore_texts as restore_texts
    from vally.engine.records.reading import RunRecords as RunRecords, read_run as read_run
    from vally.engine.records.run_folder import (
        ARTIFACTS_DIR as ARTIFACTS_DIR,
        EVENTS_FILE as EVENTS_FILE,
        METADATA_FILE as METADATA_FILE,
        SUMMARY_FILE as SUMMARY_FILE,
        find_trial_dir as find_trial_dir,
        iter_raw_json_lines as iter_raw_json_lines,
        iter_records as iter_records,
        model_label as model_label,
        output_errors as output_errors,
        reading_results as reading_results,
        results_file as results_file,
        safe_name as safe_name,
        trial_relpath as trial_relpath,
        write_text_atomic as write_text_atomic,
    )
    from vally.engine.records.scoring import (
        is_errored as is_errored,
        is_graded as is_graded,
        pass_at_k as pass_at_k,
    )
    from vally.engine.run import (
        PreparedRun as PreparedRun,
        RunRequest as RunRequest,
        prepare_run as prepare_run,
    )
    from vally.engine.shards.validation import order_records as order_records
    from vally.engine.trials.components import (
        BackendChoice as BackendChoice,
        ReporterChoice as ReporterChoice,
        RunnerChoice as RunnerChoice,
        load_evals as load_evals,
    )
    from vally.engine.trials.grading import grade_trial as grade_trial
    from vally.engine.trials.judge_cache import (
        CachedJudge as CachedJudge,
        JudgeCache as JudgeCache,
        JudgeSpend as JudgeSpend,
        bypass_cache as bypass_cache,
        cache_root as cache_root,
        judging_evidence as judging_evidence,
    )
    from vally.engine.trials.llm_config import (
        provider_config_from_settings as provider_config_from_settings,
    )
    from vally.engine.trials.remote import (
        TrialJob as TrialJob,
        TrialOutcome as TrialOutcome,
        run_trial_job as run_trial_job,
    )
    from vally.engine.trials.run_engine import RunResult as RunResult
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
    from vally.models.limits import record_depth as record_depth
    from vally.models.pricing import PriceTable as PriceTable
    from vally.models.project import CONFIGURABLE_KINDS as CONFIGURABLE_KINDS
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
    from vally.plugins.capabilities import (
        is_pairwise as is_pairwise,
        needs_llm as needs_llm,
        needs_workspace as needs_workspace,
    )
    from vally.plugins.defaults import (
        CONSOLE_REPORTER as CONSOLE_REPORTER,
        RESULTS_REPORTER as RESULTS_REPORTER,
    )
    from vally.plugins.groups import ENTRY_POINT_GROUPS as ENTRY_POINT_GROUPS
    from vally.plugins.registrar import KindRegistrar as KindRegistrar, Registrar as Registrar
    from vally.plugins.session import Session as Session
    from vally.specs.environments import (
        check_paths as check_paths,
        resolve_environment as resolve_environment,
        source_root as source_root,
    )
    from vally.specs.loading import (
        discover_eval_files as discover_eval_files,
        eval_files_in as eval_files_in,
        find_project as find_project,
        load_eval_file as load_eval_file,
        load_eval_with_positions as load_eval_with_positions,
    )
    from vally.specs.params import (
        parse_key_values as parse_key_values,
        parse_params as parse_params,
    )
    from vally.specs.partial import load_valid_parts as load_valid_parts
    from vally.specs.schema_errors import (
        SpecSchemaError as SpecSchemaError,
        did_you_mean as did_you_mean,
        schema_issues as schema_issues,
        validate_model as validate_model,
    )
    from vally.specs.skills import (
        SKILL_FILE as SKILL_FILE,
        SkillInfo as SkillInfo,
        find_skills as find_skills,
        read_skill as read_skill,
    )
    from vally.specs.yamlio import (
        Positions as Positions,
        format_path as format_path,
        load_yaml as load_yaml,
    )
