"""Descriptions of the fields of vally's files and records, for the reference pages and
the JSON Schema of ``vally schema``.

A field's description is its ``Field(description=...)``, else its entry in the
``Attributes:`` section of its model's docstring, else :data:`FIELD_NOTES` (for models that
keep their docstrings short); :func:`field_description` applies that order.
"""

from __future__ import annotations

import inspect
import re

from pydantic import BaseModel

FIELD_NOTES: dict[str, str] = {
    # eval.yaml
    "EvalSpec.name": "The eval's name (default: the file's folder or stem).",
    "EvalSpec.description": "One line shown in reports.",
    "EvalSpec.version": "Free-form version of the eval.",
    "EvalSpec.type": "`capability` (can the agent do it) or `regression` (must keep passing).",
    "EvalSpec.tags": "Tags of every stimulus (a stimulus's own tags win key by key); "
    "filtered with `--tag`.",
    "EvalSpec.environment": "The root environment merged into every stimulus's; a string "
    "names an environment of `.vally.yaml`.",
    "EvalSpec.defaults": "Execution settings (`config` is accepted as the older name).",
    "EvalSpec.constraints": "Limits applied to every stimulus.",
    "EvalSpec.graders": "Graders applied to every stimulus.",
    "EvalSpec.stimuli": "The test cases; at least one.",
    "EvalSpec.scoring": "Weights and pass threshold.",
    "EvalSpec.params": "Param defaults for `${NAME}` references in this file.",
    "EnvironmentConfig.skills": "Skill folders (holding `SKILL.md`) staged for the agent.",
    "EnvironmentConfig.files": "Files or folders copied into the workspace before the agent "
    "starts.",
    "EnvironmentConfig.commands": "Shell commands run in the workspace before the agent.",
    "EnvironmentConfig.git": "Use a git worktree as the workspace.",
    "EnvironmentConfig.mcpServers": "MCP servers started for the agent, by name (`null` "
    "deletes an inherited one).",
    "EnvironmentConfig.env": "Environment variables for the agent and the setup commands.",
    "EnvironmentConfig.public_env": "Names of variables whose values are not secret: kept in "
    "outputs (every other passed variable is scrubbed, see docs/backends.md).",
    "FileEntry.src": "Host path, relative to the eval file.",
    "FileEntry.dest": "Workspace path (default: the name of `src`).",
    "GitConfig.type": "Only `worktree`.",
    "GitConfig.source": "The repository, relative to the eval file.",
    "GitConfig.ref": "Commit, branch or tag checked out (default: the current HEAD).",
    "McpServerConfig.type": "`stdio` (a command) or `http` (a URL).",
    "McpServerConfig.command": "Program of a `stdio` server.",
    "McpServerConfig.args": "Its arguments.",
    "McpServerConfig.env": "Extra environment variables of the server.",
    "McpServerConfig.cwd": "Working folder of the server, relative to the workspace.",
    "McpServerConfig.url": "URL of an `http` server.",
    "McpServerConfig.headers": "HTTP headers sent to an `http` server.",
    "McpServerConfig.timeout": "How long to wait for the server to start.",
    "McpServerConfig.tools": "Only these tools are offered (default: all).",
    "EvalConfig.runs": "Trials per stimulus; `0` lints without running, 2 or more gives "
    "pass@k and pass^k.",
    "EvalConfig.timeout": "Per-trial timeout with a unit (`30s`, `5m`); default 2m.",
    "EvalConfig.model": "Model for the executor; `--model` overrides it.",
    "EvalConfig.judge_model": "Default model of LLM-judge graders.",
    "EvalConfig.judge_reasoning_effort": "Reasoning effort of LLM-judge calls.",
    "EvalConfig.judge_provider": "LLM provider of judge calls.",
    "EvalConfig.judge_timeout": "Timeout of one judge call.",
    "EvalConfig.executor": "The executor: a name, or `{name, config}`.",
    "EvalConfig.reasoning_effort": "Passed to the model where supported.",
    "EvalConfig.max_agent_duration": "Wall-clock cap of the agent alone (setup and grading "
    "excluded).",
    "EvalConfig.resources": "What each trial reserves on its node with a distributed "
    "runner (`--runner ray`); `--runner-args` set explicitly win.",
    "ExecutorRef.name": "An executor name (`command`, `mock`, `chat-agent` or a plugin's).",
    "ExecutorRef.config": "The executor's options, validated by its `Config` model.",
    "Constraints.max_turns": "Stop the agent after this many turns.",
    "Constraints.max_tokens": "Stop the agent after this many tokens (input + output).",
    "Constraints.max_duration": "Stop the agent after this wall-clock time.",
    "Constraints.max_tool_calls": "Stop the agent after this many tool calls.",
    "Constraints.expect_tools": "Tools that must be called.",
    "Constraints.reject_tools": "Tools that must not be called.",
    "Constraints.expect_skills": "Skills that must be activated.",
    "Constraints.reject_skills": "Skills that must not be activated.",
    "GraderConfig.type": "The grader's name (a built-in or a plugin's).",
    "GraderConfig.config": "The grader's options, validated by its `Config` model.",
    "GraderConfig.name": "Display name in reports (default: the type).",
    "GraderConfig.turn": "Grade only this 0-based turn of a multi-turn stimulus.",
    "GraderConfig.required": "A failure fails the trial whatever the score.",
    "GraderConfig.timeout": "How long the grader may take (default 10m); past it the grader "
    "is stopped and errors, the run goes on.",
    "Stimulus.name": "Unique in the file; runs and comparisons pair trials by it.",
    "Stimulus.description": "Shown in reports.",
    "Stimulus.prompt": "The prompt (or use `turns`).",
    "Stimulus.turns": "Prompts sent in order in one agent session.",
    "Stimulus.environment": "Merged onto the eval's environment.",
    "Stimulus.graders": "The assertions of this stimulus.",
    "Stimulus.rubric": "Criteria for LLM judges.",
    "Stimulus.constraints": "Limits of this stimulus (over the eval's).",
    "Stimulus.tags": "Tags; override the eval's key by key.",
    "Stimulus.artifacts": "Workspace globs saved under the trial's `artifacts/` folder.",
    "Turn.prompt": "The prompt of this turn.",
    "ScoringConfig.weights": "Weight per grader type (missing: 1).",
    "ScoringConfig.threshold": "Pass threshold 0..1 of the weighted score (default: every "
    "grader must pass).",
    # experiment files
    "ExperimentFile.name": "The experiment's name.",
    "ExperimentFile.description": "Shown in reports.",
    "ExperimentFile.evals": "Eval files or globs, relative to this file.",
    "ExperimentFile.vary": "JSON pointers the variants may differ in; any other difference "
    "is reported as drift.",
    "ExperimentFile.baseline": "The variant the others are compared with (per axis for a matrix).",
    "ExperimentFile.variants": "Named patches of the evals' config.",
    "ExperimentFile.matrix": "Axes whose values combine into variants.",
    "ExperimentFile.execution": "Run settings (CLI flags override them).",
    "ExperimentFile.grader_plugins": "Grader plugin specifiers, relative to this file.",
    "ExperimentFile.executor_plugins": "Executor plugin specifiers.",
    "ExperimentFile.reporter_plugins": "Reporter plugin specifiers.",
    "ExperimentFile.eval_plugin": "Eval provider reading the eval files.",
    "VariantOverride.description": "Shown in reports.",
    "VariantOverride.overrides": "Patch of `/defaults` (`model: x` sets `/defaults/model`).",
    "VariantOverride.defaults": "Patch of the evals' `defaults`.",
    "VariantOverride.environment": "Patch of the evals' root `environment`.",
    "PluginsConfig.grader": "grader plugin specifiers (names, "
    "distributions, `module:Attr`, paths).",
    "PluginsConfig.executor": "executor plugin specifiers (names, "
    "distributions, `module:Attr`, paths).",
    "PluginsConfig.reporter": "reporter plugin specifiers (names, "
    "distributions, `module:Attr`, paths).",
    "PluginsConfig.backend": "backend plugin specifiers (names, "
    "distributions, `module:Attr`, paths).",
    "PluginsConfig.eval_provider": "eval provider plugin specifiers (names, "
    "distributions, `module:Attr`, paths).",
    "PluginsConfig.shard_strategy": "shard strategy plugin specifiers (names, "
    "distributions, `module:Attr`, paths).",
    "PluginsConfig.llm_provider": "llm provider plugin specifiers (names, "
    "distributions, `module:Attr`, paths).",
    "MatrixAxis.path": "The JSON pointer this axis sets.",
    "MatrixAxis.values": "Label -> value.",
    "ExecutionSettings.workers": "Trials run at once, across variants.",
    # .vally.yaml
    "ProjectConfig.paths": "Where skills, evals and results live.",
    "ProjectConfig.suites": "Named selections of evals (`--suite`).",
    "ProjectConfig.environments": "Named environments an eval can refer to by name.",
    "ProjectConfig.defaults": "Project-wide defaults.",
    "ProjectConfig.plugins": "Plugin specifiers loaded for the project, per kind.",
    "ProjectConfig.params": "Param values for `${NAME}` references.",
    "ProjectConfig.llm": "How to reach models (the LLM provider and its connection).",
    "ProjectConfig.plugin_config": "Config of reporters, eval providers and shard strategies "
    "selected by name, by kind and name: `{reporter: {csv: {path: trials.csv}}}`.",
    "PathsConfig.skills": "Folders searched for skills.",
    "PathsConfig.evals": "Folders searched for eval files.",
    "PathsConfig.results": "Parent folder of run folders (default `./vally-results`).",
    "PathsConfig.cache": "Folder of the judge cache (default `$XDG_CACHE_HOME/vally`, else "
    "`~/.cache/vally`); relative to the project.",
    "PathsConfig.evalFilenames": "File name patterns of eval files (globs allowed).",
    "SuiteConfig.description": "Shown by the CLI.",
    "SuiteConfig.evals": "Eval file globs.",
    "SuiteConfig.filter": "Tag filter: AND across keys, OR within a key.",
    "ProjectDefaults.backend": "Backend of every run (a name, or `{name, args}`).",
    "ProjectDefaults.eval_provider": "Eval provider of every run.",
    "ProjectDefaults.workers": "Parallel trials.",
    "ProjectDefaults.judge_model": "Judge model of `vally compare` when `--judge-model` is absent.",
    "BackendDefault.name": "Backend name or specifier.",
    "BackendDefault.args": "Backend arguments, as `--backend-args`.",
    "LLMSettings.provider": "LLM provider name.",
    "LLMSettings.base_url": "Server URL including `/v1` (default: `OPENAI_BASE_URL`, then "
    "OpenAI's).",
    "LLMSettings.api_key_env": "Name of the environment variable holding the API key.",
    "LLMSettings.timeout": "Time per model call (default 2m).",
    "LLMSettings.max_retries": "Retries of 429, 5xx, timeouts and connection errors.",
    "LLMSettings.max_concurrency": "Requests in flight at once.",
    "LLMSettings.headers": "Extra HTTP headers.",
    # results.jsonl
    "TrialResultRecord.type": "Always `trial-result`.",
    "TrialResultRecord.schema_version": "Version of this record format.",
    "TrialResultRecord.run_id": "The run (a UUID); every record of one run shares it.",
    "TrialResultRecord.eval_name": "The eval's name.",
    "TrialResultRecord.eval_file": "Path of the eval file (`null` when the trial did not "
    "come from a file).",
    "TrialResultRecord.stimulus_name": "The stimulus's name.",
    "TrialResultRecord.stimulus": "The stimulus as run (params resolved, environment "
    "merged), in eval.yaml form.",
    "TrialResultRecord.variant": "The experiment variant (`null` outside experiments).",
    "TrialResultRecord.case_hash": "Fingerprint of the case: the stimulus's prompt or turns, "
    "rubric, graders (the eval-level ones included), constraints, environment files and "
    "setup commands, not the target (executor, model, skills, MCP servers). Equal across "
    "the variants of an experiment and across models (`null` in records written before it "
    "existed).",
    "TrialResultRecord.model": "The model the executor was given (`null` when none).",
    "TrialResultRecord.trial_index": "0-based index of the trial among the stimulus's runs.",
    "TrialResultRecord.trial_id": "`[variant/]eval/stimulus/model/trial`, stable across "
    "runs of the same plan.",
    "TrialResultRecord.status": "`success` (the trial ran and was graded), `error` (an "
    "operational failure, see `error`) or `cancelled`.",
    "TrialResultRecord.error": "What went wrong when `status` is not `success`.",
    "TrialResultRecord.started_at": "When the trial started (ISO 8601, UTC).",
    "TrialResultRecord.completed_at": "When the trial ended (ISO 8601, UTC).",
    "TrialResultRecord.duration_ms": "Wall-clock time of the whole trial (setup, agent, "
    "grading, cleanup) in milliseconds.",
    "TrialResultRecord.tags": "The stimulus's tags (eval tags merged in).",
    "TrialResultRecord.grade_result": "The verdict (`null` when the trial did not get to grading).",
    "TrialResultRecord.trajectory": "What the agent did (`null` when the executor did not "
    "return one).",
    "TrialResultRecord.experiment": "Experiment provenance (`null` outside experiments).",
    "TrialResultRecord.offloaded": "Texts of `trajectory` cut to their first 64 Ki characters"
    " in this record, with where each whole text is (empty when none was cut).",
    "TrialError.phase": "The phase that failed: `plan`, `setup`, `execute`, `grade` or `cleanup`.",
    "TrialError.code": "The stable error code (`VALLY_...`).",
    "TrialError.message": "What happened.",
    "GradeResult.passed": "The trial's verdict.",
    "GradeResult.score": "Weighted mean of the grader scores, 0..1.",
    "GradeResult.threshold": "The pass threshold of `threshold` mode (`null` in the other modes).",
    "GradeResult.mode": "`threshold`, `binary` (every grader must pass) or `no-graders` "
    "(passes unless a constraint is violated).",
    "GradeResult.has_graders": "Whether any grader ran; trials without graders do not "
    "count towards pass rates.",
    "GradeResult.errored": "A grader failed operationally (its `status` is `error`); the "
    "trial counts as errored, not failed.",
    "GradeResult.details": "Every grader's result, in spec order.",
    "GradeResult.constraint_violations": "Constraints the trajectory broke (each one fails "
    "the trial).",
    "GraderResult.name": "Display name (the spec's `name`, else the type).",
    "GraderResult.type": "The grader type (`file-contains`, `prompt`, ...).",
    "GraderResult.passed": "Whether this grader passed.",
    "GraderResult.score": "0..1.",
    "GraderResult.evidence": "Why, in words (what was found or missing).",
    "GraderResult.status": "`success`, or `error` when the grader itself failed.",
    "GraderResult.required": "A failure fails the trial whatever the score.",
    "GraderResult.weight": "The weight in the trial score (`scoring.weights`).",
    "GraderResult.turn": "The 0-based turn graded (`null`: the whole trial).",
    "GraderResult.details": "Sub-results (e.g. one per matcher), same format.",
    "GraderResult.metadata": "Grader-specific facts (e.g. the judge's model and evidence reads).",
    "ExperimentBlock.run_id": "The experiment run.",
    "ExperimentBlock.experiment": "The experiment's name.",
    "ExperimentBlock.variant": "The variant this trial or summary belongs to.",
    "ExperimentBlock.eval_hash": "Hash of the eval as written (the same for every variant).",
    "ExperimentBlock.config_hash": "Hash of the eval with the variant applied.",
    "ExperimentBlock.baseline": "The baseline variant.",
    "ExperimentBlock.shard": "`i/n` when the run was one shard.",
    # run-summary.jsonl
    "RunSummaryRecord.type": "Always `run-summary`.",
    "RunSummaryRecord.schema_version": "Version of this record format.",
    "RunSummaryRecord.run_id": "The run.",
    "RunSummaryRecord.eval_name": "The eval's name.",
    "RunSummaryRecord.eval_file": "Path of the eval file.",
    "RunSummaryRecord.variant": "The experiment variant (`null` outside experiments).",
    "RunSummaryRecord.eval_hash": "Hash of the eval document as written (params resolved; "
    "the same for every variant of an experiment).",
    "RunSummaryRecord.config_hash": "Hash of the eval with the variant applied (experiments only).",
    "RunSummaryRecord.suite_hash": "Fingerprint of the eval's planned cases: the sorted "
    "(eval, stimulus, `caseHash`) of every stimulus the run planned. Runs with the same "
    "`suiteHash` put the same cases to their targets and graded them the same way "
    "(`null` in summaries written before it existed).",
    "RunSummaryRecord.target": "What the cases were put to: executor, config digest, model "
    "and variant (every field `null` in summaries written before it existed).",
    "RunSummaryRecord.graders": "Every distinct grader of the eval (eval-level and "
    "stimulus-level, by name and type), in spec order, with whether a model judges it "
    "(empty in summaries written before it existed).",
    "GraderIdentity.name": "The grader's display name (the spec's `name`, else its type).",
    "GraderIdentity.type": "The grader type (`file-contains`, `prompt`, ...).",
    "GraderIdentity.judged": "A model judges it: its plugin's metadata declares `needs_llm` "
    "or an `slm`/`llm` determinism (false for deterministic graders and for a grader whose "
    "plugin is not installed).",
    "GraderIdentity.model": "The judge model of a judged grader: its config's `model`, else "
    "the run's judge model (`--judge-model`, the eval's `judge_model`, `EVAL_JUDGE_MODEL`); "
    "`null` when none is set and for graders that are not judged.",
    "TargetIdentity.executor": "The executor's name (`null` when the eval planned no trial "
    "and names none).",
    "TargetIdentity.config_digest": "16 hex digits of the SHA-256 of the executor's resolved "
    "config (the eval's `defaults.executor.config` over the project's `plugin_config`) as "
    "canonical JSON.",
    "TargetIdentity.model": "The model the eval ran (`--model` or `defaults.model`); `null` "
    "for the executor's default and when several models ran (`models` lists them).",
    "TargetIdentity.variant": "The experiment variant (`null` outside experiments).",
    "RunSummaryRecord.threshold": "The eval's pass threshold (`null`: binary).",
    "RunSummaryRecord.models": "Models that ran, in order of first appearance.",
    "RunSummaryRecord.trials": "Every trial, errored ones included.",
    "RunSummaryRecord.passed": "Graded trials that passed.",
    "RunSummaryRecord.failed": "Graded trials that failed.",
    "RunSummaryRecord.errored": "Trials that failed operationally (or whose grader errored).",
    "RunSummaryRecord.pass_rate": "passed / graded (`null` when nothing was graded).",
    "RunSummaryRecord.verdict": "`pass` (every graded trial passed), `fail`, or `none` "
    "(nothing graded).",
    "RunSummaryRecord.stimuli": "One summary per stimulus and model.",
    "RunSummaryRecord.started_at": "When the run started (ISO 8601, UTC).",
    "RunSummaryRecord.completed_at": "When the run ended (ISO 8601, UTC).",
    "RunSummaryRecord.vally_version": "The vally version that wrote it.",
    "RunSummaryRecord.plugins": "Every plugin the run used: `kind`, `name`, `source` "
    "(`entry-point`, `module` or `file`), `target`, and where known `distribution`, "
    "`version`, `path`, `sha256`, `specifier`.",
    "RunSummaryRecord.experiment": "Experiment provenance (`null` outside experiments).",
    "RunSummaryRecord.usage": "Token totals of the eval's trials, agent and judge (the sum of "
    "their records' `usage`).",
    "RunSummaryRecord.cost": "Cost in US dollars of the eval's trials, agent and judge (the "
    "sum of their records' `cost`; trials without a price count as nothing and are counted "
    "in `unpricedTrials`).",
    "TrialResultRecord.cost": "Cost in US dollars of the trial: the agent's reported cost "
    "(`trajectory.metadata.extra.costUsd`) or its tokens at the price table's price, and the "
    "judges' tokens at the judge model's price; `null` parts when a model has no price.",
    "ProjectConfig.prices": "Model prices in US dollars per million tokens (`input`, "
    "`output`, `cache_read`), added to or overriding the built-in list prices.",
    "TrialResultRecord.usage": "Token totals of the trial: `agent` from the trajectory's "
    "token usage, `judge` the sum of what its graders report under `metadata.judgeUsage` "
    "(zeros when none).",
    "StimulusSummary.stimulus_name": "The stimulus.",
    "StimulusSummary.model": "The model.",
    "StimulusSummary.trials": "Every trial, errored ones included.",
    "StimulusSummary.graded": "Trials that count towards pass rates (not errored, with graders).",
    "StimulusSummary.passed": "Graded trials that passed.",
    "StimulusSummary.errored": "Trials that failed operationally.",
    "StimulusSummary.mean_score": "Mean score of the graded trials.",
    "StimulusSummary.metrics": "Pass rate and pass@k over the graded trials.",
    "StimulusSummary.flaky": "Some graded trials passed and some failed.",
    "StimulusSummary.has_graders": "Whether the stimulus has graders.",
    "StimulusSummary.mean_tokens": "Mean total tokens of the trials with a trajectory.",
    "StimulusSummary.mean_turns": "Mean turn count.",
    "StimulusSummary.mean_tool_calls": "Mean tool-call count.",
    "StimulusSummary.mean_wall_time_ms": "Mean agent wall time in milliseconds.",
    "StimulusSummary.total_errors": "Error events over all trajectories.",
    "MultiTrialMetrics.per_trial_pass_rate": "passed / graded.",
    "MultiTrialMetrics.pass_at_k": "Unbiased estimate of P(at least one of k trials passes).",
    "MultiTrialMetrics.pass_at_k_naive": "1 - (1 - rate)^k.",
    "MultiTrialMetrics.pass_to_the_k": "rate^k: P(all k trials pass).",
    "MultiTrialMetrics.k": "The number of graded trials (0: every metric is `null`).",
    # trajectory
    "Trajectory.id": "Unique id of the trajectory (a UUID).",
    "Trajectory.stimulus": "The stimulus that produced it.",
    "Trajectory.events": "Every event, in time order (see [events](#trajectory-events)).",
    "Trajectory.metrics": "Aggregates computed from the events.",
    "Trajectory.output": "The agent's final answer (usually the last assistant message).",
    "Trajectory.work_dir": "The workspace path used during the run.",
    "Trajectory.metadata": "Execution context.",
    "Trajectory.workspace_status": "`local` (files written straight into the workspace), "
    "`materialized` (copied back from where the agent ran) or `remote` (only on the remote "
    "side: file graders error).",
    "Trajectory.end_reason": "Why the agent stopped: `completed`, `timeout`, `error`, "
    "`cancelled` or a constraint (`max_turns`, `max_tokens`, `max_duration`, "
    "`max_tool_calls`).",
    "Trajectory.end_detail": "Detail of an abnormal end (e.g. the error message).",
    "Trajectory.diff": "Unified diff of the workspace, when the executor captured one.",
    "Trajectory.truncated": "The executor's capture limit (`output_limit`) cut the agent's"
    " output; an `error` event with code `output_truncated` says where.",
    "TrajectoryMetadata.model": "The model the agent used.",
    "TrajectoryMetadata.executor": "The executor's name.",
    "TrajectoryMetadata.skills_loaded": "Skills staged for the agent.",
    "TrajectoryMetadata.started_at": "When the agent started (ISO 8601, UTC).",
    "TrajectoryMetadata.completed_at": "When the agent ended (ISO 8601, UTC).",
    "TrajectoryMetadata.session_id": "The agent's session id, when it has one.",
    "TrajectoryMetadata.extra": "Executor-specific facts (e.g. `harness_sha256`).",
    "TrajectoryMetrics.token_usage": "Token totals.",
    "TrajectoryMetrics.wall_time_ms": "Agent wall time in milliseconds.",
    "TrajectoryMetrics.tool_call_count": "Number of `tool_call` events.",
    "TrajectoryMetrics.tool_call_breakdown": "Tool name -> calls.",
    "TrajectoryMetrics.skill_activation_count": "Number of `skill_activation` events.",
    "TrajectoryMetrics.skill_activation_breakdown": "Skill name -> activations.",
    "TrajectoryMetrics.turn_count": "`turn_start` events, or else the turns with an "
    "assistant message.",
    "TrajectoryMetrics.error_count": "Number of `error` events.",
    "TokenUsage.input_tokens": "Input tokens, cached ones included.",
    "TokenUsage.output_tokens": "Output tokens.",
    "TokenUsage.total_tokens": "input + output.",
    "TokenUsage.cache_read_tokens": "Input tokens read from the cache (a subset of `inputTokens`).",
    "TokenUsage.cache_write_tokens": "Input tokens written to the cache.",
    "TokenUsage.call_count": "Number of model calls (`token_usage` events).",
    "TokenUsage.by_model": "Model -> `{inputTokens, outputTokens, callCount}` (`unknown` "
    "when the event names no model).",
    # trajectory events
    "ToolCallData.tool_name": "The tool's name.",
    "ToolCallData.tool_call_id": "Id pairing the call with its `tool_result`.",
    "ToolCallData.arguments": "The arguments: an object, or the raw text when they are not JSON.",
    "ToolCallData.server": "The MCP server of an MCP tool.",
    "ToolCallData.batch_id": "Calls of one model response share it (parallel calls).",
    "ToolResultData.tool_name": "The tool's name.",
    "ToolResultData.tool_call_id": "The call this answers.",
    "ToolResultData.success": "Whether the call succeeded.",
    "ToolResultData.result": "What the tool returned (any JSON value).",
    "ToolResultData.server": "The MCP server of an MCP tool.",
    "TokenUsageData.input_tokens": "Input tokens, cached ones included.",
    "TokenUsageData.output_tokens": "Output tokens.",
    "TokenUsageData.model": "The model called.",
    "TokenUsageData.cache_read_tokens": "Input tokens read from the cache (a subset of "
    "`inputTokens`).",
    "TokenUsageData.cache_write_tokens": "Input tokens written to the cache.",
    "TurnData.turn_id": "Id of the turn (e.g. `turn-1`); start and end share it.",
    "MessageData.content": "The text.",
    "ErrorData.message": "What went wrong.",
    "ErrorData.code": "A machine-readable code, when known.",
    "ErrorData.fatal": "Whether it ended the run.",
    "SkillActivationData.skill_name": "The skill's name.",
}
"""Descriptions of fields whose model declares none (``Field(description=...)`` or an
``Attributes:`` docstring entry in the model wins over these)."""


def attribute_docs(model: type) -> dict[str, str]:
    """Field descriptions from a Google-style ``Attributes:`` section of the docstring."""
    doc = inspect.getdoc(model) or ""
    out: dict[str, str] = {}
    match = re.search(r"^Attributes:\n((?:[ \t]+.*\n?|\n)+)", doc, re.MULTILINE)
    if not match:
        return out
    current: str | None = None
    for line in match.group(1).splitlines():
        item = re.match(r"^\s{2,8}([A-Za-z_][A-Za-z0-9_]*)(?: \([^)]*\))?:\s*(.*)$", line)
        if item:
            current = item.group(1)
            out[current] = item.group(2).strip()
        elif current and line.strip():
            out[current] += " " + line.strip()
    return out


def field_description(model: type[BaseModel], name: str) -> str:
    """The description of field ``name`` of ``model``: ``Field(description=...)``, else the
    ``Attributes:`` docstring entry, else :data:`FIELD_NOTES`, else empty."""
    field = model.model_fields.get(name)
    return (
        (field.description if field is not None else None)
        or attribute_docs(model).get(name)
        or FIELD_NOTES.get(f"{model.__name__}.{name}", "")
    )
