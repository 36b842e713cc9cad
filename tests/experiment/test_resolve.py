"""Experiment resolution: merge patches, matrix expansion, drift check, hashes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vally.contracts.protocols import LoadedEval
from vally.engine.planning.variants import (
    content_hash,
    diff_pointers,
    is_covered,
    merge_patch,
    resolve_experiment,
)
from vally.errors import ConfigError
from vally.models import EvalSpec, ExperimentFile


def loaded(raw: dict[str, Any], name: str = "e1") -> LoadedEval:
    raw = {"name": name, **raw}
    return LoadedEval(
        spec=EvalSpec.model_validate(raw), source=Path(f"/evals/{name}/eval.yaml"), raw=raw
    )


BASE = {
    "config": {"runs": 2, "model": "m1", "executor": "mock", "timeout": "2m"},
    "environment": {
        "skills": ["./s1"],
        "mcpServers": {"db": {"command": "db"}, "fs": {"command": "fs"}},
    },
    "stimuli": [{"name": "a", "prompt": "hi"}],
}


def test_merge_patch_rfc7396() -> None:
    target = {"a": {"b": 1, "c": [1, 2]}, "d": 1}
    assert merge_patch(target, {"a": {"b": None, "c": [3]}, "e": {"f": 1}}) == {
        "a": {"c": [3]},
        "d": 1,
        "e": {"f": 1},
    }
    assert target == {"a": {"b": 1, "c": [1, 2]}, "d": 1}  # unchanged
    assert merge_patch({"a": 1}, [1]) == [1]


def test_variants_apply_and_hash() -> None:
    exp = ExperimentFile.model_validate(
        {
            "name": "x",
            "evals": ["*.yaml"],
            "vary": ["/defaults/model", "/environment/mcpServers"],
            "baseline": "base",
            "variants": {
                "base": {"overrides": {"model": "m1"}},
                "treat": {
                    "overrides": {"model": "m2"},
                    "environment": {"mcpServers": {"db": None}},
                },
            },
        }
    )
    result = resolve_experiment(exp, [loaded(BASE)])
    assert result.baseline == "base" and result.variants == ("base", "treat")
    base, treat = result.evals
    assert base.loaded.spec.defaults.model == "m1"
    assert treat.loaded.spec.defaults.model == "m2"
    assert treat.loaded.spec.environment.mcpServers.keys() == {"fs"}  # type: ignore[union-attr]
    assert base.eval_hash == treat.eval_hash and len(base.eval_hash) == 16
    assert base.config_hash != treat.config_hash
    assert result.for_variant("treat") == [treat]


def test_drift_outside_vary_is_an_error_listing_pointers() -> None:
    exp = ExperimentFile.model_validate(
        {
            "name": "x",
            "evals": ["e"],
            "vary": ["/defaults/model"],
            "baseline": "a",
            "variants": {"a": {}, "b": {"overrides": {"model": "m2", "timeout": "5m"}}},
        }
    )
    with pytest.raises(ConfigError) as info:
        resolve_experiment(exp, [loaded(BASE)])
    text = str(info.value)
    assert "/defaults/timeout" in text and "a, b" in text
    assert "/defaults/model" not in text


def test_a_variant_adding_a_key_listed_in_vary_is_not_drift() -> None:
    exp = ExperimentFile.model_validate(
        {
            "name": "x",
            "evals": ["e"],
            "vary": ["/environment/env/MODE"],
            "baseline": "a",
            "variants": {"a": {}, "b": {"environment": {"env": {"MODE": "fast"}}}},
        }
    )
    bare = {k: v for k, v in BASE.items() if k != "environment"}
    result = resolve_experiment(exp, [loaded(bare)])
    assert result.variants == ("a", "b")
    exp.vary = ["/environment/env/OTHER"]
    with pytest.raises(ConfigError) as info:
        resolve_experiment(exp, [loaded(bare)])
    assert "e1: /environment/env/MODE differs between a, b" in str(info.value)
    assert "list it under 'vary' (/environment/env/MODE)" in str(info.value)


def test_matrix_names_and_vary() -> None:
    exp = ExperimentFile.model_validate(
        {
            "name": "m",
            "evals": ["e"],
            "baseline": {"model": "one", "skills": "none"},
            "matrix": {
                "model": {"path": "/defaults/model", "values": {"one": "m1", "two": "m2"}},
                "skills": {"path": "/environment/skills", "values": {"none": [], "kit": ["./k"]}},
            },
        }
    )
    result = resolve_experiment(exp, [loaded(BASE)])
    assert result.variants == (
        "model=one,skills=none",
        "model=one,skills=kit",
        "model=two,skills=none",
        "model=two,skills=kit",
    )
    assert result.baseline == "model=one,skills=none"
    assert result.vary == ("/defaults/model", "/environment/skills")
    cell = result.for_variant("model=two,skills=kit")[0].loaded.spec
    assert cell.defaults.model == "m2" and cell.environment.skills == ["./k"]  # type: ignore[union-attr]
    only = resolve_experiment(exp, [loaded(BASE)], only_variant="model=two,skills=none")
    assert only.variants == ("model=two,skills=none",) and len(only.evals) == 1
    with pytest.raises(ConfigError, match="unknown variant"):
        resolve_experiment(exp, [loaded(BASE)], only_variant="model=three")


def test_variant_making_spec_invalid_names_variant() -> None:
    exp = ExperimentFile.model_validate(
        {
            "name": "x",
            "evals": ["e"],
            "vary": ["/defaults"],
            "baseline": "a",
            "variants": {"a": {}, "b": {"overrides": {"runs": -1}}},
        }
    )
    with pytest.raises(ConfigError, match="variant 'b'"):
        resolve_experiment(exp, [loaded(BASE)])


def test_pointer_helpers() -> None:
    assert diff_pointers({"a": {"b/c": 1}}, {"a": {"b/c": 2}}) == ["/a/b~1c"]
    assert diff_pointers({"a": 1}, {}) == ["/a"]
    assert is_covered("/environment/mcpServers/db/args", ["/environment/mcpServers"])
    assert not is_covered("/environment/mcpServersX", ["/environment/mcpServers"])
    assert content_hash({"b": 1, "a": 2}) == content_hash({"a": 2, "b": 1})


def test_experiment_file_shape_errors() -> None:
    with pytest.raises(ValueError, match="exactly one of"):
        ExperimentFile.model_validate({"name": "x", "evals": ["e"], "baseline": "a"})
    with pytest.raises(ValueError, match="'vary' is required"):
        ExperimentFile.model_validate(
            {"name": "x", "evals": ["e"], "baseline": "a", "variants": {"a": {}, "b": {}}}
        )
    with pytest.raises(ValueError, match="not a variant"):
        ExperimentFile.model_validate(
            {
                "name": "x",
                "evals": ["e"],
                "vary": ["/d"],
                "baseline": "z",
                "variants": {"a": {}, "b": {}},
            }
        )


def _specs(exp: ExperimentFile, raw: dict[str, Any]) -> dict[str, EvalSpec]:
    """Each variant's spec of the eval ``raw``, checked against validating the variant's
    document on its own."""
    specs = {r.variant: r.loaded.spec for r in resolve_experiment(exp, [loaded(raw)]).evals}
    for variant, spec in specs.items():
        alone = resolve_experiment(exp, [loaded(raw)], only_variant=variant).evals[0]
        assert spec == EvalSpec.model_validate(alone.loaded.raw)
    return specs


def test_variants_that_leave_the_stimuli_share_them_and_others_get_their_own() -> None:
    raw = {**BASE, "stimuli": [{"name": "a", "prompt": "hi", "graders": [{"type": "t"}]}]}
    models = ExperimentFile.model_validate(
        {
            "name": "x",
            "evals": ["*.yaml"],
            "vary": ["/defaults/model"],
            "baseline": "base",
            "variants": {
                "base": {"overrides": {"model": "m1"}},
                "treat": {"overrides": {"model": "m2"}},
            },
        }
    )
    specs = _specs(models, raw)
    assert specs["treat"].stimuli[0] is specs["base"].stimuli[0]
    wording = ExperimentFile.model_validate(
        {
            "name": "m",
            "evals": ["e"],
            "baseline": {"wording": "hi"},
            "matrix": {
                "wording": {
                    "path": "/stimuli",
                    "values": {
                        "hi": [{"name": "a", "prompt": "hi"}],
                        "hello": [{"name": "a", "prompt": "hello"}],
                    },
                },
            },
        }
    )
    specs = _specs(wording, raw)
    assert [spec.stimuli[0].prompt for spec in specs.values()] == ["hi", "hello"]
    assert specs["wording=hi"].stimuli[0] is not specs["wording=hello"].stimuli[0]
