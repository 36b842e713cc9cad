"""Experiment hooks: what ``vally experiment run`` asks of hook plugins.

The kernel runs an experiment's trials; it neither compares runs nor merges shards. The
steps of ``vally experiment run`` that do are therefore left to hook plugins: the gate of
``--until-decided``, made before the first trial starts, the decision on the variants once
the run is done (the experiment file's ``promotion:`` rules, ``--compare``), and the seal of
a finished shard that lets ``vally experiment merge`` copy it without reading every record.
vally's own hook plugins are ``compare``, from the package ``vally_compare``, and ``shards``,
from the package ``vally_experiment``; both ship with vally.

A hook plugin is a class in the entry-point group ``vally.hooks``, instantiated with no
arguments, whose methods marked with :data:`vally.hookimpl` are named after the hooks below
(it implements only these: run events go to reporters). Blocking (``VALLY_BLOCK_PLUGINS``),
the distribution filter and ``vally plugins list --kind hook`` work as for every plugin.
Each of the two deciding hooks is answered by one plugin, the first by name that returns
something other than None; the shard hooks are called on every plugin that implements
them. When no plugin answers a deciding hook and the run needs one (``--until-decided``,
``--compare``, a ``promotion:`` section of an unsharded run of two or more variants), the
run stops before its first trial with an error naming what needed it. Without a shard
hook plugin, finished shards are not sealed and merge reads every record.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from vally.contracts.hookspecs import PROJECT, hookspec
from vally.engine.planning.plan import PlannedTrial
from vally.engine.trials.context import TrialGate
from vally.errors import PluginNotFoundError, SourceLocation

if TYPE_CHECKING:
    import pluggy

    from vally.contracts.protocols import LoadedEval
    from vally.engine.options import ExperimentRequest
    from vally.models.promotion import PromotionRules
    from vally.models.records import TrialResultRecord
    from vally.plugins.session import Session

HOOK_PLUGINS = "vally.hooks"
"""The entry-point group of hook plugins."""


class ExperimentGate(TrialGate, Protocol):
    """Decides, while an experiment runs, which of its planned trials still start
    (``--until-decided``), and says afterwards what it decided."""

    def order(self, trials: Sequence[PlannedTrial]) -> list[PlannedTrial]:
        """The order to schedule ``trials`` in (for example round by round)."""
        ...

    def admit(self, trial: PlannedTrial) -> bool:
        """True when ``trial`` should still start; a trial refused is not run and leaves no
        record."""
        ...

    def observe(self, record: TrialResultRecord) -> None:
        """Take a finished trial into account."""
        ...

    def lines(self) -> list[str]:
        """The lines printed once the run is over (what was decided, what it saved)."""
        ...


@dataclass(frozen=True)
class FinishedExperiment:
    """An experiment run that is done, handed to ``vally_experiment_decide``.

    Attributes:
        run_dir: The run's folder: a folder per variant with its ``results.jsonl``, and
            ``report.md``.
        baseline: The baseline variant.
        promotion: The experiment file's ``promotion:`` rules; None without a section.
        request: The options of the run; ``request.compare`` is ``--compare``, and the
            ``judge_*`` fields its judge flags.
        evals: Every eval of every variant, as that variant ran it (its overrides applied).
        params: The ``--param`` values.
        session: The run's plugin session (its project and the plugins it loaded).
    """

    run_dir: Path
    baseline: str
    promotion: PromotionRules | None
    request: ExperimentRequest
    evals: Sequence[LoadedEval]
    params: Mapping[str, str]
    session: Session


@hookspec(firstresult=True)
def vally_experiment_gate(baseline: str, trials: Sequence[PlannedTrial]) -> ExperimentGate | None:
    """Called once before the first trial of ``vally experiment run --until-decided``: return
    the gate that decides which trials still start (None: leave it to another plugin).

    Args:
        baseline: The baseline variant.
        trials: The trials to run, in plan order (every variant's).
    """


@hookspec(firstresult=True)
def vally_experiment_decide(experiment: FinishedExperiment) -> int | None:
    """Called once after an unsharded experiment run of two or more variants whose file has
    a ``promotion:`` section or that was given ``--compare``: decide the variants, compare
    them, print and write what that produces. Return the exit code it asks for: 0, or 1
    when a variant is held, cannot be decided or its comparison fails (the run then exits
    1). None leaves the decision to another plugin.

    Args:
        experiment: The finished run, its rules and its options.
    """


@hookspec
def vally_experiment_shard_opened(shard_dir: Path) -> None:
    """Called when a shard run is about to write its first manifest into ``shard_dir``
    (a new run of the shard, or a resumed one): drop what an earlier run of the shard left
    there that this run makes stale.

    Args:
        shard_dir: The shard's folder (``<output-dir>/<run-id>/shard-<i>-of-<n>``).
    """


@hookspec
def vally_experiment_shard_closed(
    shard_dir: Path, manifest: Mapping[str, Any], snapshot: Mapping[str, Any]
) -> None:
    """Called once a shard has run every trial it selected and its final
    ``shard-manifest.json`` is written (not for an interrupted or failed shard).

    Args:
        shard_dir: The shard's folder.
        manifest: The manifest just written.
        snapshot: The run's plan snapshot (``plan-snapshot.json``).

    Raises:
        VallyError: What the plugin wanted to write could not be written (the run lists it
            among its missing outputs).
    """


class ExperimentHooks:
    """The installed hook plugins, loaded on first use, and the calls the run makes.

    Args:
        session: The run's plugin session (its registries serve ``vally.hooks``).
    """

    def __init__(self, session: Session) -> None:
        self.session = session
        self._manager: pluggy.PluginManager | None = None

    @property
    def manager(self) -> pluggy.PluginManager:
        """A plugin manager with these hooks and every installed hook plugin.

        Raises:
            PluginError: A hook plugin cannot be loaded or implements an unknown hook.
        """
        if self._manager is None:
            self._manager = _hook_manager(self.session)
        return self._manager

    def require(self, hook: str, what: str, *, where: Path | None = None) -> None:
        """Fail unless a hook plugin implements ``hook``, which ``what`` needs.

        Raises:
            PluginNotFoundError: None does.
        """
        if not getattr(self.manager.hook, hook).get_hookimpls():
            raise _missing(hook, what, where)

    def gate(self, baseline: str, trials: Sequence[PlannedTrial]) -> ExperimentGate:
        """The gate of ``--until-decided``.

        Raises:
            PluginNotFoundError: No hook plugin makes one.
        """
        self.require("vally_experiment_gate", "--until-decided")
        gate = self.manager.hook.vally_experiment_gate(baseline=baseline, trials=trials)
        if gate is None:
            raise _missing("vally_experiment_gate", "--until-decided", None)
        return gate  # type: ignore[no-any-return]

    def shard_opened(self, shard_dir: Path) -> None:
        """Tell every hook plugin that a shard run starts writing into ``shard_dir``."""
        self.manager.hook.vally_experiment_shard_opened(shard_dir=shard_dir)

    def shard_closed(
        self, shard_dir: Path, manifest: Mapping[str, Any], snapshot: Mapping[str, Any]
    ) -> None:
        """Tell every hook plugin that the shard in ``shard_dir`` finished.

        Raises:
            VallyError: A plugin could not write what it writes for a finished shard.
        """
        self.manager.hook.vally_experiment_shard_closed(
            shard_dir=shard_dir, manifest=manifest, snapshot=snapshot
        )

    def decide(self, experiment: FinishedExperiment) -> int:
        """The decision on a finished run's variants; its exit code.

        Raises:
            PluginNotFoundError: No hook plugin decides.
        """
        code = self.manager.hook.vally_experiment_decide(experiment=experiment)
        if code is None:
            raise _missing("vally_experiment_decide", "deciding the variants", None)
        return int(code)


def _missing(hook: str, what: str, where: Path | None) -> PluginNotFoundError:
    need = "need" if " and " in what else "needs"
    return PluginNotFoundError(
        f"{what} {need} a hook plugin implementing {hook} (group {HOOK_PLUGINS}), and none "
        "is installed",
        location=SourceLocation(str(where)) if where is not None else None,
        hint="vally's own is the hook plugin 'compare' of the package vally_compare, which "
        "comes with vally: reinstall vally, and check that VALLY_BLOCK_PLUGINS does not block "
        "'compare' (see 'vally plugins list --kind hook')",
    )


def _hook_manager(session: Session) -> pluggy.PluginManager:
    """A plugin manager with the hooks of this module and every hook plugin registered, the
    first by name answering first.

    Raises:
        PluginError: A hook plugin cannot be loaded, constructed or registered.
    """
    import pluggy

    from vally.errors import PluginLoadError, PluginValidationError
    from vally.plugins.groups import HOOK_KIND

    manager = pluggy.PluginManager(PROJECT)
    manager.add_hookspecs(sys.modules[__name__])
    registry = session.registries[HOOK_KIND]
    for name in sorted(registry.names(), reverse=True):  # pluggy calls the last one first
        registration = registry.get(name)
        where = f"hook plugin {name!r} ({registration.provenance.label()})"
        try:
            plugin = registration.cls()
        except Exception as exc:
            raise PluginLoadError(
                f"{where} failed to construct: {type(exc).__name__}: {exc}",
                hint=f"fix or uninstall it, or block it with VALLY_BLOCK_PLUGINS={name}",
            ) from exc
        try:
            manager.register(plugin, name=name)
            manager.check_pending()
        except (pluggy.PluginValidationError, ValueError) as exc:
            raise PluginValidationError(
                f"{where} cannot be registered: {exc}",
                hint="a hook plugin implements only the hooks of vally.engine.experiment_hooks, "
                "named and taking arguments as there",
            ) from exc
    return manager
