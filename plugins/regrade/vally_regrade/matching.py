"""Which stimulus of the spec a saved trial belongs to (:func:`match_stimulus`): by name, or
for ATIF trajectories by ``--stimulus`` or their first user prompt."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vally import ConfigError

if TYPE_CHECKING:
    from vally import EvalSpec, Stimulus
    from vally_regrade.saved_trials import SavedTrial


def _first_prompt(stimulus: Stimulus) -> str:
    return " ".join(stimulus.prompts[0].split()) if stimulus.prompts else ""


def match_stimulus(item: SavedTrial, spec: EvalSpec, forced: str | None, source: str) -> Stimulus:
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

