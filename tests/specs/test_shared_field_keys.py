"""Spec models and stimulus summaries hold their fields in a dictionary that shares its
keys with the other models of their class: smaller, and the same in every other way."""

from __future__ import annotations

import json
import pickle
from typing import Any, ClassVar

from pydantic import create_model
from pydantic.alias_generators import to_camel

from tests.specs.test_given_fields import _stimuli
from tests.traced import traced_held
from vally.engine.records.tally import SharedParts
from vally.models.base import SpecModel, share_field_keys
from vally.models.records import StimulusSummary
from vally.models.spec import GraderConfig, Stimulus


def _summaries(count: int) -> list[StimulusSummary]:
    shared = SharedParts()
    return [
        StimulusSummary.model_construct(
            shared.fields,
            stimulus_name=f"s{i}",
            model=None,
            trials=2,
            graded=2,
            passed=1,
            errored=0,
            mean_score=0.5,
            metrics=shared.metrics(2, 1),
            flaky=True,
            has_graders=True,
            mean_tokens=None,
            mean_turns=None,
            mean_tool_calls=None,
            mean_wall_time_ms=None,
            total_errors=0,
        )
        for i in range(count)
    ]


def test_stimuli_hold_their_fields_without_keys_of_their_own() -> None:
    _stimuli(4)  # the classes' shared keys, made once
    stimuli, held = traced_held(lambda: _stimuli(2_000))
    # about 1,300 bytes a stimulus with a dictionary of its own for the stimulus and its
    # grader (272 bytes each), about 1,060 now; the texts here are the stimuli's own
    assert held / len(stimuli) < 1_150, held / len(stimuli)


def test_summaries_hold_their_fields_without_keys_of_their_own() -> None:
    _summaries(4)
    summaries, held = traced_held(lambda: _summaries(2_000))
    # about 607 bytes a summary with a dictionary of its own (400 bytes), about 360 now
    assert held / len(summaries) < 450, held / len(summaries)


def test_a_field_set_on_one_stimulus_changes_that_stimulus_only() -> None:
    one, two = _stimuli(2)
    one.description = "changed"
    one.graders[0].required = True
    assert (one.description, two.description) == ("changed", None)
    assert (one.graders[0].required, two.graders[0].required) == (True, False)
    assert "description" not in two.model_dump(exclude_unset=True)


def test_stimuli_read_dump_copy_compare_and_pickle_as_before() -> None:
    one, two = _stimuli(2)
    data: dict[str, Any] = {
        "name": "s0",
        "description": None,
        "prompt": "task 0",
        "turns": None,
        "environment": None,
        "graders": [
            {
                "type": "output-contains",
                "config": {"substring": "t0"},
                "name": None,
                "turn": None,
                "required": False,
                "timeout": None,
            }
        ],
        "rubric": [],
        "constraints": None,
        "tags": {},
        "artifacts": [],
    }
    assert one.model_dump() == data
    assert one == Stimulus.model_validate(data) and one != two
    copied = one.model_copy(update={"prompt": "other"})
    assert (copied.prompt, one.prompt) == ("other", "task 0")
    deep = one.model_copy(deep=True)
    deep.graders[0].config["substring"] = "x"
    assert one.graders[0].config == {"substring": "t0"}
    assert pickle.loads(pickle.dumps(one)) == one
    assert vars(one) == {key: getattr(one, key) for key in Stimulus.model_fields}


def test_summaries_write_the_same_line() -> None:
    first, _ = _summaries(2)
    line = json.loads(first.to_json_line())
    assert list(line) == [to_camel(name) for name in StimulusSummary.model_fields]
    assert (line["stimulusName"], line["meanScore"], line["flaky"]) == ("s0", 0.5, True)
    assert line["metrics"]["k"] == 2 and line["meanTokens"] is None
    assert StimulusSummary.model_validate(line) == first


def test_a_model_of_more_fields_than_keys_are_shared_for_keeps_its_values() -> None:
    fields: dict[str, Any] = {f"f{i}": (int, i) for i in range(60)}
    many: Any = create_model("Many", __base__=SpecModel, **fields)
    first: Any = many.model_validate({"f3": 30})
    second: Any = many.model_validate({"f59": 7})
    assert first.model_dump() == {**{f"f{i}": i for i in range(60)}, "f3": 30}
    assert (second.f59, second.f3, first.f59) == (7, 3, 59)
    first.f0 = -1
    assert (first.f0, second.f0) == (-1, 0)


def test_sharing_the_keys_again_changes_nothing() -> None:
    config = GraderConfig.model_validate({"type": "output-contains", "config": {"a": 1}})
    before = config.model_dump()
    share_field_keys(config)
    share_field_keys(config)
    assert config.model_dump() == before


class _Counted(SpecModel):
    """A model whose own ``__new__`` counts its instances."""

    made: ClassVar[int] = 0
    name: str

    def __new__(cls, *args: Any, **kwargs: Any) -> _Counted:
        _Counted.made += 1
        return super().__new__(cls)


def test_a_model_with_a_new_of_its_own_is_made_once() -> None:
    before = _Counted.made
    model = _Counted(name="x")
    assert (model.name, _Counted.made - before) == ("x", 1)
