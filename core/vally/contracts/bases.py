"""Base classes that fill in plugin boilerplate. Subclassing them is optional: the kernel
checks behaviour against :mod:`vally.contracts.protocols`, not inheritance."""

from __future__ import annotations

import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from vally.contracts.metadata import GraderMetadata, PluginMetadata
from vally.contracts.protocols import ExecResult, GradeContext, Process, Sandbox
from vally.models.records import GraderResult

ConfigT = TypeVar("ConfigT", bound=BaseModel)


class StrictConfig(BaseModel):
    """Base for plugin ``Config`` models: unknown keys are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class EmptyConfig(StrictConfig):
    """The config of a plugin that takes no options."""


class Plugin(Generic[ConfigT]):
    """Holds the validated config as ``self.config``.

    ``Config`` defaults to the model the class is parameterised with (``BaseGrader[MyConfig]``
    gets ``Config = MyConfig``), so it need not be written twice; ``EmptyConfig`` otherwise.
    """

    metadata: ClassVar[PluginMetadata]
    Config: ClassVar[type[BaseModel]] = EmptyConfig

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "Config" in cls.__dict__:
            return
        for base in getattr(cls, "__orig_bases__", ()):
            for arg in typing.get_args(base):
                if isinstance(arg, type) and issubclass(arg, BaseModel):
                    cls.Config = arg
                    return

    def __init__(self, config: ConfigT | None = None) -> None:
        self.config: ConfigT = config if config is not None else self.Config()  # type: ignore[assignment]


class BaseGrader(Plugin[ConfigT]):
    """Convenience base for graders: implement :meth:`grade`, build results with
    :meth:`result`."""

    metadata: ClassVar[GraderMetadata]

    async def grade(self, context: GradeContext) -> GraderResult:
        """Grade one trial (override)."""
        raise NotImplementedError

    def result(
        self,
        context: GradeContext,
        *,
        passed: bool,
        evidence: str,
        score: float | None = None,
        details: list[GraderResult] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> GraderResult:
        """A :class:`GraderResult` labelled from the spec entry; score defaults to 1/0."""
        return GraderResult(
            name=context.grader.label,
            type=context.grader.type,
            passed=passed,
            score=(1.0 if passed else 0.0) if score is None else score,
            evidence=evidence,
            required=context.grader.required,
            turn=context.grader.turn,
            details=details or [],
            metadata=metadata or {},
        )


class BaseExecutor(Plugin[ConfigT]):
    """Convenience base for executors. Declare capabilities in
    :class:`~vally.contracts.metadata.ExecutorMetadata` (single-turn only unless
    ``multi_turn=True``)."""

    async def shutdown(self) -> None:
        """Nothing to release by default."""


class BaseBackend(Plugin[ConfigT]):
    """Convenience base for backends with no run-wide resources."""

    async def start(self, run_id: str) -> None:
        """Nothing to prepare by default."""

    async def shutdown(self) -> None:
        """Nothing to release by default."""


@dataclass(frozen=True)
class ExecRequest:
    """The arguments of ``Sandbox.exec`` (or of ``Sandbox.spawn``, which sets only ``argv``,
    ``env`` and ``cwd``) as one value, for sandboxes built on :class:`BaseSandbox`. Each
    field means what the parameter of the same name means."""

    argv: Sequence[str]
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    timeout: float | None = None
    stdin: bytes | None = None
    output_limit: int = 1_000_000


class BaseSandbox(Sandbox):
    """Convenience base for sandboxes: implement :meth:`run_command` and
    :meth:`start_process`, which get the arguments of :meth:`exec` and :meth:`spawn` as one
    :class:`ExecRequest`, and the file methods of
    :class:`~vally.contracts.protocols.Sandbox`."""

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
        """Run ``argv`` in the sandbox and wait for it, through :meth:`run_command`."""
        request = ExecRequest(argv, env, cwd, timeout, stdin, output_limit)
        return await self.run_command(request)

    async def spawn(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> Process:
        """Start a long-running process with piped stdio, through :meth:`start_process`."""
        return await self.start_process(ExecRequest(argv, env, cwd))

    async def run_command(self, request: ExecRequest) -> ExecResult:
        """Run one command and wait for it (the work of :meth:`exec`)."""
        raise NotImplementedError

    async def start_process(self, request: ExecRequest) -> Process:
        """Start one long-running process (the work of :meth:`spawn`)."""
        raise NotImplementedError

    async def stop_processes(self) -> None:
        """Stop every process started in the sandbox so far, and everything they started,
        and return once they are gone. The kernel calls it after the executor returned and
        before any grader runs, so nothing the agent left running can change the workspace
        while it is graded. The default does nothing; override it (see
        :class:`~vally.contracts.protocols.Sandbox`)."""


class BaseReporter(Plugin[ConfigT]):
    """Convenience base for reporters. Implement any hook of :mod:`vally.contracts.hookspecs` as a
    method decorated with :data:`vally.hookimpl`. Declare
    ``ReporterMetadata(..., critical=True)`` when a failure must fail the run."""
