"""The comparison judge of ``vally experiment run --compare``: its settings come from the
flags, else from the selected evals when they agree."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vally import LoadedEval

JUDGE_SETTINGS = ("judge_model", "judge_reasoning_effort", "judge_provider", "judge_timeout")
"""The eval ``defaults`` that configure the judge."""


def comparison_judge(
    evals: Sequence[LoadedEval], overrides: Mapping[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """The judge settings inherited from the selected evals (each as a variant ran it, with
    its overrides), and the conflicts that ``overrides`` (the flags, None when not given)
    do not settle.

    Returns:
        The settings by name, and one message per conflicting setting.
    """
    values: dict[str, set[Any]] = {name: set() for name in JUDGE_SETTINGS}
    for loaded in evals:
        defaults = loaded.spec.defaults
        for name in values:
            values[name].add(getattr(defaults, name))
    settings: dict[str, Any] = {}
    conflicts: list[str] = []
    for name, seen in values.items():
        if overrides.get(name) is not None:
            settings[name] = overrides[name]
            continue
        if len(seen) > 1:
            shown = ", ".join(sorted(repr(v) for v in seen))
            conflicts.append(f"{name} differs across the selected evals and variants ({shown})")
            continue
        settings[name] = next(iter(seen)) if seen else None
    return settings, conflicts
