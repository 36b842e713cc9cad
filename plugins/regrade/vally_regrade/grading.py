"""Grading matched trials one by one (:class:`Regrader`): the stimulus's graders (eval-level
ones first), constraints, weights and threshold applied through :func:`vally.grade_trial`,
a run event after each trial, and a record for every input trial.

Without a workspace graders get no sandbox, so graders that read files or run commands
report a clear error (:func:`workspace_warnings` says which, up front). With one, the
``local`` backend opens a sandbox over that folder in place (its ``reuse_workspace`` mode):
commands see only the backend's allowed host variables plus the stimulus's
``environment.env``, background processes they leave are stopped when the trial is graded,
and the folder is never cleared or deleted.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vally import (
    CachedJudge,
    ConfigError,
    EnvironmentConfig,
    JudgeCache,
    TrialContext,
    TrialError,
    TrialKey,
    TrialResultRecord,
    VallyError,
    cache_root,
    case_fingerprint,
    eval_name,
    grade_trial,
    judge_settings,
    merge_constraints,
    needs_llm,
    needs_workspace,
    provider_config_from_settings,
    resolve_environment,
    restore_texts,
    utc_now,
)
from vally_regrade.request import GradeOptions, slim

if TYPE_CHECKING:
    from vally import (
        Backend,
        EvalSpec,
        GraderConfig,
        GradeResult,
        LoadedEval,
        RunInfo,
        Sandbox,
        Session,
        Stimulus,
        Trajectory,
    )
    from vally_regrade.saved_trials import SavedTrial

WORKSPACE_BACKEND = "local"
"""The backend that opens ``--workspace`` folders (in its ``reuse_workspace`` mode)."""


def judge_provider(session: Session, configs: Sequence[GraderConfig], *, no_cache: bool) -> Any:
    """The project's LLM provider, behind the judge cache unless ``no_cache``, when one of
    ``configs`` is a judge grader, else None."""
    if session.project is None:
        return None
    for config in configs:
        if needs_llm(session.plugin_class("grader", config.type)):
            settings = session.project.llm
            provider = session.create(
                "llm_provider",
                settings.provider,
                provider_config_from_settings(settings),
                where=".vally.yaml llm",
            )
            root = cache_root(session.project, session.project_root)
            return CachedJudge(provider, None if no_cache else JudgeCache(root), settings.provider)
    return None


def workspace_warnings(
    session: Session, spec: EvalSpec, stimuli: Sequence[Stimulus], source: str
) -> list[str]:
    """One warning per grader that needs the trial workspace, for a run without
    ``--workspace``: those graders cannot run and their results will be errors.

    Args:
        session: The session the graders resolve in.
        spec: The eval spec (its eval-level graders apply to every stimulus).
        stimuli: The stimuli the input trials matched, in input order.
        source: The eval spec as the user named it.
    """
    by_grader: dict[tuple[str, str], list[str]] = {}
    for stimulus in stimuli:
        for config in [*spec.graders, *stimulus.graders]:
            if needs_workspace(session.plugin_class("grader", config.type)):
                names = by_grader.setdefault((config.label, config.type), [])
                if stimulus.name not in names:
                    names.append(stimulus.name)
    return [
        f"grader '{label}' ({kind}) of {source} needs the trial workspace (stimuli: "
        f"{', '.join(names)}); without --workspace it is not run and its results are "
        "errors. Pass --workspace DIR with the trial's files to grade it."
        for (label, kind), names in by_grader.items()
    ]


def grader_key(config: GraderConfig) -> tuple[str, str]:
    """The identity of one grader instance: its type and its config as canonical JSON (two
    stimuli naming the same grader with the same config share one instance)."""
    return config.type, json.dumps(config.config, sort_keys=True, default=str)


class Regrader:
    """Grades matched trials one by one and emits the run events of ``vally grade``."""

    def __init__(
        self,
        session: Session,
        loaded: LoadedEval,
        opts: GradeOptions,
        run: RunInfo,
        project_root: Path | None,
    ) -> None:
        self.session = session
        self.loaded = loaded
        self.spec = loaded.spec
        self.run = run
        self.project_root = project_root
        self.source = str(opts.eval_spec)
        self.no_cache = opts.no_cache
        self.judge = judge_settings(self.spec, opts.judge_model)
        threshold = opts.threshold
        self.threshold = threshold if threshold is not None else self.spec.scoring.threshold
        self.graders: dict[tuple[str, str], Any] = {}
        self.llm: Any = None
        self.backend: Backend | None = None
        self.workspace: Path | None = None
        self.counters: dict[str, int] = {}
        self.records: list[TrialResultRecord] = []
        self.text_folders: list[Path] = [Path.cwd()]
        """Where offloaded texts are looked for (candidate run folders)."""
        self.warn: Callable[[str], None] | None = None

    def create_grader(self, config: GraderConfig) -> Any:
        """One grader instance per distinct (type, config), validated on first use."""
        key = grader_key(config)
        if key not in self.graders:
            where = f"{self.source}: grader {config.label!r}"
            self.graders[key] = self.session.create(
                "grader", config.type, config.config, where=where
            )
        return self.graders[key]

    def prepare(self, stimuli: Sequence[Stimulus], workspace: Path | None) -> None:
        """Build every grader (and the LLM provider and workspace backend they need)
        before anything runs, so a bad config fails the command up front."""
        configs = [*self.spec.graders, *(g for s in stimuli for g in s.graders)]
        for config in configs:
            self.create_grader(config)
        self.llm = judge_provider(self.session, configs, no_cache=self.no_cache)
        if workspace is not None:
            self.workspace = workspace
            self.backend = self.session.create(
                "backend", WORKSPACE_BACKEND, {"reuse_workspace": True}, where="--workspace"
            )

    async def grade_all(self, matched: Iterable[tuple[SavedTrial, Stimulus]]) -> None:
        """Grade every trial in order, emitting ``vally_trial_end`` after each; only a
        slim copy of each record is kept in :attr:`records` (an interruption keeps the
        records graded so far)."""
        try:
            if self.backend is not None:
                await self.backend.start(self.run.run_id)
            for item, stimulus in matched:
                record = (await self.grade_one(item, stimulus)).writable()
                self.session.emitter.emit("vally_trial_end", run=self.run, record=record)
                self.records.append(slim(record))
        finally:
            if self.backend is not None:
                with contextlib.suppress(Exception):
                    await self.backend.shutdown()
            if self.llm is not None:
                with contextlib.suppress(Exception):
                    await self.llm.aclose()

    def _key(self, item: SavedTrial, stimulus: Stimulus) -> tuple[TrialKey, int]:
        original = item.value if isinstance(item.value, TrialResultRecord) else None
        index = self.counters.get(stimulus.name, 0)
        self.counters[stimulus.name] = index + 1
        if original is not None:
            key = TrialKey(
                original.variant or "",
                original.eval_name,
                stimulus.name,
                original.model or "",
                original.trial_index,
            )
            return key, index
        model = item.trajectory.metadata.model if item.trajectory is not None else None
        return TrialKey("", "", stimulus.name, model or "", index), index

    def case_hash(self, stimulus: Stimulus) -> str:
        """The case fingerprint of ``stimulus`` graded by this spec (its eval-level graders
        too), as ``caseHash`` records it."""
        return case_fingerprint(stimulus, self.spec.graders)

    async def grade_one(self, item: SavedTrial, stimulus: Stimulus) -> TrialResultRecord:
        """Grade one input trial and return its (new or updated) record; every record
        returned has the ``caseHash`` of the stimulus it was matched to (a record passed
        through ungraded keeps the one it had)."""
        original = item.value if isinstance(item.value, TrialResultRecord) else None
        trajectory = item.trajectory
        if original is not None and original.offloaded:
            # Grade the whole texts; the record written keeps them cut, with its pointers.
            trajectory = restore_texts(original, self.text_folders, self.warn).trajectory
        case_hash = self.case_hash(stimulus)
        if trajectory is None:
            assert original is not None
            if original.error is not None:
                if original.case_hash is not None:
                    return original
                return original.model_copy(update={"case_hash": case_hash})
            error = TrialError(
                phase="grade",
                code=ConfigError.code,
                message="the record holds no trajectory to grade",
            )
            return original.model_copy(
                update={"status": "error", "error": error, "case_hash": case_hash}
            )
        if item.format == "atif":
            trajectory = trajectory.model_copy(update={"stimulus": stimulus})
        key, index = self._key(item, stimulus)
        self.session.emitter.emit("vally_trial_start", run=self.run, key=key)
        try:
            grade = await self._grade(trajectory, stimulus, key)
        except VallyError as exc:
            if original is None:
                raise
            error = TrialError(phase="grade", code=exc.code, message=exc.render())
            return original.model_copy(
                update={
                    "status": "error",
                    "error": error,
                    "grade_result": None,
                    "case_hash": case_hash,
                }
            )
        if original is None:
            return _new_record(
                trajectory, stimulus, self.loaded, self.run.run_id, index, grade, case_hash
            )
        update: dict[str, Any] = {
            "grade_result": grade,
            "stimulus": stimulus,
            "case_hash": case_hash,
        }
        if original.error is not None and original.error.phase == "grade":
            update.update({"status": "success", "error": None})
        return original.model_copy(update=update)

    async def _grade(self, trajectory: Trajectory, stimulus: Stimulus, key: TrialKey) -> Any:
        """Run the stimulus's graders, in a workspace sandbox when there is one."""
        def on_result(result: Any) -> None:
            self.session.emitter.emit("vally_grader_result", run=self.run, key=key, result=result)

        sandbox = await self._open_workspace(stimulus, key)
        try:
            return await grade_trial(
                trajectory,
                stimulus,
                [*self.spec.graders, *stimulus.graders],
                create_grader=self.create_grader,
                sandbox=sandbox,
                spec_dir=self.loaded.source.parent,
                llm=self.llm,
                judge=self.judge,
                weights=self.spec.scoring.weights,
                threshold=self.threshold,
                constraints=merge_constraints(self.spec.constraints, stimulus.constraints),
                on_result=on_result,
            )
        finally:
            if sandbox is not None:
                await sandbox.close()

    async def _open_workspace(self, stimulus: Stimulus, key: TrialKey) -> Sandbox | None:
        """A sandbox over the ``--workspace`` folder with the stimulus's environment
        variables (files, setup and git are not applied: the folder is used as it is)."""
        if self.backend is None or self.workspace is None:
            return None
        project = self.session.project
        env: dict[str, str] = {}
        if project is not None:
            env = resolve_environment(self.loaded, stimulus, project, self.project_root).env
        trial = TrialContext(
            key=key,
            run_id=self.run.run_id,
            environment=EnvironmentConfig(env=env),
            spec_dir=self.loaded.source.parent,
            keep_workspace=self.workspace,
        )
        return await self.backend.open(trial)


def _new_record(
    trajectory: Trajectory,
    stimulus: Stimulus,
    loaded: LoadedEval,
    run_id: str,
    trial_index: int,
    grade: GradeResult,
    case_hash: str,
) -> TrialResultRecord:
    """The record of a graded trajectory that came without one (``case_hash``: its
    stimulus's case fingerprint)."""
    name = eval_name(loaded)
    model = trajectory.metadata.model
    now = utc_now()
    return TrialResultRecord(
        run_id=run_id,
        eval_name=name,
        eval_file=str(loaded.source),
        stimulus_name=stimulus.name,
        stimulus=stimulus,
        case_hash=case_hash,
        variant=None,
        model=model,
        trial_index=trial_index,
        trial_id=f"{name}/{stimulus.name}/{model or 'default'}/{trial_index}",
        status="success",
        error=None,
        started_at=trajectory.metadata.started_at or now,
        completed_at=trajectory.metadata.completed_at or now,
        duration_ms=trajectory.metrics.wall_time_ms,
        tags=dict(stimulus.tags),
        grade_result=grade,
        trajectory=trajectory,
    )

