"""Resolving an experiment: variants (or a matrix) applied to each eval, drift check, hashes.

Each eval's param-resolved document is normalised (``config`` -> ``defaults``,
``agent_environment`` -> ``environment``) and each variant's patch is applied with JSON merge
patch rules (RFC 7396: ``null`` deletes, maps merge recursively, lists and scalars replace).
The resolved documents of all variants must then agree everywhere outside the ``vary``
pointers (prefix semantics: a pointer authorises every change at or below it); any other
difference is drift, a plan-time error that lists each offending pointer and the variants.

Hashes are the first 16 hex digits of the SHA-256 of canonical JSON: the eval hash covers the
eval's own document (identical across variants), the config hash the variant's resolved one.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from vally.contracts.protocols import LoadedEval
from vally.engine.records.offload import escape_token, unescape_token
from vally.engine.records.run_folder import safe_name
from vally.errors import ConfigError
from vally.models.spec import EvalSpec, Stimulus, check_name
from vally.specs.packed import PackedDocument

if TYPE_CHECKING:  # an experiment's models are loaded only by experiments
    from vally.models.experiment import ExperimentFile, VariantOverride

_MISSING = object()


@dataclass(frozen=True)
class VariantPatch:
    """One variant: its name and the merge patch it applies to each eval document."""

    name: str
    patch: Mapping[str, Any]


@dataclass(frozen=True)
class ResolvedEval:
    """One eval under one variant."""

    variant: str
    loaded: LoadedEval
    """The eval with the variant applied (``spec`` re-validated from the patched document)."""
    eval_hash: str
    config_hash: str


@dataclass(frozen=True)
class ResolvedExperiment:
    """Every (variant, eval) of an experiment, in declaration order."""

    name: str
    baseline: str
    variants: tuple[str, ...]
    vary: tuple[str, ...]
    evals: tuple[ResolvedEval, ...]

    def for_variant(self, variant: str) -> list[ResolvedEval]:
        """The evals of one variant."""
        return [e for e in self.evals if e.variant == variant]


CONTENT_HASH_CHARS = 16
"""Hex digits of a :func:`content_hash`."""


def canonical_json(document: Any) -> str:
    """``document`` as canonical JSON: keys sorted, no spaces, text as it is."""
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def content_hash(document: Any) -> str:
    """:data:`CONTENT_HASH_CHARS` hex digits of the SHA-256 of ``document`` as canonical
    JSON."""
    text = canonical_json(document)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:CONTENT_HASH_CHARS]


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7396 JSON merge patch and return the new document (inputs unchanged)."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result: dict[str, Any] = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def pointer_tokens(pointer: str) -> list[str]:
    """Split a JSON pointer into unescaped tokens (``""`` is the whole document)."""
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise ConfigError(f"{pointer!r} is not a JSON pointer; it must start with '/'")
    return [unescape_token(t) for t in pointer[1:].split("/")]


def patch_for_pointer(pointer: str, value: Any) -> dict[str, Any]:
    """A merge patch that sets ``pointer`` to ``value`` (creating maps on the way)."""
    tokens = pointer_tokens(pointer)
    if not tokens:
        raise ConfigError("a matrix axis cannot replace the whole document ('/')")
    patch: Any = value
    for token in reversed(tokens):
        patch = {token: patch}
    return dict(patch)


RENAMED_KEYS = (("config", "defaults"), ("agent_environment", "environment"))
"""Older spellings of top-level keys and their current ones."""


def normalise_document(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Rename the older spellings (``config``, ``agent_environment``) to the current ones (a
    new top level; the values are ``raw``'s own, which no caller changes)."""
    document = dict(raw)
    for old, new in RENAMED_KEYS:
        if old in document and new not in document:
            document[new] = document.pop(old)
    return document


def variant_patches(experiment: ExperimentFile) -> tuple[list[VariantPatch], list[str], str]:
    """The variants' patches, the ``vary`` pointers and the baseline variant's name."""
    if experiment.variants is not None:
        patches = [
            VariantPatch(name, _override_patch(o)) for name, o in experiment.variants.items()
        ]
        assert isinstance(experiment.baseline, str)
        return patches, list(experiment.vary or []), experiment.baseline
    assert experiment.matrix is not None and isinstance(experiment.baseline, dict)
    axes = list(experiment.matrix.items())
    cells: list[tuple[list[str], dict[str, Any]]] = [([], {})]
    for axis_name, axis in axes:
        grown = []
        for labels, patch in cells:
            for label, value in axis.values.items():
                grown.append(
                    (
                        [*labels, f"{axis_name}={label}"],
                        compose_patches(patch, patch_for_pointer(axis.path, value)),
                    )
                )
        cells = grown
    patches = [VariantPatch(",".join(labels), patch) for labels, patch in cells]
    baseline = ",".join(f"{name}={experiment.baseline[name]}" for name, _ in axes)
    return patches, [axis.path for _, axis in axes], baseline


def compose_patches(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any]:
    """One merge patch equivalent to applying ``first`` then ``second`` (nulls are kept)."""
    result = dict(first)
    for key, value in second.items():
        previous = result.get(key)
        if isinstance(value, Mapping) and isinstance(previous, Mapping):
            result[key] = compose_patches(previous, value)
        else:
            result[key] = value
    return result


def _override_patch(override: VariantOverride) -> dict[str, Any]:
    patch: dict[str, Any] = {}
    if override.overrides:
        patch = compose_patches(patch, {"defaults": override.overrides})
    if override.defaults:
        patch = compose_patches(patch, {"defaults": override.defaults})
    if override.environment is not None:
        patch = compose_patches(patch, {"environment": override.environment})
    return patch


def diff_pointers(a: Any, b: Any, prefix: str = "") -> list[str]:
    """Pointers of every leaf where ``a`` and ``b`` differ (maps compared key by key; a
    map on one side and nothing on the other compares as the map and an empty one, so a
    variant adding ``environment.env.MODE`` differs at ``/environment/env/MODE``)."""
    if a is _MISSING and isinstance(b, Mapping):
        a = {}
    if b is _MISSING and isinstance(a, Mapping):
        b = {}
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        out: list[str] = []
        for key in sorted(set(a) | set(b), key=str):
            out.extend(
                diff_pointers(
                    a.get(key, _MISSING), b.get(key, _MISSING), f"{prefix}/{escape_token(str(key))}"
                )
            )
        return out
    return [] if a == b else [prefix or "/"]


def is_covered(pointer: str, vary: Sequence[str]) -> bool:
    """True when ``pointer`` lies at or below one of the ``vary`` pointers."""
    tokens = pointer_tokens(pointer) if pointer != "/" else []
    for allowed in vary:
        allowed_tokens = pointer_tokens(allowed)
        if tokens[: len(allowed_tokens)] == allowed_tokens:
            return True
    return False


def check_variant_names(names: Sequence[str]) -> None:
    """Each variant names a folder of the run: refuse names that are blank, too long or
    hold control characters, and two names that would share one folder (``a b`` and
    ``a?b`` are both ``a_b``; ``A`` and ``a`` are one folder on some file systems).

    Raises:
        ConfigError: Naming the variant(s) and what to change.
    """
    folders: dict[str, str] = {}
    for name in names:
        try:
            check_name(name, "variant")
        except ValueError as exc:
            raise ConfigError(
                str(exc), hint="rename the variant (or shorten the matrix labels)"
            ) from None
        folder = safe_name(name)
        other = folders.setdefault(folder.lower(), name)
        if other != name:
            raise ConfigError(
                f"variants {other!r} and {name!r} would share the run folder {folder!r}",
                hint="rename one of them; variant folders keep letters, digits and . _ - = , "
                "and ignore case",
            )


def resolve_experiment(
    experiment: ExperimentFile, evals: Sequence[LoadedEval], *, only_variant: str | None = None
) -> ResolvedExperiment:
    """Apply every variant to every eval, check drift, and hash the results.

    Args:
        experiment: The validated experiment file.
        evals: The experiment's evals, loaded and param-resolved (``raw`` is required).
        only_variant: Keep only this variant (``--variant``); drift is still checked over all.

    Raises:
        ConfigError: Unknown variant, drift outside ``vary``, or a variant that makes an
            eval invalid.
    """
    patches, vary, baseline = variant_patches(experiment)
    names = [p.name for p in patches]
    check_variant_names(names)
    if only_variant is not None and only_variant not in names:
        raise ConfigError(
            f"unknown variant {only_variant!r}",
            hint="variants of this experiment: " + ", ".join(names),
        )
    resolved: list[ResolvedEval] = []
    drift: dict[str, set[str]] = {}
    for loaded in evals:
        base_document = normalise_document(loaded.raw)
        eval_hash = content_hash(base_document)
        documents = {p.name: merge_patch(base_document, p.patch) for p in patches}
        reference = documents[baseline]
        for name, document in documents.items():
            for pointer in diff_pointers(reference, document):
                if not is_covered(pointer, vary):
                    drift.setdefault(f"{loaded.spec.name}: {pointer}", set()).update(
                        {baseline, name}
                    )
        # the stimuli validated once for every variant that leaves them as they are
        shared_stimuli: list[Stimulus] | None = None
        packed: dict[int, Any] = {}  # the variants' documents share their unpatched values
        for name in names:
            if only_variant is not None and name != only_variant:
                continue
            document = documents[name]
            unpatched = document.get("stimuli") is base_document.get("stimuli")
            try:
                if unpatched and shared_stimuli is not None:
                    spec = EvalSpec.model_validate({**document, "stimuli": shared_stimuli})
                else:
                    spec = EvalSpec.model_validate(document)
            except ValidationError as exc:
                raise ConfigError(
                    f"variant {name!r} makes eval {loaded.spec.name!r} ({loaded.source}) invalid: "
                    + "; ".join(
                        f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
                        for err in exc.errors()
                    )
                ) from None
            if unpatched and shared_stimuli is None:
                shared_stimuli = spec.stimuli
            if spec.name is None:
                spec = spec.model_copy(update={"name": loaded.spec.name})
            variant_loaded = LoadedEval(
                spec=spec, source=loaded.source, raw=PackedDocument(document, packed)
            )
            resolved.append(ResolvedEval(name, variant_loaded, eval_hash, content_hash(document)))
    if drift:
        lines = [
            f"  {where} differs between {', '.join(sorted(v))}"
            for where, v in sorted(drift.items())
        ]
        pointers = sorted({where.split(": ", 1)[1] for where in drift})
        raise ConfigError(
            "variants drift outside 'vary':\n" + "\n".join(lines),
            hint="if the difference is intended, list it under 'vary' ("
            + ", ".join(pointers)
            + "); otherwise make the variants agree there",
        )
    kept = tuple(n for n in names if only_variant is None or n == only_variant)
    return ResolvedExperiment(experiment.name, baseline, kept, tuple(vary), tuple(resolved))
