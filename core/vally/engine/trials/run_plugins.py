"""Every plugin a run uses, created in one pass over what its plan needs.

:func:`create_run_plugins` walks the plan once: the executors and graders its trials name
(executors checked against multi-turn stimuli), the reporters, and, unless it is a dry run,
the backend, the LLM provider when a planned executor or grader needs one, and the runner.
Every problem found on the way is kept (:class:`PluginProblems`), so a user with a
misspelled grader, a bad reporter config and an unknown backend hears of all three at once.
One problem is raised as it is; several are raised together as one
:class:`~vally.errors.PluginError` that lists them. Nothing is run or written before.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from vally.engine.trials import components
from vally.errors import PluginError, VallyError

if TYPE_CHECKING:
    from vally.contracts.protocols import Executor, Runner
    from vally.engine.planning.plan import Plan, PluginRef
    from vally.engine.trials.components import BackendChoice, ReporterChoice, RunnerChoice
    from vally.engine.trials.context import GraderFactory
    from vally.models.project import ProjectConfig
    from vally.plugins.session import Session


class PluginChoices(Protocol):
    """What a run request says about its plugins (:class:`vally.engine.run.RunRequest` has
    these attributes)."""

    @property
    def session(self) -> Session:
        """The plugin session the plugins are created through."""

    @property
    def project(self) -> ProjectConfig:
        """The project file's settings (defaults.backend, llm, plugins)."""

    @property
    def project_root(self) -> Path | None:
        """The folder of ``.vally.yaml``; None without one."""

    @property
    def backend(self) -> BackendChoice:
        """``--backend`` and ``--backend-args``."""

    @property
    def runner(self) -> RunnerChoice | None:
        """``--runner`` and its args; None runs the trials in this process."""

    @property
    def reporters(self) -> Sequence[ReporterChoice]:
        """The reporters chosen by the command, with their configs."""

    @property
    def reporter_plugins(self) -> Sequence[str]:
        """``--reporter-plugin`` specifiers."""

    @property
    def plugin_base(self) -> Path:
        """Where relative plugin specifiers resolve."""

    @property
    def skip_grade(self) -> bool:
        """Execute without grading (graders are not validated)."""


class PluginProblems:
    """The problems found while a run's plugins are created, kept so that one pass reports
    them all (the same message twice is kept once)."""

    def __init__(self) -> None:
        self.found: list[VallyError] = []

    @contextlib.contextmanager
    def collect(self) -> Iterator[None]:
        """Keep a :class:`~vally.errors.VallyError` raised inside the block and go on."""
        try:
            yield
        except VallyError as exc:
            if all(exc.render() != seen.render() for seen in self.found):
                self.found.append(exc)

    def raise_if_any(self) -> None:
        """Raise the one problem found as it is, or several as one listing error.

        Raises:
            VallyError: The problem found, when there is one.
            PluginError: Two or more problems, each listed with its location and hint.
        """
        if len(self.found) == 1:
            raise self.found[0]
        if self.found:
            listed = "\n".join(
                f"  {number}. " + problem.render().replace("\n", "\n     ")
                for number, problem in enumerate(self.found, 1)
            )
            raise PluginError(
                f"{len(self.found)} problems with the run's plugins:\n{listed}",
                hint="fix each of them; nothing was run or written",
            )


@dataclass
class RunPlugins:
    """The plugins of one run, all created (see :func:`create_run_plugins`).

    Attributes:
        executors: One executor per distinct reference (name and config).
        create_grader: Hands out one shared grader per distinct reference.
        reporters: The reporters, by name, in delivery order (empty for ``runs: 0``).
        backend: The backend; None for a dry run or ``runs: 0``.
        llm: The LLM provider when a planned executor or grader needs one.
        runner: The ``--runner`` plugin; None runs the trials in this process.
    """

    executors: dict[PluginRef, Executor]
    create_grader: GraderFactory
    reporters: list[tuple[str, object]] = field(default_factory=list)
    backend: Any = None
    llm: Any = None
    runner: Runner | None = None


def create_run_plugins(choices: PluginChoices, plan: Plan, *, dry_run: bool) -> RunPlugins:
    """Create every plugin ``plan`` needs with the request's ``choices``, in one pass.

    A plan with nothing to run (``runs: 0``, the lint-only contract) still has every
    executor and grader its specs name checked, and creates nothing else; a dry run creates
    no backend, LLM provider or runner.

    Raises:
        VallyError: The one problem found (a plugin not installed, a config that does not
            validate, a multi-turn stimulus for an executor without turns).
        PluginError: Several problems, listed together.
    """
    session, distinct, problems = choices.session, plan.distinct_trials, PluginProblems()
    executors = components.build_executors(session, distinct, collect=problems.collect)
    create_grader = components.build_grader_factory(
        session, distinct, validate=not choices.skip_grade, collect=problems.collect
    )
    plugins = RunPlugins(executors, create_grader)
    classes_known = not problems.found
    if plan.lint_only:
        components.validate_unplanned(
            plan, session, skip_grade=choices.skip_grade, collect=problems.collect
        )
        problems.raise_if_any()
        return plugins
    with problems.collect():  # created even for a dry run: they open nothing until the run
        plugins.reporters = components.create_reporters(
            session, choices.reporters, choices.reporter_plugins, base_dir=choices.plugin_base
        )
    if not dry_run:
        _create_execution_plugins(choices, plan, plugins, problems, classes_known=classes_known)
    problems.raise_if_any()
    return plugins


def _create_execution_plugins(
    choices: PluginChoices,
    plan: Plan,
    plugins: RunPlugins,
    problems: PluginProblems,
    *,
    classes_known: bool,
) -> None:
    """The backend, the LLM provider and the runner. Whether an LLM provider is needed is
    read off the executors' and graders' classes, so only when they all resolved
    (``classes_known``)."""
    session, backend, runner = choices.session, choices.backend, choices.runner
    with problems.collect():
        plugins.backend = components.build_backend(
            session,
            choices.project,
            flag_spec=backend.specifier,
            flag_args=backend.args,
            flag_base=backend.base_dir or choices.plugin_base,
            project_root=choices.project_root,
        )
    if classes_known:
        with problems.collect():
            plugins.llm = components.llm_provider_for(
                session, choices.project, plan.distinct_trials
            )
    if runner is not None:
        with problems.collect():
            plugins.runner = components.build_runner(
                session, runner.specifier, runner.args, base_dir=choices.plugin_base
            )
