"""Named lookup through real entry points: discovery, laziness, conflicts, broken plugins."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest
from kernel_helpers import MakeDist, grader_source

from vally.errors import (
    ConfigError,
    PluginConflictError,
    PluginLoadError,
    PluginNotFoundError,
    PluginValidationError,
)
from vally.plugins.session import Session

GROUP = "vally.graders"


def test_installed_example_distribution_is_discovered() -> None:
    from vally_word_count_grader import WordCountGrader

    session = Session(environ={})
    assert "word-count" in session.known_names("grader")
    cls = session.plugin_class("grader", "word-count")
    assert cls is WordCountGrader
    assert cls.metadata.name == "word-count"
    (row,) = [r for r in session.list_plugins("grader") if r.name == "word-count"]
    assert row.status == "ok"
    assert row.source == "vally-word-count-grader 0.1.0"
    assert row.description.startswith("Checks that")
    (prov,) = [p for p in session.provenance() if p["name"] == "word-count"]
    assert prov["distribution"] == "vally-word-count-grader"
    assert prov["version"] == "0.1.0"
    assert prov["target"] == "vally_word_count_grader:WordCountGrader"


def test_only_the_named_plugin_is_imported(make_dist: MakeDist, unique: str) -> None:
    good, bad = f"vally_t_good_{unique}", f"vally_t_bad_{unique}"
    make_dist(
        f"pair-{unique}",
        entry_points={GROUP: {f"good-{unique}": f"{good}:G", f"bad-{unique}": f"{bad}:B"}},
        modules={
            f"{good}.py": grader_source("G", f"good-{unique}"),
            f"{bad}.py": "raise RuntimeError('this module must never be imported')\n",
        },
    )
    session = Session(environ={})
    assert {f"good-{unique}", f"bad-{unique}"} <= session.known_names("grader")
    assert bad not in sys.modules
    cls = session.plugin_class("grader", f"good-{unique}")
    assert cls.__name__ == "G"
    assert good in sys.modules
    assert bad not in sys.modules


def test_two_distributions_claiming_one_name_conflict(make_dist: MakeDist, unique: str) -> None:
    name = f"dup-{unique}"
    make_dist(
        f"alpha-{unique}",
        "1.0",
        entry_points={GROUP: {name: f"vally_t_a_{unique}:A"}},
        modules={f"vally_t_a_{unique}.py": grader_source("A", name)},
    )
    make_dist(
        f"beta-{unique}",
        "2.5",
        entry_points={GROUP: {name: f"vally_t_b_{unique}:B"}},
        modules={f"vally_t_b_{unique}.py": grader_source("B", name)},
    )
    session = Session(environ={})
    with pytest.raises(PluginConflictError) as info:
        session.plugin_class("grader", name)
    message = str(info.value)
    assert f"alpha-{unique} 1.0" in message
    assert f"beta-{unique} 2.5" in message
    assert info.value.code == "VALLY_PLUGIN_CONFLICT"
    # a qualified name picks one provider
    assert session.plugin_class("grader", f"beta-{unique}/{name}").__name__ == "B"
    # and the distribution filter removes the other one
    only_alpha = Session(environ={"VALLY_ONLY_DISTRIBUTIONS": f"alpha-{unique}"})
    assert only_alpha.plugin_class("grader", name).__name__ == "A"


def test_only_distributions_hides_other_entry_points(make_dist: MakeDist, unique: str) -> None:
    make_dist(
        f"hidden-{unique}",
        entry_points={GROUP: {f"hidden-{unique}": f"vally_t_h_{unique}:H"}},
        modules={f"vally_t_h_{unique}.py": grader_source("H", f"hidden-{unique}")},
    )
    session = Session(environ={"VALLY_ONLY_DISTRIBUTIONS": "vally"})
    assert f"hidden-{unique}" not in session.known_names("grader")
    assert "word-count" not in session.known_names("grader")
    with pytest.raises(PluginNotFoundError):
        session.plugin_class("grader", f"hidden-{unique}")


def test_blocked_names_are_not_resolved() -> None:
    session = Session(environ={"VALLY_BLOCK_PLUGINS": "word-count, other"})
    assert "word-count" not in session.known_names("grader")
    with pytest.raises(PluginNotFoundError, match="VALLY_BLOCK_PLUGINS"):
        session.plugin_class("grader", "word-count")


def test_unknown_name_suggests_close_matches() -> None:
    with pytest.raises(PluginNotFoundError) as info:
        Session(environ={}).plugin_class("grader", "word-cuont")
    assert "did you mean 'word-count'" in str(info.value)
    assert info.value.hint is not None and "vally.graders" in info.value.hint


@pytest.mark.parametrize(
    ("case", "module_source", "target", "error", "fragment"),
    [
        ("missing-module", None, "vally_t_missing_{u}.nope:X", PluginLoadError, "No module"),
        (
            "import-error",
            "import vally_t_not_installed_dependency_{u}\n",
            "vally_t_mod_{u}:X",
            PluginLoadError,
            "ModuleNotFoundError",
        ),
        ("wrong-kind", "WRONG_KIND", "vally_t_mod_{u}:X", PluginValidationError, "kind 'executor'"),
        (
            "name-mismatch",
            "NAME_MISMATCH",
            "vally_t_mod_{u}:X",
            PluginValidationError,
            "metadata.name is 'other-name'",
        ),
        ("bad-config", "BAD_CONFIG", "vally_t_mod_{u}:X", PluginValidationError, "'Config'"),
        ("not-a-class", "X = 42\n", "vally_t_mod_{u}:X", PluginValidationError, "not a class"),
    ],
)
def test_broken_entry_points_give_clear_chained_errors(
    make_dist: MakeDist,
    unique: str,
    case: str,
    module_source: str | None,
    target: str,
    error: type[Exception],
    fragment: str,
) -> None:
    name = f"broken-{case}-{unique}"
    sources = {
        "WRONG_KIND": (
            "from vally import BaseExecutor, PluginMetadata\n"
            f"class X(BaseExecutor):\n    metadata = PluginMetadata(name={name!r}, "
            "kind='executor')\n"
        ),
        "NAME_MISMATCH": grader_source("X", "other-name"),
        "BAD_CONFIG": grader_source("X", name) + "\nX.Config = dict\n",
    }
    modules = {}
    if module_source is not None:
        source = sources.get(module_source, module_source.format(u=unique))
        modules[f"vally_t_mod_{unique}.py"] = source
    make_dist(
        f"broken-{unique}", entry_points={GROUP: {name: target.format(u=unique)}}, modules=modules
    )
    with pytest.raises(error) as info:
        Session(environ={}).plugin_class("grader", name)
    message = str(info.value)
    assert name in message
    assert fragment in message
    assert f"broken-{unique} 1.0" in message
    if error is PluginLoadError:
        assert isinstance(info.value.__cause__, ImportError)


def test_raising_constructor_is_a_chained_load_error(make_dist: MakeDist, unique: str) -> None:
    name = f"explodes-{unique}"
    source = grader_source("X", name) + (
        "\n    def __init__(self, config=None):\n        raise OSError('no licence file')\n"
    )
    make_dist(
        f"explodes-{unique}",
        entry_points={GROUP: {name: f"vally_t_x_{unique}:X"}},
        modules={f"vally_t_x_{unique}.py": source},
    )
    session = Session(environ={})
    session.plugin_class("grader", name)  # importing and validating works
    with pytest.raises(PluginLoadError) as info:
        session.create("grader", name, {}, where="eval.yaml: graders[0]")
    assert name in str(info.value)
    assert "no licence file" in str(info.value)
    assert "eval.yaml: graders[0]" in str(info.value)
    assert isinstance(info.value.__cause__, OSError)


def test_create_validates_config_strictly() -> None:
    session = Session(environ={})
    grader = session.create("grader", "word-count", {"min_words": 2})
    assert grader.config.min_words == 2
    with pytest.raises(ConfigError) as info:
        session.create("grader", "word-count", {"min_words": "lots"}, where="evals/a.yaml")
    message = str(info.value)
    assert "grader 'word-count'" in message
    assert "min_words" in message
    assert "evals/a.yaml" in message
    with pytest.raises(ConfigError, match="max_wordz"):
        session.create("grader", "word-count", {"max_wordz": 2})
    created = [p for p in session.provenance() if p["name"] == "word-count"]
    assert len(created) == 1


def test_lenient_config_models_still_reject_unknown_keys() -> None:
    from pydantic import BaseModel

    from vally import BaseGrader, GraderMetadata

    class Lenient(BaseModel):
        limit: int = 1

    class LenientGrader(BaseGrader[Lenient]):
        metadata = GraderMetadata(name="lenient")
        Config = Lenient

    session = Session(environ={})
    session.registrar().grader(LenientGrader)
    assert session.create("grader", "lenient", {"limit": 3}).config.limit == 3
    with pytest.raises(ConfigError, match="unknown key"):
        session.create("grader", "lenient", {"limti": 3})


def test_registrar_same_object_twice_is_one_registration() -> None:
    from vally import BaseGrader, GraderMetadata

    class One(BaseGrader):
        metadata = GraderMetadata(name="same-one")

    class Other(BaseGrader):
        metadata = GraderMetadata(name="same-one")

    session = Session(environ={})
    registrar = session.registrar()
    registrar.grader(One)
    registrar.grader(One)
    assert len(registrar.registrations) == 1
    assert session.plugin_class("grader", "same-one") is One
    with pytest.raises(PluginConflictError, match="registered twice"):
        registrar.grader(Other)


def test_registration_clashing_with_installed_name_conflicts() -> None:
    from vally import BaseGrader, GraderMetadata

    class Impostor(BaseGrader):
        metadata = GraderMetadata(name="word-count")

    with pytest.raises(PluginConflictError) as info:
        Session(environ={}).registrar().grader(Impostor)
    assert "vally-word-count-grader 0.1.0" in str(info.value)


def test_listing_turns_broken_plugins_into_error_rows(
    make_dist: MakeDist, unique: str, caplog: pytest.LogCaptureFixture
) -> None:
    make_dist(
        f"listing-{unique}",
        entry_points={
            GROUP: {
                f"fine-{unique}": f"vally_t_fine_{unique}:F",
                f"gone-{unique}": f"vally_t_gone_{unique}:G",
            }
        },
        modules={f"vally_t_fine_{unique}.py": grader_source("F", f"fine-{unique}", "fine one")},
    )
    with caplog.at_level(logging.WARNING, logger="vally.plugins"):
        rows = {r.name: r for r in Session(environ={}).list_plugins("grader")}
    assert rows[f"fine-{unique}"].status == "ok"
    assert rows[f"fine-{unique}"].description == "fine one"
    broken = rows[f"gone-{unique}"]
    assert broken.status == "error"
    assert broken.error is not None and "VALLY_PLUGIN_LOAD" in broken.error
    assert broken.source == f"listing-{unique} 1.0"
    assert any(f"gone-{unique}" in r.getMessage() for r in caplog.records)


def test_sessions_are_independent(tmp_path: Path) -> None:
    plugin = tmp_path / "solo.py"
    plugin.write_text(
        grader_source("Solo", "solo-grader")
        + "\ndef register(registrar):\n    registrar.grader(Solo)\n",
        encoding="utf-8",
    )
    first = Session(environ={})
    assert first.load_plugins("grader", ["solo.py"], base_dir=tmp_path) == ["solo-grader"]
    assert "solo-grader" in first.known_names("grader")
    assert "solo-grader" not in Session(environ={}).known_names("grader")


def test_a_session_reads_installed_entry_points_once(make_dist: MakeDist, unique: str) -> None:
    session = Session(environ={})
    assert len({id(registry.installed) for registry in session.registries.values()}) == 1
    assert "word-count" in session.known_names("grader")
    # read once, on first use: a distribution installed later is seen by the next session
    make_dist(
        f"late-{unique}",
        entry_points={GROUP: {f"late-{unique}": f"vally_t_late_{unique}:L"}},
        modules={f"vally_t_late_{unique}.py": grader_source("L", f"late-{unique}")},
    )
    assert f"late-{unique}" not in session.known_names("grader")
    assert f"late-{unique}" in Session(environ={}).known_names("grader")
