"""The run summaries' tallies as a shard's seal keeps them, and added back up by a merge.

A seal holds a shard's :class:`vally.PlanTallies`: per (variant, eval) the eval's totals
and, per (stimulus, model), the counters of :class:`vally.StimulusTally`. The per-stimulus
counters are stored by column (``{"stimulus": [...], "trials": [...], ...}``, one list per
counter, every list as long as the others), so a seal of thousands of stimuli is a few
lists of numbers: small on disk, parsed quickly, and held as few objects. Seals of schema
version 1 listed one object per stimulus instead (``groups``); both are read.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping
from typing import Any

from vally import EvalTally, PlanTallies, StimulusTally

COLUMNS = (
    ("stimulus_name", "stimulus"),
    ("model", "model"),
    ("rank", "place"),
    ("first_index", "firstIndex"),
    ("first_has_graders", "firstHasGraders"),
    ("any_has_graders", "anyHasGraders"),
    ("trials", "trials"),
    ("graded", "graded"),
    ("passed", "passed"),
    ("errored", "errored"),
    ("score_sum", "scoreSum"),
    ("trajectories", "trajectories"),
    ("tokens", "tokens"),
    ("turns", "turns"),
    ("tool_calls", "toolCalls"),
    ("wall_time_ms", "wallTimeMs"),
    ("errors", "errors"),
)
"""Each :class:`vally.StimulusTally` attribute and its column in a seal."""

SUMMED = COLUMNS[6:]
"""The counters two tallies of one stimulus add up."""


def plan_state(tallies: PlanTallies) -> dict[str, Any]:
    """``tallies`` as JSON data, which :func:`absorb_plan` adds to the tallies of the same
    plan (ranks are ``(place in the plan, ...)``, as :class:`vally.PlanTallies` gives)."""
    return {
        "count": tallies.count,
        "unsuccessful": dict(tallies.unsuccessful),
        "evals": [
            {"variant": variant, "name": name, "tally": eval_state(tally)}
            for (variant, name), tally in tallies.evals.items()
            if tally.trials
        ],
    }


def eval_state(tally: EvalTally) -> dict[str, Any]:
    """One eval's tally as JSON data, its stimuli by column (see the module docstring)."""
    groups = list(tally.groups.values())
    columns: dict[str, list[Any]] = {name: [] for _, name in COLUMNS}
    for attribute, name in COLUMNS:
        values = [getattr(group, attribute) for group in groups]
        if attribute == "rank":
            values = [rank[0] if isinstance(rank, tuple) else rank for rank in values]
        columns[name] = values
    return {
        "trials": tally.trials,
        "graded": tally.graded,
        "passed": tally.passed,
        "errored": tally.errored,
        "startedAt": tally.started_at,
        "completedAt": tally.completed_at,
        "usage": list(tally.usage),
        "cost": tally.cost.to_json_dict(),
        "judgeCache": tally.judge_cache.to_json_dict(),
        "models": [
            [model, rank[0] if isinstance(rank, tuple) else rank]
            for model, rank in tally.model_ranks.items()
        ],
        "stimuli": columns,
    }


def absorb_plan(tallies: PlanTallies, state: Mapping[str, Any]) -> None:
    """Add the tallies of another shard of the same plan (its :func:`plan_state`) to
    ``tallies``, as if its records had been added there.

    Raises:
        KeyError, TypeError, ValueError: ``state`` is not the state of tallies of this
            plan.
    """
    tallies.count += int(state["count"])
    for status, count in dict(state["unsuccessful"]).items():
        tallies.unsuccessful[str(status)] = tallies.unsuccessful.get(str(status), 0) + int(count)
    for item in state["evals"]:
        absorb_eval(tallies.evals[(str(item["variant"]), str(item["name"]))], item["tally"])


def _stimuli(state: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Each stimulus's counters of an eval's state, by column name (columns, or the
    objects of a version 1 seal).

    Raises:
        ValueError: The columns differ in length.
    """
    if "groups" in state:  # schema version 1
        yield from (dict(item) for item in state["groups"])
        return
    columns = state["stimuli"]
    lengths = {len(columns[name]) for _, name in COLUMNS}
    if len(lengths) != 1:
        raise ValueError("the stimulus columns differ in length")
    for row in zip(*(columns[name] for _, name in COLUMNS), strict=True):
        yield {name: value for (_, name), value in zip(COLUMNS, row, strict=True)}


def _stimulus_tally(item: Mapping[str, Any]) -> StimulusTally:
    """A stimulus's tally holding the counters of ``item``."""
    tally = StimulusTally.__new__(StimulusTally)
    tally.stimulus_name = str(item["stimulus"])
    tally.model = None if item["model"] is None else str(item["model"])
    tally.rank = (int(item["place"]), 0)
    tally.first_index = int(item["firstIndex"])
    tally.first_has_graders = bool(item["firstHasGraders"])
    tally.any_has_graders = bool(item["anyHasGraders"])
    for attribute, name in SUMMED:
        setattr(tally, attribute, item[name])
    return tally


def absorb_eval(tally: EvalTally, state: Mapping[str, Any]) -> None:
    """Add another eval tally's counters (its :func:`eval_state`) to ``tally``; each of
    its stimuli and models is ranked by its place in the plan.

    Raises:
        KeyError, TypeError, ValueError: ``state`` is not a tally's state.
    """
    for item in _stimuli(state):
        model = None if item["model"] is None else str(item["model"])
        key = (str(item["stimulus"]), model)
        group = tally.groups.get(key)
        if group is None:
            tally.groups[key] = _stimulus_tally(item)
            continue
        rank = (int(item["place"]), 0)
        if rank < group.rank:
            group.rank = rank
        first = int(item["firstIndex"])
        if first < group.first_index:
            group.first_index, group.first_has_graders = first, bool(item["firstHasGraders"])
        group.any_has_graders = group.any_has_graders or bool(item["anyHasGraders"])
        for attribute, name in SUMMED:
            setattr(group, attribute, getattr(group, attribute) + item[name])
    for model, place in state["models"]:
        rank = (int(place), 0)
        tally.model_ranks[model] = min(tally.model_ranks.get(model, rank), rank)
    tally.trials += int(state["trials"])
    tally.graded += int(state["graded"])
    tally.passed += int(state["passed"])
    tally.errored += int(state["errored"])
    usage = [int(value) for value in state["usage"]]
    if len(usage) != len(tally.usage):
        raise ValueError("the usage counters are not those of this version")
    tally.usage = list(map(operator.add, tally.usage, usage))
    tally.cost = tally.cost.plus(type(tally.cost).model_validate(state["cost"]))
    cache = type(tally.judge_cache).model_validate(state["judgeCache"])
    tally.judge_cache = tally.judge_cache.plus(cache)
    started, completed = state["startedAt"], state["completedAt"]
    if started is not None and (tally.started_at is None or started < tally.started_at):
        tally.started_at = str(started)
    if completed is not None and (tally.completed_at is None or completed > tally.completed_at):
        tally.completed_at = str(completed)
