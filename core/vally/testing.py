"""Test helpers for plugin authors (and vally's own tests).

Build inputs from simple arguments and run a plugin through the same validation path the
runner uses::

    from vally.testing import grade, make_trajectory

    def test_short_answer_fails():
        result = grade(WordCountGrader, make_trajectory("two words"), config={"min_words": 3})
        assert not result.passed

Nothing here touches the network or the installed plugins unless asked to.
"""

from __future__ import annotations

import asyncio
import posixpath
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from vally.contracts.bases import BaseReporter, BaseSandbox, ExecRequest
from vally.contracts.hookspecs import hookimpl
from vally.contracts.metadata import ReporterMetadata
from vally.contracts.protocols import ExecResult, GradeContext, Process, Sandbox
from vally.errors import BackendError, PathEscapeError
from vally.models.records import GraderResult
from vally.models.spec import GraderConfig, Stimulus
from vally.models.trajectory import (
    Trajectory,
    TrajectoryMetadata,
    TrajectoryRecorder,
    compute_metrics,
)
from vally.plugins.session import Session

__all__ = [
    "FakeSandbox",
    "RecordingReporter",
    "grade",
    "grade_async",
    "make_session",
    "make_stimulus",
    "make_trajectory",
]

ToolCallSpec = str | tuple[str, Mapping[str, Any]] | Mapping[str, Any]
"""A tool call for :func:`make_trajectory`: a tool name, ``(name, arguments)``, or a dict
with ``name`` and optional ``arguments``, ``result``, ``success``, ``server``."""


def make_stimulus(
    prompt: str = "Do the task.",
    *,
    name: str = "test-stimulus",
    graders: Sequence[Mapping[str, Any] | GraderConfig] = (),
    **fields: Any,
) -> Stimulus:
    """A valid :class:`~vally.models.Stimulus` from a prompt and optional extra fields.

    Args:
        prompt: The prompt (ignored when ``turns=[...]`` is given in ``fields``).
        name: The stimulus name.
        graders: Grader entries (``{"type": ..., "config": {...}}``).
        **fields: Any other stimulus field (``tags``, ``environment``, ``turns``...).
    """
    data: dict[str, Any] = {"name": name, **fields}
    if "turns" not in fields:
        data["prompt"] = prompt
    data["graders"] = [
        g if isinstance(g, GraderConfig) else GraderConfig.model_validate(g) for g in graders
    ]
    return Stimulus.model_validate(data)


def _tool_call(spec: ToolCallSpec) -> tuple[str, Any, Any, bool, str | None]:
    if isinstance(spec, str):
        return spec, {}, None, True, None
    if isinstance(spec, tuple):
        return spec[0], dict(spec[1]), None, True, None
    return (
        str(spec["name"]),
        spec.get("arguments", {}),
        spec.get("result"),
        bool(spec.get("success", True)),
        spec.get("server"),
    )


def make_trajectory(
    output: str = "",
    *,
    tool_calls: Iterable[ToolCallSpec] = (),
    input_tokens: int = 0,
    output_tokens: int = 0,
    model: str | None = None,
    errors: Iterable[str] = (),
    stimulus: Stimulus | None = None,
    prompt: str | None = None,
    wall_time_ms: int = 0,
    end_reason: str = "completed",
    work_dir: str = "",
    executor: str = "test",
) -> Trajectory:
    """A consistent trajectory from simple arguments; metrics are computed from the events.

    Events, in order: the user prompt, each tool call with its result, one token-usage event
    (when tokens are given), each error, and the final assistant message ``output``.

    Args:
        output: The agent's final answer.
        tool_calls: Tools called (see :data:`ToolCallSpec`).
        input_tokens: Input tokens of the single model call recorded.
        output_tokens: Output tokens of that call.
        model: The model name recorded in the usage event and metadata.
        errors: Error messages recorded as ``error`` events.
        stimulus: The stimulus (default: :func:`make_stimulus` with ``prompt``).
        prompt: The prompt of the default stimulus.
        wall_time_ms: The wall time written into the metrics.
        end_reason: Why the run ended.
        work_dir: The workspace path recorded.
        executor: The executor name recorded in the metadata.
    """
    stim = stimulus or make_stimulus(prompt or "Do the task.")
    recorder = TrajectoryRecorder()
    recorder.user_message(stim.prompts[0])
    for number, spec in enumerate(tool_calls, start=1):
        name, arguments, result, success, server = _tool_call(spec)
        recorder.tool_call(name, f"call-{number}", arguments, server=server)
        recorder.tool_result(name, f"call-{number}", result, success=success, server=server)
    if input_tokens or output_tokens:
        recorder.token_usage(input_tokens, output_tokens, model=model)
    for message in errors:
        recorder.error(message)
    if output:
        recorder.assistant_message(output)
    events = recorder.events
    return Trajectory.model_validate(
        {
            "stimulus": stim,
            "events": events,
            "metrics": compute_metrics(events, wall_time_ms=wall_time_ms),
            "output": output,
            "work_dir": work_dir,
            "metadata": TrajectoryMetadata(model=model, executor=executor),
            "end_reason": end_reason,
        }
    )


def make_session(*classes: type, session: Session | None = None) -> Session:
    """A fresh :class:`~vally.plugins.session.Session` with ``classes`` registered by their
    ``metadata.kind`` (installed plugins stay resolvable too)."""
    result = session or Session()
    registrar = result.registrar(source="test")
    for cls in classes:
        registrar.add(cls)
    return result


async def grade_async(
    grader_cls: type,
    trajectory: Trajectory,
    config: Mapping[str, Any] | None = None,
    *,
    sandbox: Sandbox | None = None,
    name: str | None = None,
    required: bool = False,
    session: Session | None = None,
    **context: Any,
) -> GraderResult:
    """Like :func:`grade`, for tests that already run an event loop."""
    sess = make_session(grader_cls, session=session)
    plugin_name = grader_cls.metadata.name  # type: ignore[attr-defined]
    grader = sess.create("grader", plugin_name, config, where="test")
    entry = GraderConfig(type=plugin_name, config=dict(config or {}), name=name, required=required)
    ctx = GradeContext(
        trajectory=trajectory,
        stimulus=trajectory.stimulus,
        grader=entry,
        sandbox=sandbox,
        **context,
    )
    result: GraderResult = await grader.grade(ctx)
    return result


def grade(
    grader_cls: type,
    trajectory: Trajectory,
    config: Mapping[str, Any] | None = None,
    **options: Any,
) -> GraderResult:
    """Run one grader on a trajectory through the kernel's validation path.

    The class is checked like an installed plugin (metadata, kind, ``Config``), the config
    is validated strictly (a bad config raises :class:`~vally.errors.ConfigError`), then the
    grader is built and ``grade`` awaited.

    Args:
        grader_cls: The grader class.
        trajectory: What to grade (see :func:`make_trajectory`).
        config: The grader's ``config:`` mapping.
        **options: As for :func:`grade_async`: ``sandbox`` (an open sandbox for graders that
            read the workspace), ``name`` and ``required`` (the spec entry's), ``session`` (a
            session to use, default a fresh one), and other
            :class:`~vally.contracts.protocols.GradeContext` fields (``spec_dir``, ``llm``,
            ``judge``).
    """
    return asyncio.run(grade_async(grader_cls, trajectory, config, **options))


class RecordingReporter(BaseReporter[Any]):
    """A reporter that records every run event it receives, for assertions.

    ``events`` holds ``(hook_name, arguments)`` pairs in delivery order.
    """

    metadata: ClassVar[ReporterMetadata] = ReporterMetadata(
        name="recording", description="Records run events (for tests)."
    )

    def __init__(self, config: Any = None) -> None:
        super().__init__(config)
        self.events: list[tuple[str, dict[str, Any]]] = []

    def names(self) -> list[str]:
        """The hook names received, in order."""
        return [name for name, _ in self.events]

    @hookimpl
    def vally_run_start(self, run: Any) -> None:
        """Record the run start."""
        self.events.append(("vally_run_start", {"run": run}))

    @hookimpl
    def vally_trial_start(self, run: Any, key: Any) -> None:
        """Record a trial start."""
        self.events.append(("vally_trial_start", {"run": run, "key": key}))

    @hookimpl
    def vally_grader_result(self, run: Any, key: Any, result: Any) -> None:
        """Record a grader result."""
        self.events.append(("vally_grader_result", {"run": run, "key": key, "result": result}))

    @hookimpl
    def vally_trial_end(self, run: Any, record: Any) -> None:
        """Record a trial end."""
        self.events.append(("vally_trial_end", {"run": run, "record": record}))

    @hookimpl
    def vally_run_end(self, run: Any, outcome: Any) -> None:
        """Record the run end."""
        self.events.append(("vally_run_end", {"run": run, "outcome": outcome}))


ExecHandler = Callable[[list[str]], ExecResult]
"""Answers a command run in a :class:`FakeSandbox`: argv in, result out."""


class FakeSandbox(BaseSandbox):
    """An in-memory :class:`~vally.contracts.protocols.Sandbox` for grader tests.

    Files live in a dict; commands are recorded in :attr:`commands` and answered by
    ``exec_handler`` (default: exit 0 with no output). Nothing touches the host except
    ``copy_in``/``copy_out``, which read and write the host paths given.

    Args:
        files: Initial workspace files, ``{"relative/path": text or bytes}``.
        exec_handler: Answers each command.
        workdir: The workspace path reported to the code under test.
    """

    def __init__(
        self,
        files: Mapping[str, str | bytes] | None = None,
        *,
        exec_handler: ExecHandler | None = None,
        workdir: str = "/workspace",
    ) -> None:
        self.workdir = workdir
        self.host_workdir: Path | None = None
        self.files: dict[str, bytes] = {}
        for path, data in (files or {}).items():
            self.files[self._key(path)] = data.encode() if isinstance(data, str) else data
        self.exec_handler = exec_handler
        self.commands: list[list[str]] = []
        self.closed = False

    def _key(self, path: str) -> str:
        if path == self.workdir:
            path = "."
        elif path.startswith(self.workdir + "/"):
            path = path[len(self.workdir) + 1 :]
        normalized = posixpath.normpath(path)
        if normalized == ".." or normalized.startswith("../") or normalized.startswith("/"):
            raise PathEscapeError(f"path {path!r} is outside the sandbox workspace")
        return "" if normalized == "." else normalized

    async def run_command(self, request: ExecRequest) -> ExecResult:
        """Record the command and answer it through ``exec_handler``."""
        argv = list(request.argv)
        self.commands.append(argv)
        if self.exec_handler is None:
            return ExecResult(exit_code=0, stdout="", stderr="")
        return self.exec_handler(list(argv))

    async def start_process(self, request: ExecRequest) -> Process:
        """Not supported by the fake."""
        raise BackendError("FakeSandbox cannot spawn long-running processes")

    async def read_file(self, path: str) -> bytes:
        """A workspace file's bytes; ``FileNotFoundError`` when absent."""
        key = self._key(path)
        if key not in self.files:
            raise FileNotFoundError(path)
        return self.files[key]

    async def write_file(self, path: str, data: bytes) -> None:
        """Create or replace a workspace file."""
        self.files[self._key(path)] = data

    async def list_files(self, path: str = ".") -> list[str]:
        """Every file below ``path``, sorted."""
        prefix = self._key(path)
        return sorted(
            key for key in self.files if not prefix or key == prefix or key.startswith(prefix + "/")
        )

    async def copy_in(self, host_src: Path, dest: str) -> None:
        """Copy a host file or folder into the workspace."""
        base = self._key(dest)
        if host_src.is_dir():
            for file in sorted(p for p in host_src.rglob("*") if p.is_file()):
                relative = file.relative_to(host_src).as_posix()
                self.files[posixpath.join(base, relative) if base else relative] = file.read_bytes()
        else:
            self.files[base] = host_src.read_bytes()

    async def copy_out(self, src: str, host_dest: Path) -> None:
        """Copy a workspace file or folder to the host."""
        key = self._key(src)
        if key in self.files:
            host_dest.parent.mkdir(parents=True, exist_ok=True)
            host_dest.write_bytes(self.files[key])
            return
        for path in await self.list_files(src):
            target = host_dest / (path[len(key) + 1 :] if key else path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(self.files[path])

    async def close(self) -> None:
        """Mark the sandbox closed."""
        self.closed = True
