"""Building a run's components from its plan: executors, graders, backend, LLM provider, and
the evals themselves through an eval provider. Shared by ``vally eval`` and
``vally experiment run`` so both validate and construct plugins the same way, before any
trial starts."""

from __future__ import annotations

import contextlib
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vally.engine.planning.plan import PluginRef
from vally.engine.trials.context import GraderFactory
from vally.errors import (
    ConfigError,
    PluginNotFoundError,
    SourceLocation,
    UnsupportedError,
    VallyError,
)
from vally.plugins import capabilities
from vally.plugins.defaults import DEFAULT_BACKEND, DEFAULT_EVAL_PROVIDER
from vally.specs.yamlio import load_yaml

if TYPE_CHECKING:
    from vally.contracts.protocols import Executor, LoadedEval, Runner
    from vally.engine.planning.plan import Plan, PlannedTrial
    from vally.engine.records.run_folder import Scrubber
    from vally.models.project import ProjectConfig
    from vally.models.spec import GraderConfig
    from vally.plugins.session import Session


@dataclass(frozen=True)
class BackendChoice:
    """Which backend runs the trials.

    Attributes:
        specifier: A backend name or plugin specifier (``--backend``); None for the
            project's ``defaults.backend``, else the default backend.
        args: Its config (``--backend-args``).
        base_dir: Where a relative specifier resolves.
    """

    specifier: str | None = None
    args: Mapping[str, Any] = field(default_factory=dict)
    base_dir: Path | None = None


@dataclass(frozen=True)
class RunnerChoice:
    """Where the trials execute (``--runner``).

    Attributes:
        specifier: A runner name (``local``, ``ray``) or plugin specifier.
        args: Its config (``--runner-args``, ``--ray-address``).
    """

    specifier: str
    args: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ReporterChoice:
    """One reporter the run delivers its events to.

    Attributes:
        name: The reporter's plugin name.
        config: Its config.
        where: Where it was chosen (a flag), for error messages.
    """

    name: str
    config: Mapping[str, Any] = field(default_factory=dict)
    where: str = ""


@contextlib.contextmanager
def located(where: str, loaded: LoadedEval | None = None, *path: Any) -> Iterator[None]:
    """Prefix a plugin-not-found error with the place that named the plugin; with the eval
    ``loaded``, point it (or a config error) at ``path``'s line in the eval's file."""
    try:
        yield
    except (PluginNotFoundError, ConfigError) as exc:
        exc.location = exc.location or (_node(loaded, path) if loaded else None)
        if not isinstance(exc, PluginNotFoundError):
            raise
        message = f"{where}: {exc.message}"
        raise PluginNotFoundError(message, hint=exc.hint, location=exc.location) from None


def _node(loaded: LoadedEval, path: Sequence[Any]) -> SourceLocation:
    """Where ``path`` is written in the eval's file (a YAML file is read again: only an
    error asks): pairs of a list's key and an item's name or grader config."""
    at: list[Any] = []
    node: Any = loaded.raw
    for part, key in zip(path[::2], path[1::2], strict=False):
        items = (node.get(part) if isinstance(node, Mapping) else None) or []
        found = [i for i, item in enumerate(items) if isinstance(item, dict) and _is(item, key)]
        if not found:
            break
        at, node = [*at, part, found[0]], items[found[0]]
    if loaded.source.suffix in (".yaml", ".yml"):
        with contextlib.suppress(VallyError):
            return load_yaml(loaded.source).positions.location(at)
    return SourceLocation(str(loaded.source))


def _is(item: dict[str, Any], key: Any) -> bool:
    if isinstance(key, str):
        return item.get("name") == key
    return (item.get("type"), item.get("config") or {}) == (key.type, dict(key.config or {}))


Collect = Callable[[], contextlib.AbstractContextManager[None]]
"""Wraps the creation of one plugin: :func:`contextlib.nullcontext` lets its error propagate;
:meth:`~vally.engine.trials.run_plugins.PluginProblems.collect` keeps it and goes on."""


def build_executors(
    session: Session, trials: Sequence[PlannedTrial], *, collect: Collect = contextlib.nullcontext
) -> dict[PluginRef, Executor]:
    """One executor per distinct reference (name and config), checked for multi-turn support.

    Raises:
        PluginNotFoundError: An executor is not installed (prefixed with the eval file).
        ConfigError: An executor config does not validate.
        UnsupportedError: A multi-turn stimulus meets an executor without turn support.
    """
    executors: dict[PluginRef, Executor] = {}
    for trial in trials:
        ref = trial.executor_ref
        if ref not in executors:
            where = f"{trial.loaded.source}: defaults.executor"
            with collect(), located(where):
                executors[ref] = session.create(
                    "executor", ref.name, trial.executor.config, where=where
                )
        if ref not in executors:
            continue
        with collect():
            _check_turns(executors[ref], trial)
    return executors


def _check_turns(executor: Executor, trial: PlannedTrial) -> None:
    """A multi-turn stimulus needs an executor that supports turns."""
    if trial.stimulus.is_multi_turn and not capabilities.supports_turns(executor):
        raise UnsupportedError(
            f"executor {trial.executor_ref.name!r} does not support turns, but stimulus "
            f"{trial.stimulus.name!r} of {trial.loaded.source} is multi-turn",
            hint="use an executor that supports multi-turn sessions, or write the "
            "stimulus as one prompt",
        )


KNOWN_GRADER_ENTRIES = 1024
"""Grader entries a factory remembers by identity (the most recent ones): a run's trials of
one stimulus come together, and the others cost a canonical JSON each, so a large plan's
factory stays small."""


def build_grader_factory(
    session: Session,
    trials: Sequence[PlannedTrial],
    *,
    validate: bool = True,
    collect: Collect = contextlib.nullcontext,
) -> GraderFactory:
    """Validate every planned grader once (when ``validate``) and return a factory that
    hands out one shared instance per distinct reference (type and config)."""
    graders: dict[PluginRef, Any] = {}
    # recent entries by identity: no canonical JSON for a stimulus's further trials
    known: dict[int, tuple[GraderConfig, Any]] = {}

    def remember(config: GraderConfig, grader: Any) -> None:
        key = id(config)
        if key not in known and len(known) >= KNOWN_GRADER_ENTRIES:
            del known[next(iter(known))]  # the oldest, for a new entry only
        known[key] = (config, grader)

    if validate:
        for trial in trials:
            for config in trial.graders:
                ref = PluginRef.of(config.type, config.config)
                if ref not in graders:
                    where = f"stimulus {trial.stimulus.name!r}"
                    at = ("stimuli", trial.stimulus.name, "graders", config)
                    with collect(), located(where, trial.loaded, *at):
                        graders[ref] = session.create(
                            "grader", config.type, config.config, where=where
                        )
                remember(config, graders.get(ref))

    def create_grader(config: GraderConfig) -> Any:
        entry, found = known.get(id(config), (None, None))
        if entry is config and found is not None:
            return found
        ref = PluginRef.of(config.type, config.config)
        found = graders.get(ref)
        if found is None:
            found = graders[ref] = session.create("grader", config.type, config.config)
        remember(config, found)
        return found

    return create_grader


def listify_args(cls: Any, args: Mapping[str, Any]) -> dict[str, Any]:
    """Wrap a single ``--backend-args`` value in a list when the backend's config field is a
    list (a repeated key already is one)."""
    fields = getattr(getattr(cls, "Config", None), "model_fields", {})
    out: dict[str, Any] = {}
    for key, value in args.items():
        annotation = getattr(fields.get(key), "annotation", None)
        origins = {typing.get_origin(annotation)} | {
            typing.get_origin(a) for a in typing.get_args(annotation)
        }
        out[key] = [value] if isinstance(value, str) and list in origins else value
    return out


def build_backend(
    session: Session,
    project: ProjectConfig,
    *,
    flag_spec: str | None,
    flag_args: Mapping[str, Any],
    flag_base: Path,
    project_root: Path | None,
) -> Any:
    """The selected backend: ``--backend`` (resolved from ``flag_base``) with
    ``--backend-args``, else ``.vally.yaml defaults.backend`` with its args, else ``local``."""
    spec, args, base, where = flag_spec, dict(flag_args), flag_base, "--backend-args"
    if spec is None and project.defaults.backend is not None:
        spec = project.defaults.backend.name
        args = dict(project.defaults.backend.args)
        base = project_root or flag_base
        where = ".vally.yaml defaults.backend"
    name = session.resolve_single("backend", spec or DEFAULT_BACKEND, base_dir=base)
    cls = session.plugin_class("backend", name)
    return session.create("backend", name, listify_args(cls, args), where=where)


def build_runner(
    session: Session, specifier: str, args: Mapping[str, Any], *, base_dir: Path
) -> Runner:
    """The ``--runner`` plugin (resolved from ``base_dir``) with its ``--runner-args``.

    Raises:
        PluginNotFoundError: The runner is not installed (``ray`` names its extra).
    """
    try:
        name = session.resolve_single("runner", specifier, base_dir=base_dir)
    except PluginNotFoundError as exc:
        hint = exc.hint
        if specifier == "ray":
            hint = "install the Ray runner with: pip install 'vally[ray]'"
        raise PluginNotFoundError(f"--runner: {exc.message}", hint=hint) from None
    cls = session.plugin_class("runner", name)
    return session.create("runner", name, listify_args(cls, args), where="--runner-args")


def needs_llm(session: Session, trials: Sequence[PlannedTrial]) -> bool:
    """True when a planned executor or grader declares ``needs_llm``: it calls models
    through the project's provider."""
    executors = sorted({trial.executor.name for trial in trials})
    graders = sorted({config.type for trial in trials for config in trial.graders})
    return any(
        capabilities.needs_llm(session.plugin_class("executor", n)) for n in executors
    ) or any(capabilities.needs_llm(session.plugin_class("grader", n)) for n in graders)


def llm_provider_for(
    session: Session, project: ProjectConfig, trials: Sequence[PlannedTrial]
) -> Any | None:
    """The project's LLM provider (``.vally.yaml`` ``llm:``) when the plan needs one."""
    if not needs_llm(session, trials):
        return None
    from vally.engine.trials.llm_config import provider_config_from_settings

    settings = project.llm
    return session.create(
        "llm_provider",
        settings.provider,
        provider_config_from_settings(settings),
        where=".vally.yaml llm",
    )


def load_evals(
    session: Session,
    project: ProjectConfig,
    files: Sequence[Path],
    params: Mapping[str, str],
    *,
    provider_spec: str | None,
    base: Path,
) -> list[LoadedEval]:
    """Load eval files with the selected eval provider, each document held packed
    (:class:`vally.specs.packed.PackedDocument`: the run reads it only a few times).

    ``provider_spec`` (``--eval-plugin``, resolved from ``base``) replaces project loading;
    without it ``.vally.yaml defaults.eval_provider`` is used, else the built-in YAML loader.
    """
    provider_base, where = base, "--eval-plugin"
    if provider_spec is None and project.defaults.eval_provider:
        provider_spec = project.defaults.eval_provider
        session.load_project_plugins("eval_provider")
        provider_base, where = session.project_root, ".vally.yaml defaults.eval_provider"
    if provider_spec is None:
        provider_spec, where = DEFAULT_EVAL_PROVIDER, "the default eval provider"
    name = session.resolve_single("eval_provider", provider_spec, base_dir=provider_base)
    provider = session.create("eval_provider", name, {}, where=where)
    from vally.specs.packed import packed_eval

    loaded: list[LoadedEval] = []
    for file in files:
        loaded.extend(packed_eval(item) for item in provider.load(file, params))
    return loaded


def create_reporters(
    session: Session,
    choices: Sequence[ReporterChoice],
    specifiers: Sequence[str],
    *,
    base_dir: Path,
) -> list[tuple[str, object]]:
    """The run's reporters, by name: the chosen ones with their config, then those named by
    ``--reporter-plugin`` (and the experiment file), then ``.vally.yaml plugins.reporter``;
    a name already chosen is not created twice.

    Raises:
        PluginError, ConfigError: A reporter is not installed or its config is invalid.
    """
    created: dict[str, object] = {}
    for choice in choices:
        created[choice.name] = session.create(
            "reporter", choice.name, choice.config, where=choice.where
        )
    names = session.load_plugins("reporter", specifiers, base_dir=base_dir) if specifiers else []
    for name in names:
        if name not in created:
            created[name] = session.create("reporter", name, {}, where="--reporter-plugin")
    for name in session.load_project_plugins("reporter"):
        if name not in created:
            created[name] = session.create(
                "reporter", name, {}, where=".vally.yaml plugins.reporter"
            )
    return list(created.items())


def validate_unplanned(
    plan: Plan, session: Session, *, skip_grade: bool, collect: Collect = contextlib.nullcontext
) -> None:
    """With nothing to run (``runs: 0``), still check that every executor and grader the
    specs name exists and accepts its config (the lint-only contract)."""
    for planned in plan.evals:
        spec = planned.loaded.spec
        ref = spec.defaults.executor
        if ref is not None:
            where = f"{planned.loaded.source}: defaults.executor"
            with collect(), located(where):
                session.create("executor", ref.name, ref.config, where=where)
        if skip_grade:
            continue
        for stimulus in spec.stimuli:
            for config in [*spec.graders, *stimulus.graders]:
                where = f"stimulus {stimulus.name!r}"
                at = ("stimuli", stimulus.name, "graders", config)
                with collect(), located(where, planned.loaded, *at):
                    session.create("grader", config.type, config.config, where=where)


def scrubber_for(trials: Sequence[PlannedTrial], backend: Any = None) -> Scrubber:
    """A scrubber for the run
    (see :meth:`~vally.engine.records.run_folder.Scrubber.for_run`): secret
    values of the host environment, and the values of every variable passed into the
    sandboxes (the trials' environment ``env``, the executors' ``env`` config, and the host
    variables the backend passes through, from its optional ``passed_env()``), except
    those the environments name in ``public_env``."""
    from vally.engine.records.run_folder import Scrubber

    executor_envs = (trial.executor.config.get("env") for trial in trials)
    passed: list[Mapping[str, str]] = [trial.environment.env for trial in trials]
    passed += [env for env in executor_envs if isinstance(env, dict)]
    host = getattr(backend, "passed_env", None)
    if callable(host):
        passed.append(dict(host()))
    public = {name for trial in trials for name in trial.environment.public_env}
    return Scrubber.for_run(passed, public)
