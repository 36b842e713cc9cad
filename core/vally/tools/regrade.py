"""Re-grading saved trials: the library behind ``vally grade``.

Every input trial (see :mod:`vally.tools.ingest` for the accepted shapes) is matched to its
stimulus in the spec by name; ATIF trajectories, which carry no stimulus name, are matched
by ``--stimulus`` or by their first user prompt. That stimulus's graders (eval-level ones
first), constraints, weights and threshold are applied through
:func:`vally.engine.trials.grading.grade_trial`, and the run events go to the reporters the
session has (console, and jsonl for ``--output jsonl``).

Without a workspace graders get no sandbox, so graders that read files or run commands
report a clear error. With one, the ``local`` backend opens a sandbox over that folder in
place (its ``reuse_workspace`` mode): commands see only the backend's allowed host
variables plus the stimulus's ``environment.env``, background processes they leave are
stopped when the trial is graded, and the folder is never cleared or deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TextIO

from vally.errors import ConfigError, VallyError

if TYPE_CHECKING:
    from vally.contracts.events import RunInfo
    from vally.contracts.protocols import Backend, LoadedEval, Sandbox, TrialKey
    from vally.models.project import ProjectConfig
    from vally.models.records import GradeResult, TrialResultRecord
    from vally.models.spec import EvalSpec, GraderConfig, Stimulus
    from vally.models.trajectory import Trajectory
    from vally.plugins.session import Session
    from vally.tools.ingest import IngestedItem

WORKSPACE_BACKEND = "local"
"""The backend that opens ``--workspace`` folders (in its ``reuse_workspace`` mode)."""


@dataclass
class GradeOptions:
    """What ``vally grade`` was asked to do (its flags).

    Attributes:
        eval_spec: The eval spec whose graders to apply, relative to the working folder.
        stimulus: The stimulus of ATIF input (needed when the prompt matches several).
        workspace: A folder file and command graders work in (used in place).
        output: ``"jsonl"`` to write the re-graded records to standard output.
        judge_model: Model for LLM judge graders.
        grader_plugins: Grader plugin specifiers to load.
        verbose: Show agent output and full evidence.
        threshold: Pass threshold 0..1, overriding the spec's.
        params: ``KEY=VALUE`` param values.
        no_cache: Judge graders send every request, bypassing the judge cache.
    """

    eval_spec: str
    stimulus: str | None = None
    workspace: str | None = None
    output: str | None = None
    judge_model: str | None = None
    grader_plugins: list[str] = field(default_factory=list)
    verbose: bool = False
    threshold: float | None = None
    params: dict[str, str] = field(default_factory=dict)
    no_cache: bool = False


@dataclass(frozen=True)
class RegradeOutcome:
    """The re-graded trials, in input order.

    Attributes:
        records: One record per graded input trial, slimmed for the summary: the
            trajectory keeps its metrics and the start of its output, not its events (the
            full records went to the reporters one by one as they were graded).
        cancelled: True when the user interrupted grading.
        to_stdout: True when the records went to standard output (``--output jsonl``), so
            anything else belongs on standard error.
    """

    records: list[TrialResultRecord]
    cancelled: bool
    to_stdout: bool
    judge_cache: str | None = None
    """The judge cache's hits and misses, when a judge was called through it."""

    def counts(self) -> tuple[int, int, int]:
        """(passed, failed, errored) over the records."""
        passed = failed = errored = 0
        for record in self.records:
            grade = record.grade_result
            if record.status != "success" or grade is None or grade.errored:
                errored += 1
            elif grade.passed:
                passed += 1
            else:
                failed += 1
        return passed, failed, errored


SUMMARY_OUTPUT_CHARS = 4000
"""Characters of a trial's output kept in :attr:`RegradeOutcome.records`."""


def slim(record: TrialResultRecord) -> TrialResultRecord:
    """``record`` as kept for the summary: no events, the output cut to
    :data:`SUMMARY_OUTPUT_CHARS` (so memory grows by a few KB per trial, whatever its size)."""
    trajectory = record.trajectory
    if trajectory is None:
        return record
    small = trajectory.model_copy(
        update={"events": [], "output": trajectory.output[:SUMMARY_OUTPUT_CHARS], "diff": None}
    )
    return record.model_copy(update={"trajectory": small})


# --------------------------------------------------------------------------- matching


def _first_prompt(stimulus: Stimulus) -> str:
    return " ".join(stimulus.prompts[0].split()) if stimulus.prompts else ""


def match_stimulus(item: IngestedItem, spec: EvalSpec, forced: str | None, source: str) -> Stimulus:
    """The spec stimulus an input trial belongs to.

    Named trials match by name. ATIF trajectories use ``--stimulus`` when given, else the
    stimulus whose first prompt equals the trajectory's first user message, else the only
    stimulus of a one-stimulus spec.

    Raises:
        ConfigError: No stimulus (or more than one) matches; says which line and what to do.
    """
    by_name = {s.name: s for s in spec.stimuli}
    names = ", ".join(by_name)
    name = item.stimulus_name
    if name is None and forced is not None:
        name = forced
    if name is not None:
        found = by_name.get(name)
        if found is None:
            flag = "--stimulus " if item.stimulus_name is None else ""
            raise ConfigError(
                f"line {item.line}: {flag}{name!r} is not a stimulus of {source} "
                f"(its stimuli: {names})",
                hint="grade with the eval spec that produced these trials",
            )
        return found
    trajectory = item.trajectory
    prompt = " ".join(trajectory.stimulus.prompts[0].split()) if trajectory else ""
    candidates = [s for s in spec.stimuli if prompt and _first_prompt(s) == prompt]
    if len(candidates) == 1:
        return candidates[0]
    if not candidates and len(spec.stimuli) == 1:
        return spec.stimuli[0]
    what = "several stimuli" if candidates else "no stimulus"
    raise ConfigError(
        f"line {item.line}: the {item.format} trajectory's prompt matches {what} of {source}",
        hint=f"name the stimulus with --stimulus (one of: {names})",
    )


# --------------------------------------------------------------------------- inputs


def _check_flags(opts: GradeOptions, stdin: TextIO, cwd: Path) -> tuple[Path, Path | None]:
    """The eval spec and workspace paths, checked before any plugin loads.

    Raises:
        ConfigError: A flag is invalid, or standard input is a terminal.
    """
    if opts.output not in (None, "jsonl"):
        raise ConfigError(f"--output {opts.output!r} is not supported; the only value is 'jsonl'")
    if opts.threshold is not None and not 0.0 <= opts.threshold <= 1.0:
        raise ConfigError(f"--threshold {opts.threshold} is outside 0..1")
    spec_path = (cwd / opts.eval_spec).absolute()
    if not spec_path.is_file():
        problem = "is a folder, not a file" if spec_path.is_dir() else "no such file"
        raise ConfigError(
            f"--eval-spec {opts.eval_spec}: {problem} ({spec_path})",
            hint="pass the eval spec file whose graders to apply",
        )
    workspace: Path | None = None
    if opts.workspace:
        workspace = (cwd / opts.workspace).absolute()
        if not workspace.is_dir():
            raise ConfigError(f"--workspace {opts.workspace}: not a folder ({workspace})")
    if stdin.isatty():
        raise ConfigError(
            "vally grade reads trial records from standard input, which is a terminal",
            hint="pipe them in: vally eval -e eval.yaml --output jsonl | vally grade -e "
            "eval.yaml, or vally grade -e eval.yaml < results.jsonl",
        )
    return spec_path, workspace


def _input_folders(stdin: TextIO) -> list[Path]:
    """The folder of the results file standard input was redirected from, and its parent
    (an experiment's variant folder sits in the run folder), where a record's offloaded
    texts are; empty when standard input is not a file."""
    import os
    import stat

    try:
        if not stat.S_ISREG(os.fstat(stdin.fileno()).st_mode):
            return []
        source = Path(os.readlink(f"/proc/self/fd/{stdin.fileno()}"))
    except (OSError, ValueError, AttributeError):
        return []
    return [source.parent, source.parent.parent]


@contextlib.contextmanager
def _spool(stdin: TextIO) -> Iterator[IO[str]]:
    """A copy of standard input in a temporary file, to read it twice without holding it
    in memory (once to check every trial, once to grade them)."""
    with tempfile.TemporaryFile("w+", encoding="utf-8", newline="\n") as spool:
        shutil.copyfileobj(stdin, spool)
        spool.seek(0)
        yield spool


def _matched(
    spool: IO[str],
    spec: EvalSpec,
    opts: GradeOptions,
    warn: Callable[[str], None] | None,
) -> Iterator[tuple[IngestedItem, Stimulus]]:
    """Each trial of the spooled input with its stimulus, read one at a time from the
    start of ``spool``."""
    from vally.tools.ingest import iter_items

    spool.seek(0)
    for item in iter_items(spool, source="<stdin>", warn=warn):
        yield item, match_stimulus(item, spec, opts.stimulus, str(opts.eval_spec))


def _scan(
    spool: IO[str], spec: EvalSpec, opts: GradeOptions, warn: Callable[[str], None] | None
) -> tuple[int, list[Stimulus]]:
    """Check every trial of the input before any is graded: the number of trials and
    the stimuli they match (each once, in input order).

    Raises:
        ConfigError: The input is not JSON, holds an unknown shape or a trial of no
            stimulus, or holds no trials.
    """
    count = 0
    stimuli: dict[str, Stimulus] = {}
    for _, stimulus in _matched(spool, spec, opts, warn):
        count += 1
        stimuli.setdefault(stimulus.name, stimulus)
    if not count:
        raise ConfigError(
            "no trials on standard input",
            hint="pipe the output of `vally eval --output jsonl` or a results.jsonl file",
        )
    return count, list(stimuli.values())


def _plugin_paths(specifiers: Sequence[str], cwd: Path) -> list[str]:
    """Relative plugin paths that exist from the working folder are made absolute; others
    resolve from the eval spec's folder."""
    out = []
    for spec in specifiers:
        candidate = cwd / spec
        looks_like_path = spec.endswith(".py") or "/" in spec or spec.startswith(".")
        out.append(str(candidate) if looks_like_path and candidate.exists() else spec)
    return out


def _llm_provider(session: Session, configs: Sequence[GraderConfig], *, no_cache: bool) -> Any:
    """The project's LLM provider, behind the judge cache unless ``no_cache``, when one of
    ``configs`` is a judge grader, else None."""
    from vally.engine.trials.judge_cache import CachedJudge, JudgeCache, cache_root
    from vally.plugins.capabilities import needs_llm

    if session.project is None:
        return None
    for config in configs:
        if needs_llm(session.plugin_class("grader", config.type)):
            from vally.engine.trials.llm_config import provider_config_from_settings

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
    from vally.plugins.capabilities import needs_workspace

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


# --------------------------------------------------------------------------- grading


class _Regrader:
    """Grades matched trials one by one and emits the run events of ``vally grade``."""

    def __init__(
        self,
        session: Session,
        loaded: LoadedEval,
        opts: GradeOptions,
        run: RunInfo,
        project_root: Path | None,
    ) -> None:
        from vally.engine.planning.planner import judge_settings

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
        self.graders: dict[Any, Any] = {}
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
        from vally.engine.planning.plan import PluginRef

        key = PluginRef.of(config.type, config.config)
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
        self.llm = _llm_provider(self.session, configs, no_cache=self.no_cache)
        if workspace is not None:
            self.workspace = workspace
            self.backend = self.session.create(
                "backend", WORKSPACE_BACKEND, {"reuse_workspace": True}, where="--workspace"
            )

    async def grade_all(self, matched: Iterable[tuple[IngestedItem, Stimulus]]) -> None:
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

    def _key(self, item: IngestedItem, stimulus: Stimulus) -> tuple[TrialKey, int]:
        from vally.contracts.protocols import TrialKey
        from vally.models.records import TrialResultRecord

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
        from vally.models.fingerprint import case_fingerprint

        return case_fingerprint(stimulus, self.spec.graders)

    async def grade_one(self, item: IngestedItem, stimulus: Stimulus) -> TrialResultRecord:
        """Grade one input trial and return its (new or updated) record; every record
        returned has the ``caseHash`` of the stimulus it was matched to (a record passed
        through ungraded keeps the one it had)."""
        from vally.models.records import TrialError, TrialResultRecord

        original = item.value if isinstance(item.value, TrialResultRecord) else None
        trajectory = item.trajectory
        if original is not None and original.offloaded:
            # Grade the whole texts; the record written keeps them cut, with its pointers.
            from vally.engine.records.offload import restore_texts

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
        from vally.engine.planning.planner import merge_constraints
        from vally.engine.trials.grading import grade_trial

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
        from vally.contracts.protocols import TrialContext
        from vally.models.spec import EnvironmentConfig
        from vally.specs.environments import resolve_environment

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
    from vally.engine.planning.planner import eval_name
    from vally.models.records import TrialResultRecord
    from vally.models.trajectory import utc_now

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


# --------------------------------------------------------------------------- entry point


def _session(
    opts: GradeOptions, spec_path: Path, cwd: Path
) -> tuple[Session, ProjectConfig, Path | None]:
    """The plugin session of the spec's project (with ``--grader-plugin`` loaded), the
    project and its root folder."""
    from vally.plugins.session import Session
    from vally.specs.loading import find_project

    project, root = find_project(spec_path.parent, params=opts.params)
    session = Session(project, root or cwd)
    if opts.grader_plugins:
        session.load_plugins(
            "grader", _plugin_paths(opts.grader_plugins, cwd), base_dir=spec_path.parent
        )
    return session, project, root


def _register_reporters(session: Session, opts: GradeOptions) -> bool:
    """Console output (on stderr when records go to stdout); True when they do."""
    from vally.plugins import defaults

    to_stdout = opts.output == "jsonl"
    stream = "stderr" if to_stdout else "stdout"
    console = session.create(
        "reporter", defaults.CONSOLE_REPORTER, {"verbose": opts.verbose, "stream": stream}
    )
    session.register_observer(console, defaults.CONSOLE_REPORTER)
    if to_stdout:
        jsonl = session.create(
            "reporter", defaults.RESULTS_REPORTER, {"stdout": True}, where="--output"
        )
        session.register_observer(jsonl, defaults.RESULTS_REPORTER)
    return to_stdout


def regrade(
    opts: GradeOptions,
    stdin: TextIO,
    *,
    cwd: Path | None = None,
    warn: Callable[[str], None] | None = None,
) -> RegradeOutcome:
    """Re-grade the trials read from ``stdin`` against ``opts.eval_spec``.

    Args:
        opts: What to do.
        stdin: The saved trials (JSON Lines or one JSON document).
        cwd: The folder relative paths are taken from (default: the working folder).
        warn: Receives warnings before grading starts (graders that need a workspace
            when there is none).

    Raises:
        VallyError: A flag, the spec, the input or a plugin is invalid (before any trial
            is graded).
    """
    from vally.contracts.events import RunInfo, RunOutcome
    from vally.models.trajectory import utc_now
    from vally.specs.loading import load_eval_file

    here = cwd or Path.cwd()
    spec_path, workspace = _check_flags(opts, stdin, here)
    session, project, project_root = _session(opts, spec_path, here)
    loaded = load_eval_file(spec_path, cli_params=opts.params, project=project)
    spec = loaded.spec
    if opts.stimulus is not None and opts.stimulus not in {s.name for s in spec.stimuli}:
        raise ConfigError(
            f"--stimulus {opts.stimulus!r} is not a stimulus of {opts.eval_spec}",
            hint="its stimuli: " + ", ".join(s.name for s in spec.stimuli),
        )
    with _spool(stdin) as spool:
        count, stimuli = _scan(spool, spec, opts, warn)
        run = RunInfo(
            run_id=str(uuid.uuid4()),
            command="grade",
            run_dir=None,
            planned_trials=count,
            started_at=utc_now(),
            options={"verbose": opts.verbose},
        )
        regrader = _Regrader(session, loaded, opts, run, project_root)
        regrader.text_folders = [*_input_folders(stdin), here]
        regrader.warn = warn
        regrader.prepare(stimuli, workspace)
        if workspace is None and warn is not None:
            for warning in workspace_warnings(session, spec, stimuli, str(opts.eval_spec)):
                warn(warning)
        to_stdout = _register_reporters(session, opts)
        session.emitter.emit("vally_run_start", run=run)
        cancelled = False
        try:
            asyncio.run(regrader.grade_all(_matched(spool, spec, opts, None)))
        except KeyboardInterrupt:
            cancelled = True
    records = regrader.records
    session.emitter.emit("vally_run_end", run=run, outcome=RunOutcome(records, [], cancelled))
    cache = getattr(regrader.llm, "cache", None)
    line = cache.summary() if cache is not None and cache.hits + cache.misses else None
    return RegradeOutcome(records, cancelled, to_stdout, line)
