"""Spec models given the same fields share one set of their names; a model changed, or a
copy, gets a set of its own, so what one model was given never leaks into another."""

from __future__ import annotations

import pickle
import tracemalloc
from typing import Any

from vally.models.spec import Constraints, Stimulus


def _stimuli(count: int) -> list[Stimulus]:
    return [
        Stimulus.model_validate(
            {
                "name": f"s{i}",
                "prompt": f"task {i}",
                "graders": [{"type": "output-contains", "config": {"substring": f"t{i}"}}],
            }
        )
        for i in range(count)
    ]


def test_models_given_the_same_fields_share_the_set_of_their_names() -> None:
    one, two = _stimuli(2)
    assert one.model_fields_set == {"name", "prompt", "graders"}
    assert one.model_fields_set is two.model_fields_set
    assert one.graders[0].model_fields_set is two.graders[0].model_fields_set
    other = Stimulus.model_validate({"name": "x", "prompt": "p", "tags": {"a": "b"}})
    assert other.model_fields_set == {"name", "prompt", "tags"}


def test_a_field_set_on_one_model_is_given_on_that_model_only() -> None:
    one, two, three = _stimuli(3)
    one.description = "changed"
    assert "description" in one.model_fields_set
    assert two.model_fields_set == three.model_fields_set == {"name", "prompt", "graders"}
    assert one.model_dump(exclude_unset=True).keys() == {"name", "prompt", "graders", "description"}
    assert two.model_dump(exclude_unset=True).keys() == {"name", "prompt", "graders"}


def test_a_copy_updated_leaves_the_models_it_shared_with_as_they_were() -> None:
    one, two = _stimuli(2)
    copied = one.model_copy(update={"rubric": ["clear"]})
    assert copied.model_fields_set == {"name", "prompt", "graders", "rubric"}
    assert one.model_fields_set == two.model_fields_set == {"name", "prompt", "graders"}
    deep = one.model_copy(deep=True)
    deep.artifacts = ["out.txt"]
    assert "artifacts" not in two.model_fields_set


def test_given_fields_still_decide_what_merges() -> None:
    eval_level = Constraints.model_validate({"max_turns": 3})
    first, second = (Constraints.model_validate({"max_turns": 5}) for _ in range(2))
    assert first.model_fields_set is second.model_fields_set
    first.max_tool_calls = 2
    merged: dict[str, Any] = {
        **eval_level.model_dump(exclude_unset=True),
        **second.model_dump(exclude_unset=True),
    }
    assert merged == {"max_turns": 5}


def test_a_pickled_model_reads_back_with_its_given_fields() -> None:
    one, two = pickle.loads(pickle.dumps(_stimuli(2)))
    assert one.model_fields_set == two.model_fields_set == {"name", "prompt", "graders"}
    one.description = "d"
    assert "description" not in two.model_fields_set


def test_stimuli_hold_no_set_of_given_names_each() -> None:
    tracemalloc.start()
    try:
        stimuli = _stimuli(2_000)
        per_stimulus = tracemalloc.get_traced_memory()[0] / len(stimuli)
    finally:
        tracemalloc.stop()
    # about 1,570 bytes with a set of given names of their own for the stimulus and its
    # grader (216 bytes each); the texts here are the stimuli's own
    assert per_stimulus < 1_350, per_stimulus
