"""The contracts every plugin kind implements, and the values passed across them.

Every plugin is a class with two class attributes, ``metadata`` (a frozen
:class:`~vally.contracts.metadata.PluginMetadata`) and ``Config`` (a pydantic model validating the
plugin's YAML ``config:`` strictly), and a constructor ``__init__(self, config: Config)``.
The kernel validates the config, builds the instance, and calls the async methods below.
:mod:`vally.contracts.bases` has base classes that fill in the boilerplate.

Data flow of one trial::

    Backend.open(trial) -> Sandbox
      -> Executor.execute(stimulus, sandbox, options) -> Trajectory
      -> Grader.grade(context) for each grader -> GraderResult
    Sandbox.close()          (always, in finally)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from pydantic import BaseModel

from vally.contracts.llm import LLMProvider
from vally.contracts.metadata import GraderMetadata, PluginMetadata
from vally.models.records import GraderResult
from vally.models.spec import (
    Constraints,
    EnvironmentConfig,
    EvalSpec,
    GraderConfig,
    McpServerConfig,
    Stimulus,
)
from vally.models.trajectory import Trajectory

# --------------------------------------------------------------------------- trial identity


@dataclass(frozen=True, order=True)
class TrialKey:
    """The identity of one planned trial. Ordering is plan order."""

    variant: str
    eval_name: str
    stimulus: str
    model: str
    trial: int

    def as_id(self) -> str:
        """A stable, human-readable id: ``variant/eval/stimulus/model/trial``."""
        return "/".join([self.variant, self.eval_name, self.stimulus, self.model, str(self.trial)])


# --------------------------------------------------------------------------- sandbox/backend


@dataclass(frozen=True)
class ExecResult:
    """The outcome of a command run in a sandbox.

    ``exit_code`` is None when the process was killed (timeout, cancellation or a signal).
    ``stdout``/``stderr`` are decoded as UTF-8 with replacement and capped at the requested
    limit; ``truncated`` tells whether anything was cut. ``signal`` is the number of the
    signal that killed the command when it died of one on its own (a crash such as
    SIGSEGV, or a kill from inside the sandbox), not when the sandbox killed it for a
    timeout; backends that cannot tell report None.
    """

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    truncated: bool = False
    duration_ms: int = 0
    signal: int | None = None


@dataclass(frozen=True)
class SkillRef:
    """A skill staged for a trial: its ``SKILL.md`` frontmatter and where it lives.

    ``sandbox_path`` is the skill folder as seen from inside the sandbox.
    """

    name: str
    description: str
    host_path: Path
    sandbox_path: str


@dataclass(frozen=True)
class TrialContext:
    """What a backend needs to open a sandbox for one trial.

    Attributes:
        key: The trial's identity.
        run_id: The run this trial belongs to (backends label resources with it).
        environment: The resolved environment (root, named and stimulus merged, variant
            patches applied). ``files[].src`` and ``skills`` are absolute host paths.
        spec_dir: The folder of the eval file (for ``git.source`` and relative paths).
        keep_workspace: When set, the workspace must be created here and kept after close.
        labels: Labels the backend should attach to anything it creates.
    """

    key: TrialKey
    run_id: str
    environment: EnvironmentConfig
    spec_dir: Path
    keep_workspace: Path | None = None
    labels: Mapping[str, str] = field(default_factory=dict)


@runtime_checkable
class Process(Protocol):
    """A long-running process in a sandbox with piped stdio (used for stdio MCP servers)."""

    async def write(self, data: bytes) -> None:
        """Write to the process's stdin."""

    async def readline(self) -> bytes:
        """Read one line from stdout; ``b""`` at end of stream."""

    async def terminate(self) -> int | None:
        """Stop the process (and its children) and return its exit code."""


@runtime_checkable
class Sandbox(Protocol):
    """Where one trial runs: a workspace and a way to run commands in it.

    All paths given to these methods are relative to :attr:`workdir` unless absolute, and
    implementations must refuse paths that resolve outside the workspace for file
    operations. A sandbox is used by one trial only and closed exactly once.
    """

    workdir: str
    """The workspace directory as processes inside the sandbox see it."""

    host_workdir: Path | None
    """The workspace on the host when it is directly readable there (``local``), else None."""

    async def exec(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
        stdin: bytes | None = None,
        output_limit: int = 1_000_000,
    ) -> ExecResult:
        """Run ``argv`` in the sandbox and wait for it.

        Args:
            argv: Program and arguments (no shell; use ``["sh", "-c", cmd]`` for one).
            env: Extra environment variables, added to the sandbox's base environment.
            cwd: Working directory, relative to the workspace; defaults to the workspace.
            timeout: Seconds before the whole process tree is killed (``timed_out=True``).
            stdin: Bytes fed to the process's standard input, which is closed afterwards.
            output_limit: Maximum bytes kept of each of stdout and stderr.

        Raises:
            BackendError: The command could not be started at all (not for non-zero exits).
        """

    async def spawn(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> Process:
        """Start a long-running process with piped stdio and return a handle to it."""

    async def read_file(self, path: str) -> bytes:
        """Read a file of the workspace. Raises ``FileNotFoundError`` when it is absent."""

    async def write_file(self, path: str, data: bytes) -> None:
        """Create or replace a file of the workspace, creating parent folders."""

    async def list_files(self, path: str = ".") -> list[str]:
        """Every regular file below ``path``, as workspace-relative POSIX paths, sorted.

        Symbolic links are not followed; ``.git`` and ``node_modules`` are skipped.
        """

    async def copy_in(self, host_src: Path, dest: str) -> None:
        """Copy a host file or folder (recursively) into the workspace at ``dest``."""

    async def copy_out(self, src: str, host_dest: Path) -> None:
        """Copy a workspace file or folder to the host, never following links that point
        outside the workspace."""

    # Optional: ``async def stop_processes(self) -> None`` stops every process started in
    # the sandbox (and all they started) and returns once they are gone. When a sandbox has
    # it, the kernel calls it after the executor returned and before grading; an error from
    # it errors the trial. It is not part of the protocol's required members, so sandboxes
    # written before it existed keep working (see :class:`~vally.contracts.bases.BaseSandbox`).

    async def close(self) -> None:
        """Release everything the sandbox holds. Called exactly once, always.

        Raises:
            CleanupError: Resources could not be released.
        """


class Backend(Protocol):
    """Where trials physically run. One instance serves a whole run.

    Lifecycle: ``start`` once, ``open`` once per trial (concurrently), ``shutdown`` once.

    Optional methods, called when a backend has them:

    - ``passed_env() -> Mapping[str, str]``: the host variables the backend passes into
      every sandbox; their values are scrubbed from outputs unless public.
    - ``expect_sandboxes(count: int) -> None``: called once, right after ``start``, with
      how many sandboxes the run will open in this process (one per planned trial that
      needs a workspace). A hint for backends that prepare sandboxes ahead, such as the
      docker backend's warm pool, not to prepare more than will be taken: retries open
      more, and trials the run skips open fewer.
    """

    metadata: ClassVar[PluginMetadata]
    Config: ClassVar[type[BaseModel]]

    async def start(self, run_id: str) -> None:
        """Prepare for a run (build images, sweep leftovers of dead runs)."""

    async def open(self, trial: TrialContext) -> Sandbox:
        """Create the trial's workspace (empty, or a git worktree when ``environment.git``
        is set) and return a sandbox over it. The kernel then stages files and skills and
        runs the setup commands through the sandbox.

        Raises:
            SetupError: The workspace could not be created.
        """

    async def shutdown(self) -> None:
        """Release run-wide resources. Raises :class:`CleanupError` on failure."""


# --------------------------------------------------------------------------- runner


@runtime_checkable
class TrialDispatch(Protocol):
    """What the kernel hands a :class:`Runner` for each trial attempt.

    A runner either runs the attempt in this process (:meth:`run_here`), or ships
    :meth:`job` (a picklable description of the attempt) to another process or machine,
    executes it there with :func:`vally.run_trial_job`, and hands the result back through
    :meth:`accept`, which writes the trial's files into the run folder.
    """

    async def run_here(self) -> Any:
        """Run the attempt in this process and return its ``TrialResultRecord``."""

    def job(self) -> Any:
        """The attempt as a picklable ``TrialJob`` (the run's spec files travel apart, see
        :meth:`spec_archive`)."""

    @property
    def resources(self) -> Any:
        """What the trial reserves on its node (a ``TrialResources`` from the spec's
        ``defaults.resources``), None for the runner's defaults."""

    def spec_archive(self) -> Any:
        """The run's spec files (fixtures, skills, grader files) as one ``SpecArchive``,
        packed once per run (blocking: call it off the event loop). A runner whose nodes do
        not see this file system ships it once and passes it to
        ``run_trial_job(job, node=..., files=archive)``, which unpacks it on the node."""

    async def accept(self, outcome: Any) -> Any:
        """Take a ``TrialOutcome`` computed elsewhere: write its files into the run folder,
        deliver its grader events, and return its ``TrialResultRecord``."""

    def cancelled(self) -> Any:
        """The ``TrialResultRecord`` of an attempt stopped by an interrupt before it
        returned (status ``cancelled``); its record and files are written like any other."""

    def failed(self, message: str) -> Any:
        """The ``TrialResultRecord`` of an attempt the runner could not complete (status
        ``error``, code ``VALLY_RUNNER``, ``message`` saying why)."""


class LLMGate(Protocol):
    """A concurrency cap shared by every process of a distributed run: a runner hands one to
    :func:`vally.run_trial_job`, and each LLM call a trial makes (judge, ``chat-agent``)
    holds one of ``limit`` permits while it runs, so the project's ``llm.max_concurrency``
    holds across the cluster instead of per node. Picklable (it travels to the nodes)."""

    async def acquire(self, limit: int) -> None:
        """Wait for a permit (``limit``: the cap, the same on every call of a run). A
        cancelled wait must not keep a permit."""

    async def release(self) -> None:
        """Give a permit back."""


class Runner(Protocol):
    """Where and how a run's trials execute: the built-in ``local`` runner runs them in
    this process's worker pool; a distributed runner (``ray``) ships each trial to a node.

    The kernel keeps scheduling (``--workers`` trials in flight at most, so the plan is
    never all in flight), records and reports; a runner only decides where each attempt
    runs. Lifecycle: ``start`` once per run, ``run_trial`` once per attempt (concurrently),
    ``shutdown`` once.
    """

    metadata: ClassVar[PluginMetadata]
    Config: ClassVar[type[BaseModel]]
    runs_elsewhere: ClassVar[bool]
    """True when every attempt runs in other processes (never ``dispatch.run_here()``): the
    run then starts no backend in this process (each worker starts its own). Optional,
    default False."""

    async def start(self, run_id: str) -> None:
        """Prepare for a run (connect to the cluster).

        Raises:
            SetupError: The runner cannot run trials (no cluster at the address).
        """

    async def run_trial(self, dispatch: TrialDispatch) -> Any:
        """Run one attempt and return its ``TrialResultRecord``. When cancelled (Ctrl-C),
        stop the attempt wherever it runs and return ``dispatch.cancelled()``."""

    async def shutdown(self) -> None:
        """Release the run's resources (disconnect)."""


# --------------------------------------------------------------------------- executor


@dataclass(frozen=True)
class ExecutorOptions:
    """Everything an executor needs besides the stimulus and the sandbox.

    Attributes:
        model: The model to run, after ``--model`` fan-out (None: the agent's default).
        timeout: Seconds for the whole trial (the kernel also enforces it from outside).
        skills: Skills staged in the sandbox.
        mcp_servers: MCP servers declared for the trial (resolved, nulls removed).
        env: Environment variables for the agent (from ``environment.env``).
        reasoning_effort: Passed to the model where supported.
        constraints: Limits the executor must enforce in flight where it can observe them.
        session_log_dir: A host folder for the executor's raw session log (``events.jsonl``).
        llm: The LLM provider for executors that call models themselves, if configured.
        spec_dir: The folder of the eval file.
        run_id: The run's id.
        key: The trial's identity.
    """

    model: str | None
    timeout: float
    skills: Sequence[SkillRef] = ()
    mcp_servers: Mapping[str, McpServerConfig] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    reasoning_effort: str | None = None
    constraints: Constraints = field(default_factory=Constraints)
    session_log_dir: Path | None = None
    llm: LLMProvider | None = None
    spec_dir: Path | None = None
    run_id: str = ""
    key: TrialKey | None = None


class Executor(Protocol):
    """Drives an agent through a stimulus and records what it did.

    An exception from :meth:`execute` is an operational error of that trial (its record gets
    ``status: error``), never a low score. Executors that cannot honour an option (turns,
    MCP servers, ...) raise :class:`~vally.errors.UnsupportedError`.

    Capabilities are declared in :class:`~vally.contracts.metadata.ExecutorMetadata`
    (``multi_turn`` is checked before any trial starts; ``needs_llm`` makes the run pass
    ``ExecutorOptions.llm``).
    """

    metadata: ClassVar[PluginMetadata]
    Config: ClassVar[type[BaseModel]]

    async def execute(
        self, stimulus: Stimulus, sandbox: Sandbox, options: ExecutorOptions
    ) -> Trajectory:
        """Run the stimulus in the sandbox and return its trajectory."""

    async def shutdown(self) -> None:
        """Release anything held across trials. Called once at the end of the run."""


# --------------------------------------------------------------------------- grader


@dataclass(frozen=True)
class JudgeSettings:
    """Resolved LLM-judge settings (grader config > CLI > spec > environment)."""

    model: str | None = None
    reasoning_effort: str | None = None
    provider: str | None = None
    timeout: float = 120.0


@dataclass(frozen=True)
class GradeContext:
    """What a grader sees.

    Attributes:
        trajectory: The trial's trajectory, already scoped to ``grader.turn`` when set.
        stimulus: The stimulus graded.
        grader: The spec entry (type, name, turn, required, raw config).
        sandbox: The trial's sandbox, still open; None when re-grading saved records
            without a workspace (``vally grade``). Graders that declare ``needs_workspace``
            are then not run: the kernel records an error for them.
        spec_dir: The folder of the eval file (for grader files and scripts).
        llm: The LLM provider when the grader's metadata declares ``needs_llm``.
        judge: Resolved judge settings.
    """

    trajectory: Trajectory
    stimulus: Stimulus
    grader: GraderConfig
    sandbox: Sandbox | None = None
    spec_dir: Path | None = None
    llm: LLMProvider | None = None
    judge: JudgeSettings = field(default_factory=JudgeSettings)


class Grader(Protocol):
    """Checks one trajectory and returns a score in [0, 1] and a pass/fail.

    A grader that cannot decide (missing workspace, judge failure) raises
    :class:`~vally.errors.GradingError`; the kernel records a result with
    ``status: error`` and the trial as errored.
    """

    metadata: ClassVar[GraderMetadata]
    Config: ClassVar[type[BaseModel]]

    async def grade(self, context: GradeContext) -> GraderResult:
        """Grade the trial. ``name`` of the result defaults to the grader's label."""


@dataclass(frozen=True)
class PairwiseContext:
    """What a pairwise judge sees for one pass over one (baseline, treatment) pair.

    The evidence of each run was copied once into ``evidence_dir`` under a neutral folder
    name (``run-1``, ``run-2``); ``a`` and ``b`` say which folder is "A" and which is "B"
    in this pass. With ``delivery == "tools"`` the judge may read the folders only through
    read-only tools confined to ``evidence_dir``, at most ``read_budget`` reads; the first
    message must hold the task, rubric, instructions and file paths, never evidence content.
    With ``delivery == "inline"`` the evidence goes into the prompt (capped), headed
    ``Response A`` and ``Response B``.
    """

    evidence_dir: Path
    a: str
    b: str
    task: str
    rubric: Sequence[str]
    judge: JudgeSettings
    llm: LLMProvider | None
    delivery: Literal["tools", "inline"] = "tools"
    read_budget: int = 40


@dataclass(frozen=True)
class PairwiseVerdict:
    """A judge's answer for one pass: ``{"winner": "A"|"B"|"tie",
    "magnitude": "much"|"slightly"|null, "reasoning": "..."}``."""

    winner: Literal["A", "B", "tie"]
    magnitude: Literal["much", "slightly"] | None
    reasoning: str = ""
    reads: int = 0


@runtime_checkable
class PairwiseJudge(Protocol):
    """A grader that can also compare two runs. Such a grader declares
    ``GraderMetadata(..., pairwise=True)``, which is what ``vally compare`` looks for.

    Failures raise :class:`~vally.errors.LLMError` (``retryable`` decides retries) or
    :class:`~vally.errors.GradingError` (terminal, e.g. an unparseable answer after
    reminders; set ``retryable`` as an attribute to mark it retryable).
    """

    async def judge_pair(self, context: PairwiseContext) -> PairwiseVerdict:
        """Judge one pass and return the verdict from A's and B's point of view."""


# --------------------------------------------------------------------------- providers


@dataclass(frozen=True)
class LoadedEval:
    """An eval spec as a provider produced it, with where it came from."""

    spec: EvalSpec
    source: Path
    """The file the spec was read from (its folder anchors relative paths)."""
    raw: Mapping[str, Any] = field(default_factory=dict)
    """The param-resolved document before validation (for hashing and variant patches)."""


class EvalProvider(Protocol):
    """Turns a file (eval.yaml, a dataset, another tool's benchmark) into eval specs."""

    metadata: ClassVar[PluginMetadata]
    Config: ClassVar[type[BaseModel]]

    def load(self, path: Path, params: Mapping[str, str]) -> list[LoadedEval]:
        """Read ``path`` and return one or more specs.

        Args:
            path: The file named by ``--eval-spec`` or found by discovery.
            params: Param values from ``--param`` and the project, highest precedence first
                already applied.

        Raises:
            ConfigError: The file is invalid (with file and line where possible).
        """


class Exporter(Protocol):
    """Writes an eval spec in another tool's format (``vally export``).

    The reverse of an :class:`EvalProvider`: a Harbor task folder, a benchmark file. The
    exporter's ``Config`` is filled from the ``-- key=value`` arguments of ``vally export``.
    """

    metadata: ClassVar[PluginMetadata]
    Config: ClassVar[type[BaseModel]]

    def export(self, loaded: LoadedEval, output_dir: Path) -> list[Path]:
        """Write ``loaded`` under ``output_dir`` and return what was written.

        Args:
            loaded: The eval spec, with the file it came from (its folder anchors relative
                paths such as ``files[].src``).
            output_dir: The folder to write into (created by the caller).

        Returns:
            The files or folders written, in a stable order.

        Raises:
            ConfigError: The spec uses something the target format cannot express (name the
                stimulus and grader, and say what to change).
        """


class ShardStrategy(Protocol):
    """Picks one shard's slice of a plan. Must be deterministic: the same keys, index and
    total always give the same slice, and the slices of 1..total partition the keys."""

    metadata: ClassVar[PluginMetadata]
    Config: ClassVar[type[BaseModel]]

    def select(self, keys: Sequence[TrialKey], index: int, total: int) -> list[TrialKey]:
        """Return the keys of shard ``index`` (1-based) of ``total``, in plan order."""
