"""What a run measured, as its summaries record it.

Two runs can be compared only when they measured the same thing. Each run summary says
what its eval measured:

* ``evalHash``: the eval document as written (params resolved), the hash experiments
  already give every variant (:func:`vally.engine.planning.variants.content_hash`);
* ``suiteHash``: the suite fingerprint of the eval's planned cases, the ``(eval, stimulus,
  case fingerprint)`` of every planned stimulus (:mod:`vally.models.fingerprint`); it leaves
  out the target, so the variants of an experiment and two models share it;
* ``graders``: each distinct grader (eval-level and stimulus-level, by name and type),
  deterministic or judged by a model, and which model;
* ``target``: the executor, a digest of its resolved config, the model and the variant.

Identities are computed once per planned eval when a run is prepared. Experiments keep
them in the plan snapshot (:func:`snapshot_fields`), so the summaries that a shard, a
merge or a sealed merge builds from the snapshot carry them too
(:func:`identity_from_snapshot`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import pydantic_core

from vally.contracts.protocols import LoadedEval
from vally.engine.planning.plan import PlannedEval
from vally.engine.planning.planner import judge_settings
from vally.engine.planning.variants import (
    CONTENT_HASH_CHARS,
    RENAMED_KEYS,
    canonical_json,
    content_hash,
    normalise_document,
)
from vally.errors import VallyError
from vally.models.fingerprint import case_fingerprint, suite_fingerprint
from vally.models.records import GraderIdentity, TargetIdentity
from vally.models.spec import ExecutorRef, GraderConfig, Stimulus
from vally.plugins.capabilities import is_judged
from vally.specs.packed import PackedDocument

if TYPE_CHECKING:
    from vally.engine.planning.plan import Plan
    from vally.plugins.session import Session

JUDGE_MODEL_KEYS = ("model", "judge_model")
"""The keys of a grader's config that name its judge model (``judge_model`` is the older
spelling the ``prompt`` grader still accepts)."""


@dataclass(frozen=True)
class EvalIdentity:
    """What one planned eval (under one variant) measured, for its run summary.

    Attributes:
        suite_hash: The suite fingerprint of its planned cases (None only when read from
            a plan snapshot written before it existed).
        graders: Its distinct graders, eval-level first, then the stimuli's in order.
        target: What its cases were put to.
    """

    suite_hash: str | None
    graders: tuple[GraderIdentity, ...]
    target: TargetIdentity


def _jsonable(document: Any) -> Any:
    """``document`` as plain JSON data (values JSON cannot hold, such as YAML dates, as
    their text), so it can be hashed."""
    return pydantic_core.to_jsonable_python(document, fallback=str)


def eval_hash(loaded: LoadedEval) -> str:
    """The hash of the eval document as written, params resolved: the ``evalHash``
    experiments give every variant of the same eval. An eval built without its document
    (``raw`` empty) is hashed from what its spec was given. A packed document is hashed a
    stimulus at a time, without unpacking it whole (the same hash)."""
    if isinstance(loaded.raw, PackedDocument) and loaded.raw:
        return _packed_hash(loaded.raw)
    document: Mapping[str, Any] = loaded.raw or loaded.spec.model_dump(
        mode="json", exclude_unset=True
    )
    return content_hash(_jsonable(normalise_document(document)))


def _packed_hash(document: PackedDocument) -> str:
    """:func:`content_hash` of ``document`` made JSON and normalised, its canonical JSON
    text hashed a piece at a time: each top-level value, each item of a list."""
    names = {key: key for key in document}  # the normalised key: the document's own
    for old, new in RENAMED_KEYS:
        if old in names and new not in names:
            names[new] = names.pop(old)
    digest = hashlib.sha256()

    def text(value: Any) -> None:
        digest.update(canonical_json(_jsonable(value)).encode("utf-8"))

    digest.update(b"{")
    for index, name in enumerate(sorted(names)):
        digest.update(b"," if index else b"")
        text(name)
        digest.update(b":")
        key = names[name]
        if not document.is_list(key):
            text(document[key])
            continue
        digest.update(b"[")
        for place, item in enumerate(document.items_of(key)):
            digest.update(b"," if place else b"")
            text(item)
        digest.update(b"]")
    digest.update(b"}")
    return digest.hexdigest()[:CONTENT_HASH_CHARS]


def planned_stimuli(planned: PlannedEval) -> list[Stimulus]:
    """The stimuli the plan selected of ``planned``'s eval, in plan order."""
    by_name = {stimulus.name: stimulus for stimulus in planned.loaded.spec.stimuli}
    return [by_name[name] for name in planned.stimuli if name in by_name]


def suite_hash(planned: PlannedEval) -> str:
    """The suite fingerprint of ``planned``: every planned stimulus's ``(eval, stimulus,
    case fingerprint)``, the case graded by the eval-level graders too."""
    eval_graders = planned.loaded.spec.graders
    return suite_fingerprint(
        (planned.name, stimulus.name, case_fingerprint(stimulus, eval_graders))
        for stimulus in planned_stimuli(planned)
    )


def _plugin_config(
    session: Session | None,
    kind: Literal["executor", "grader"],
    name: str,
    config: Mapping[str, Any],
) -> dict[str, Any]:
    """A plugin's config as the run creates it: ``config`` over the project's
    ``plugin_config`` of that plugin."""
    configured = session.project_plugin_config(kind, name) if session is not None else {}
    return {**configured, **config}


def _grader_is_judged(session: Session | None, grader_type: str) -> bool:
    """Whether the grader plugin of ``grader_type`` declares that a model judges it; false
    when there is no session or the plugin is not installed."""
    if session is None:
        return False
    try:
        return is_judged(session.plugin_class("grader", grader_type))
    except VallyError:
        return False


def _config_model(config: Mapping[str, Any]) -> str | None:
    """The judge model a grader's config names, if any."""
    for key in JUDGE_MODEL_KEYS:
        value = config.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def grader_identities(
    configs: Iterable[GraderConfig], *, session: Session | None, judge_model: str | None
) -> tuple[GraderIdentity, ...]:
    """One identity per distinct grader of ``configs`` (by name and type, the first one
    kept), in order.

    Args:
        configs: The grader entries, eval-level first.
        session: Where the grader plugins resolve (None: every grader counts as not
            judged).
        judge_model: The run's judge model (``--judge-model``, the eval's ``judge_model``,
            ``EVAL_JUDGE_MODEL``), used by judged graders whose config names none.
    """
    seen: set[tuple[str, str]] = set()
    out: list[GraderIdentity] = []
    for config in configs:
        key = (config.label, config.type)
        if key in seen:
            continue
        seen.add(key)
        judged = _grader_is_judged(session, config.type)
        model = None
        if judged:
            resolved = _plugin_config(session, "grader", config.type, config.config)
            model = _config_model(resolved) or judge_model
        out.append(GraderIdentity(name=config.label, type=config.type, judged=judged, model=model))
    return tuple(out)


def target_identity(
    planned: PlannedEval, executor: ExecutorRef | None, *, session: Session | None
) -> TargetIdentity:
    """What ``planned``'s cases were put to.

    The config digest is :func:`~vally.engine.planning.variants.content_hash` of the executor's
    config as the run creates it (the eval's over the project's ``plugin_config``). The
    model is the eval's one model, None when it ran several or the executor's default.
    """
    digest = None
    if executor is not None:
        config = _plugin_config(session, "executor", executor.name, executor.config)
        digest = content_hash(_jsonable(config))
    return TargetIdentity(
        executor=executor.name if executor is not None else None,
        config_digest=digest,
        model=planned.models[0] if len(planned.models) == 1 else None,
        variant=planned.variant or None,
    )


def eval_identity(
    planned: PlannedEval, *, session: Session | None = None, judge_model: str | None = None
) -> EvalIdentity:
    """The identity of one planned eval.

    Args:
        planned: The eval as planned (its selected stimuli, models and executor).
        session: Where its plugins resolve (None: graders count as not judged and the
            project's plugin configs are not applied).
        judge_model: ``--judge-model`` (None: the eval's ``judge_model``, then
            ``EVAL_JUDGE_MODEL``).
    """
    spec = planned.loaded.spec
    stimuli = planned_stimuli(planned)
    configs: Sequence[GraderConfig] = [
        *spec.graders,
        *(config for stimulus in stimuli for config in stimulus.graders),
    ]
    return EvalIdentity(
        suite_hash=suite_hash(planned),
        graders=grader_identities(
            configs, session=session, judge_model=judge_settings(spec, judge_model).model
        ),
        target=target_identity(planned, planned.executor, session=session),
    )


def plan_identities(
    plan: Plan, *, session: Session | None = None, judge_model: str | None = None
) -> dict[tuple[str, str], EvalIdentity]:
    """The identity of every (variant, eval name) of ``plan`` (see :func:`eval_identity`)."""
    return {
        (planned.variant, planned.name): eval_identity(
            planned, session=session, judge_model=judge_model
        )
        for planned in plan.evals
    }


def snapshot_fields(identity: EvalIdentity) -> dict[str, Any]:
    """The identity as the plan snapshot keeps it for one eval: ``suiteHash``,
    ``graders`` and ``target`` in their on-disk form."""
    return {
        "suiteHash": identity.suite_hash,
        "graders": [grader.to_json_dict() for grader in identity.graders],
        "target": identity.target.to_json_dict(),
    }


def identity_from_snapshot(item: Mapping[str, Any]) -> EvalIdentity:
    """The identity of one eval of a plan snapshot, as :func:`snapshot_fields` wrote it;
    a snapshot written before it existed gives no suite hash, no graders and an empty
    target."""
    suite = item.get("suiteHash")
    graders = item.get("graders")
    target = item.get("target")
    return EvalIdentity(
        suite_hash=suite if isinstance(suite, str) else None,
        graders=tuple(
            GraderIdentity.model_validate(grader)
            for grader in (graders if isinstance(graders, list) else [])
            if isinstance(grader, Mapping)
        ),
        target=(
            TargetIdentity.model_validate(target)
            if isinstance(target, Mapping)
            else TargetIdentity()
        ),
    )
