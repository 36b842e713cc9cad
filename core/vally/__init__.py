"""vally: evaluate AI agents.

This module is the public API for plugin authors and library users. Import from here
(``from vally import BaseGrader, GraderMetadata, hookimpl``), never from pluggy.
Names are resolved lazily so that ``vally --help`` stays fast: the ``if TYPE_CHECKING:``
block at the end of this file is the one list of the public names, read by type checkers
as imports and, on first use, by :func:`lazy_attributes` as the map from each name to its
module.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vally._version import __version__ as __version__

_IMPORT = re.compile(r"^\s*from ([\w.]+) import (\(|\*|.+)$")
_NAME = re.compile(r"^\s*(\w+)(?: as (\w+))?,?$")
_ALIAS = re.compile(r"^\s*(\w+) = (\w+)$")


def type_checking_exports(source: Path) -> dict[str, str]:
    """Each name the ``if TYPE_CHECKING:`` block of ``source`` imports (``from m import a as
    a``, one per line or in parentheses; ``b = _a`` re-exports the private import ``_a`` as
    ``b``; ``from m import *`` the names of ``m``'s own block), mapped to
    ``module`` (the name is the module's attribute), ``module:attribute`` (exported under
    another name) or ``module:submodule`` (a module). Names starting with ``_`` are left out.

    Raises:
        ValueError: ``source`` has no ``if TYPE_CHECKING:`` block.
    """
    text = source.read_text(encoding="utf-8")
    block = text[text.index("\nif TYPE_CHECKING:") + 1 :].splitlines()[1:]
    ended = next((i for i, line in enumerate(block) if line[:1] not in ("", " ", "#")), None)
    found = _imported(block[:ended])
    return {name: where for name, where in found.items() if not name.startswith("_")}


def _imported(lines: list[str]) -> dict[str, str]:
    """What the import statements among ``lines`` bind (see :func:`type_checking_exports`)."""
    found: dict[str, str] = {}
    module: str | None = None
    for raw in lines:
        line = raw.split("#", 1)[0].rstrip()
        if module is not None:  # inside ``from m import (``
            if line.strip() == ")":
                module = None
            elif (entry := _NAME.match(line)) is not None:
                found[entry[2] or entry[1]] = _target(module, entry[1], entry[2])
        elif (head := _IMPORT.match(line)) is not None:
            if head[2] == "(":
                module = head[1]
            elif head[2] == "*":
                origin = importlib.util.find_spec(head[1])
                assert origin is not None and origin.origin is not None, head[1]
                found.update(type_checking_exports(Path(origin.origin)))
            else:
                for part in head[2].split(","):
                    name, _, alias = part.strip().partition(" as ")
                    found[alias or name] = _target(head[1], name, alias or None)
        elif (alias := _ALIAS.match(line)) is not None and alias[2] in found:
            found[alias[1]] = found.pop(alias[2])
    return found


def _target(module: str, name: str, alias: str | None) -> str:
    return module if alias in (None, name) else f"{module}:{name}"


def lazy_attributes(
    package: str, exports: Mapping[str, str] | None = None
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` that import each exported name from its
    module on first use, so importing the package stays cheap. ``exports`` maps name ->
    module, or -> ``module:attribute`` for a name exported under another name; without it,
    the map is read, on first use, from the ``if TYPE_CHECKING:`` block of the package's
    ``__init__.py`` (see :func:`type_checking_exports`), so the names are written once. Use
    as ``__getattr__, __dir__ = lazy_attributes(__name__)``."""
    namespace = sys.modules[package].__dict__
    table: dict[str, str] = dict(exports) if exports is not None else {}

    def known() -> dict[str, str]:
        if exports is None and not table:
            table.update(type_checking_exports(Path(namespace["__file__"])))
        return table

    def get(name: str) -> Any:
        if name == "__all__":
            value: Any = names()
        else:
            target = known().get(name)
            if target is None:
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            module, _, attribute = target.partition(":")
            value = getattr(importlib.import_module(module), attribute or name)
        namespace[name] = value
        return value

    def names() -> list[str]:
        return sorted({*known(), *namespace.get("_EAGER_EXPORTS", ())})

    return get, names


_EAGER_EXPORTS = ("__version__", "lazy_attributes", "type_checking_exports")

__getattr__, __dir__ = lazy_attributes(__name__)


if TYPE_CHECKING:  # pragma: no cover - static re-exports for type checkers
    from vally.cli import options as cli_options
    from vally.cli.common import (
        EXIT_BUDGET as EXIT_BUDGET,
        EXIT_FAILURE as EXIT_FAILURE,
        EXIT_INTERRUPTED as EXIT_INTERRUPTED,
        EXIT_OK as EXIT_OK,
        chosen_output as chosen_output,
        command_group as command_group,
        report_judge_cache as report_judge_cache,
        report_observer_failures as report_observer_failures,
        report_tracebacks as report_tracebacks,
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
    from vally.contracts.events import (
        FactCounter as FactCounter,
        RecordCounter as RecordCounter,
        RunInfo as RunInfo,
        RunOutcome as RunOutcome,
    )
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
        PluginKind as PluginKind,
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
        ExperimentHooks as ExperimentHooks,
        FinishedExperiment as FinishedExperiment,
    )
    from vally.engine.experiments import (
        ExperimentSetup as ExperimentSetup,
        execute_experiment as execute_experiment,
        experiment_run_dir as experiment_run_dir,
        prepare_experiment as prepare_experiment,
        run_experiment as run_experiment,
    )
    from vally.engine.options import ExperimentRequest as ExperimentRequest
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
    from vally.engine.records.record_log import WrittenRecords as WrittenRecords
    from vally.engine.records.run_folder import (
        ARTIFACTS_DIR as ARTIFACTS_DIR,
        EVENTS_FILE as EVENTS_FILE,
        METADATA_FILE as METADATA_FILE,
        RESULTS_FILE as RESULTS_FILE,
        SUMMARY_FILE as SUMMARY_FILE,
        TRACE_CONTEXT_FILE as TRACE_CONTEXT_FILE,
        find_trial_dir as find_trial_dir,
        iter_raw_json_lines as iter_raw_json_lines,
        iter_records as iter_records,
        model_label as model_label,
        output_errors as output_errors,
        reading_results as reading_results,
        require_directory as require_directory,
        results_file as results_file,
        safe_name as safe_name,
        trial_relpath as trial_relpath,
        write_pieces_atomic as write_pieces_atomic,
        write_text_atomic as write_text_atomic,
    )
    from vally.engine.records.scoring import (
        is_errored as is_errored,
        is_graded as is_graded,
        pass_at_k as pass_at_k,
    )
    from vally.engine.records.tally import EvalTally as EvalTally, StimulusTally as StimulusTally
    from vally.engine.records.trial_facts import read_fact_lines as read_fact_lines
    from vally.engine.run import (
        PreparedRun as PreparedRun,
        RunRequest as RunRequest,
        prepare_run as prepare_run,
    )
    from vally.engine.shards.partition import (
        EXPERIMENT_MANIFEST_FILE as EXPERIMENT_MANIFEST_FILE,
        MANIFEST_FILE as MANIFEST_FILE,
        SNAPSHOT_FILE as SNAPSHOT_FILE,
        ShardValidationError as ShardValidationError,
        order_records as order_records,
        plan_digest as plan_digest,
        record_key_id as record_key_id,
        write_json_file as write_json_file,
    )
    from vally.engine.trials.components import (
        BackendChoice as BackendChoice,
        ReporterChoice as ReporterChoice,
        RunnerChoice as RunnerChoice,
        create_reporters as create_reporters,
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
    from vally.engine.trials.summaries import (
        PlanTallies as PlanTallies,
        VariantSummaries as VariantSummaries,
    )
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
    from vally.models import *  # every name vally.models imports
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
        loads as _loads,
        loads_bounded as loads_bounded,
    )
    from vally.models.limits import (
        json_depth_limit as json_depth_limit,
        record_depth as record_depth,
    )
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
        REPORT_REPORTER as REPORT_REPORTER,
        RESULTS_REPORTER as RESULTS_REPORTER,
        TRACE_REPORTER as TRACE_REPORTER,
    )
    from vally.plugins.groups import (
        ENTRY_POINT_GROUPS as ENTRY_POINT_GROUPS,
        REGISTRY_GROUPS as REGISTRY_GROUPS,
    )
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
        finish_eval as finish_eval,
        load_eval_file as load_eval_file,
        load_eval_with_positions as load_eval_with_positions,
        read_eval_data as read_eval_data,
    )
    from vally.specs.params import (
        parse_key_values as parse_key_values,
        parse_params as parse_params,
    )
    from vally.specs.schema_errors import (
        SpecSchemaError as SpecSchemaError,
        data_path as data_path,
        did_you_mean as did_you_mean,
        schema_issues as schema_issues,
        validate_model as validate_model,
    )
    from vally.specs.selection import absolute as _absolute, display_path as display_path
    from vally.specs.skills import (
        SKILL_FILE as SKILL_FILE,
        SkillInfo as SkillInfo,
        find_skills as find_skills,
        read_skill as read_skill,
    )
    from vally.specs.yamlio import (
        NodePosition as NodePosition,
        PathKey as PathKey,
        Positions as Positions,
        format_path as format_path,
        load_yaml as load_yaml,
    )

    # Exported under another name than their module's (see lazy_attributes).
    loads_json = _loads
    absolute_path = _absolute
