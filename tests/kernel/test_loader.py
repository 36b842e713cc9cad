"""Plugin specifiers: distribution names, module:Attr, .py files, package and plain folders."""

from __future__ import annotations

import hashlib
import sys
import textwrap
from pathlib import Path

import pytest
from kernel_helpers import MakeDist, grader_source

from vally.errors import (
    PluginConflictError,
    PluginLoadError,
    PluginNotFoundError,
    PluginValidationError,
)
from vally.plugins.session import Session

REGISTER_SOLO = "\ndef register(registrar):\n    registrar.grader({cls})\n"


def write(path: Path, source: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


def grader_file(path: Path, cls: str, name: str) -> Path:
    return write(path, grader_source(cls, name) + REGISTER_SOLO.format(cls=cls))


# --------------------------------------------------------------------------- 1 and 2


def test_name_specifier_validates_the_installed_plugin(tmp_path: Path) -> None:
    session = Session(environ={})
    assert session.load_plugins("grader", ["word-count"], base_dir=tmp_path) == ["word-count"]
    assert session.resolve_single("grader", "word-count", base_dir=tmp_path) == "word-count"


def test_distribution_specifier_loads_its_entry_points(tmp_path: Path) -> None:
    session = Session(environ={})
    names = session.load_plugins("grader", ["vally-word-count-grader"], base_dir=tmp_path)
    assert names == ["word-count"]
    # normalized spelling of the distribution name works too
    assert session.load_plugins("grader", ["vally_word_count_grader"], base_dir=tmp_path) == [
        "word-count"
    ]
    (prov,) = [p for p in session.provenance() if p["name"] == "word-count"]
    assert prov["source"] == "entry-point"
    assert prov["distribution"] == "vally-word-count-grader"


def test_distribution_without_plugins_of_that_kind(tmp_path: Path) -> None:
    with pytest.raises(PluginNotFoundError, match="provides no executor plugins"):
        Session(environ={}).load_plugins("executor", ["vally-word-count-grader"], base_dir=tmp_path)


def test_explicit_distribution_overrides_only_distributions(tmp_path: Path) -> None:
    session = Session(environ={"VALLY_ONLY_DISTRIBUTIONS": "vally"})
    assert "word-count" not in session.known_names("grader")
    names = session.load_plugins("grader", ["vally-word-count-grader"], base_dir=tmp_path)
    assert names == ["word-count"]
    assert session.plugin_class("grader", "word-count").__name__ == "WordCountGrader"


# --------------------------------------------------------------------------- 3


def test_module_attr_class(make_dist: MakeDist, unique: str, tmp_path: Path) -> None:
    module = f"vally_t_mod_{unique}"
    make_dist(f"mods-{unique}", modules={f"{module}.py": grader_source("Mine", f"mine-{unique}")})
    session = Session(environ={})
    names = session.load_plugins("grader", [f"{module}:Mine"], base_dir=tmp_path)
    assert names == [f"mine-{unique}"]
    (prov,) = [p for p in session.provenance() if p["name"] == f"mine-{unique}"]
    assert prov["source"] == "module"
    assert prov["target"] == f"{module}:Mine"
    assert prov["distribution"] == f"mods-{unique}"
    assert prov["specifier"] == f"{module}:Mine"


def test_module_attr_register_function_and_bare_module(
    make_dist: MakeDist, unique: str, tmp_path: Path
) -> None:
    module = f"vally_t_reg_{unique}"
    source = grader_source("A", f"a-{unique}") + grader_source("B", f"b-{unique}")
    source += "\ndef register(registrar):\n    registrar.grader(A)\n    registrar.grader(B)\n"
    make_dist(f"reg-{unique}", modules={f"{module}.py": source})
    session = Session(environ={})
    expected = [f"a-{unique}", f"b-{unique}"]
    assert session.load_plugins("grader", [f"{module}:register"], base_dir=tmp_path) == expected
    assert session.load_plugins("grader", [module], base_dir=tmp_path) == expected


def test_module_attr_of_the_wrong_kind(make_dist: MakeDist, unique: str, tmp_path: Path) -> None:
    module = f"vally_t_wk_{unique}"
    make_dist(f"wk-{unique}", modules={f"{module}.py": grader_source("G", f"g-{unique}")})
    with pytest.raises(PluginValidationError) as info:
        Session(environ={}).load_plugins("executor", [f"{module}:G"], base_dir=tmp_path)
    assert f"{module}:G" in str(info.value)
    assert "kind 'grader'" in str(info.value)


def test_module_attr_missing_module_and_attribute(tmp_path: Path, unique: str) -> None:
    session = Session(environ={})
    with pytest.raises(PluginLoadError) as info:
        session.load_plugins("grader", [f"vally_t_nowhere_{unique}:X"], base_dir=tmp_path)
    assert f"vally_t_nowhere_{unique}:X" in str(info.value)
    assert isinstance(info.value.__cause__, ModuleNotFoundError)
    with pytest.raises(PluginLoadError, match="has no attribute 'Nope'"):
        session.load_plugins("grader", ["vally_word_count_grader:Nope"], base_dir=tmp_path)


# --------------------------------------------------------------------------- 4


def test_py_file_relative_to_base_dir_loads_once(tmp_path: Path) -> None:
    plugin = grader_file(tmp_path / "graders" / "my_grader.py", "MyGrader", "my-grader")
    session = Session(environ={})
    base = tmp_path / "graders"
    names = session.load_plugins(
        "grader", ["my_grader.py", "./my_grader.py", str(plugin)], base_dir=base
    )
    assert names == ["my-grader"]
    cls = session.plugin_class("grader", "my-grader")
    assert cls.__module__.startswith("vally._plugins.my_grader_")
    assert len(cls.__module__.rsplit("_", 1)[1]) == 8
    assert sys.modules[cls.__module__].__file__ == str(plugin)
    (prov,) = [p for p in session.provenance() if p["name"] == "my-grader"]
    assert prov["source"] == "file"
    assert prov["path"] == str(plugin.resolve())
    assert prov["sha256"] == hashlib.sha256(plugin.read_bytes()).hexdigest()
    assert str(tmp_path) not in sys.path


def test_two_files_with_one_name_conflict(tmp_path: Path) -> None:
    grader_file(tmp_path / "one.py", "One", "twin")
    grader_file(tmp_path / "two.py", "Two", "twin")
    session = Session(environ={})
    session.load_plugins("grader", ["one.py"], base_dir=tmp_path)
    with pytest.raises(PluginConflictError) as info:
        session.load_plugins("grader", ["two.py"], base_dir=tmp_path)
    assert "one.py" in str(info.value) and "two.py" in str(info.value)


def test_package_directory_with_relative_imports(tmp_path: Path) -> None:
    write(tmp_path / "pkg_plugin" / "impl.py", grader_source("PkgGrader", "pkg-grader"))
    write(
        tmp_path / "pkg_plugin" / "__init__.py",
        "from .impl import PkgGrader\n\ndef register(registrar):\n"
        "    registrar.grader(PkgGrader)\n",
    )
    session = Session(environ={})
    assert session.load_plugins("grader", ["pkg_plugin"], base_dir=tmp_path) == ["pkg-grader"]
    (prov,) = [p for p in session.provenance() if p["name"] == "pkg-grader"]
    assert prov["path"] == str((tmp_path / "pkg_plugin").resolve())
    assert len(prov["sha256"]) == 64


def test_plain_directory_loads_each_file_sorted_skipping_underscored(tmp_path: Path) -> None:
    folder = tmp_path / "many"
    grader_file(folder / "b_second.py", "Second", "second")
    grader_file(folder / "a_first.py", "First", "first")
    write(folder / "_private.py", "raise RuntimeError('underscored files are skipped')\n")
    write(folder / "notes.txt", "not python")
    session = Session(environ={})
    assert session.load_plugins("grader", ["./many/"], base_dir=tmp_path) == ["first", "second"]
    # a file of the folder named on its own is the same module: loaded once
    assert session.load_plugins("grader", ["many/a_first.py"], base_dir=tmp_path) == ["first"]


@pytest.mark.parametrize("decorated", [True, False], ids=["hookimpl", "plain"])
def test_retired_hook_in_a_file_says_what_to_rename(tmp_path: Path, decorated: bool) -> None:
    marker = tmp_path / "ran"
    decorator = "from vally import hookimpl\n\n@hookimpl\n" if decorated else ""
    write(
        tmp_path / "hooked.py",
        grader_source("Hooked", "hooked")
        + f"\nopen({str(marker)!r}, 'w').close()\n\n"
        + f"{decorator}def vally_register_components(registrar):\n"
        "    registrar.grader(Hooked)\n",
    )
    with pytest.raises(PluginLoadError) as info:
        Session(environ={}).load_plugins("grader", ["hooked.py"], base_dir=tmp_path)
    message = str(info.value)
    assert "hooked.py" in message
    assert "rename it to register(registrar)" in message
    assert "@vally.hookimpl" in message
    assert "docs/plugins/migration.md" in message
    assert not marker.exists()  # the file was not run


def test_retired_hook_in_a_module_says_what_to_rename(
    make_dist: MakeDist, unique: str, tmp_path: Path
) -> None:
    module = f"vally_t_old_{unique}"
    source = grader_source("Old", f"old-{unique}") + (
        "\nfrom vally import hookimpl\n\n@hookimpl\ndef vally_register_components(registrar):\n"
        "    registrar.grader(Old)\n"
    )
    make_dist(f"old-{unique}", modules={f"{module}.py": source})
    with pytest.raises(PluginLoadError) as info:
        Session(environ={}).load_plugins("grader", [module], base_dir=tmp_path)
    assert f"module {module!r}" in str(info.value)
    assert "rename it to register(registrar)" in str(info.value)


def test_module_with_register_and_the_retired_hook_loads_through_register(
    tmp_path: Path,
) -> None:
    write(
        tmp_path / "both.py",
        grader_source("New", "new-form")
        + grader_source("Old", "old-form")
        + "\ndef register(registrar):\n    registrar.grader(New)\n"
        + "\ndef vally_register_components(registrar):\n    registrar.grader(Old)\n",
    )
    session = Session(environ={})
    assert session.load_plugins("grader", ["both.py"], base_dir=tmp_path) == ["new-form"]
    assert "old-form" not in session.known_names("grader")


def test_file_without_entry_function_is_not_executed(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    write(tmp_path / "script.py", f"open({str(marker)!r}, 'w').close()\n")
    with pytest.raises(PluginLoadError, match="no plugin entry found"):
        Session(environ={}).load_plugins("grader", ["script.py"], base_dir=tmp_path)
    assert not marker.exists()


def test_file_raising_on_import_is_a_chained_error(tmp_path: Path) -> None:
    write(tmp_path / "boom.py", "def register(registrar):\n    pass\n\n1 / 0\n")
    with pytest.raises(PluginLoadError) as info:
        Session(environ={}).load_plugins("grader", ["boom.py"], base_dir=tmp_path)
    assert str(info.value).startswith("plugin 'boom.py'")
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    assert not [m for m in sys.modules if m.startswith("vally._plugins.boom_")]


def test_file_with_syntax_error(tmp_path: Path) -> None:
    write(tmp_path / "broken.py", "def register(registrar:\n")
    with pytest.raises(PluginLoadError) as info:
        Session(environ={}).load_plugins("grader", ["broken.py"], base_dir=tmp_path)
    assert isinstance(info.value.__cause__, SyntaxError)


def test_register_raising_is_a_chained_error(tmp_path: Path) -> None:
    write(tmp_path / "angry.py", "def register(registrar):\n    raise KeyError('nope')\n")
    with pytest.raises(PluginLoadError) as info:
        Session(environ={}).load_plugins("grader", ["angry.py"], base_dir=tmp_path)
    assert "angry.py" in str(info.value)
    assert isinstance(info.value.__cause__, KeyError)


def test_file_registering_another_kind_only(tmp_path: Path) -> None:
    grader_file(tmp_path / "g.py", "G", "just-a-grader")
    with pytest.raises(PluginLoadError, match="registered no executor plugins"):
        Session(environ={}).load_plugins("executor", ["g.py"], base_dir=tmp_path)


def test_missing_path_and_unknown_specifier(tmp_path: Path) -> None:
    session = Session(environ={})
    with pytest.raises(PluginNotFoundError, match="does not exist"):
        session.load_plugins("grader", ["./nope.py"], base_dir=tmp_path)
    with pytest.raises(PluginNotFoundError, match="not a grader name"):
        session.load_plugins("grader", ["no-such-thing-anywhere"], base_dir=tmp_path)


def test_resolve_single_needs_exactly_one(tmp_path: Path) -> None:
    backend = """
from vally import BaseBackend, PluginMetadata

class {cls}(BaseBackend):
    metadata = PluginMetadata(name={name!r}, kind="backend")
"""
    write(
        tmp_path / "one_backend.py",
        backend.format(cls="Solo", name="solo-backend")
        + "\ndef register(registrar):\n    registrar.backend(Solo)\n",
    )
    write(
        tmp_path / "two_backends.py",
        backend.format(cls="A", name="backend-a")
        + backend.format(cls="B", name="backend-b")
        + "\ndef register(registrar):\n    registrar.backend(A)\n    registrar.backend(B)\n",
    )
    session = Session(environ={})
    assert session.resolve_single("backend", "one_backend.py", base_dir=tmp_path) == "solo-backend"
    with pytest.raises(PluginLoadError, match="exactly one"):
        session.resolve_single("backend", "two_backends.py", base_dir=tmp_path)


def test_project_plugins_load_on_first_use(tmp_path: Path) -> None:
    from vally.models.project import ProjectConfig

    grader_file(tmp_path / "plugins" / "proj.py", "Proj", "proj-grader")
    project = ProjectConfig.model_validate({"plugins": {"grader": ["plugins/proj.py"]}})
    session = Session(project, tmp_path, environ={})
    assert "proj-grader" in session.known_names("grader")
    # named again on the command line: loaded once
    names = session.load_plugins("grader", [str(tmp_path / "plugins/proj.py")], base_dir=tmp_path)
    assert names == ["proj-grader"]


def test_per_kind_register_functions(tmp_path: Path) -> None:
    write(
        tmp_path / "js_style.py",
        grader_source("Js", "js-style")
        + "\ndef register_graders(registry):\n    registry.register(Js)\n",
    )
    session = Session(environ={})
    assert session.load_plugins("grader", ["js_style.py"], base_dir=tmp_path) == ["js-style"]


def test_per_kind_register_function_named_by_module_attr(
    make_dist: MakeDist, unique: str, tmp_path: Path
) -> None:
    module = f"vally_t_js_{unique}"
    source = grader_source("Js", f"js-{unique}") + (
        "\ndef register_graders(registry):\n    registry.register(Js)\n"
    )
    make_dist(f"js-{unique}", modules={f"{module}.py": source})
    session = Session(environ={})
    names = session.load_plugins("grader", [f"{module}:register_graders"], base_dir=tmp_path)
    assert names == [f"js-{unique}"]
    (prov,) = [p for p in session.provenance() if p["name"] == f"js-{unique}"]
    assert prov["target"] == f"{module}:Js"


def test_distribution_without_entry_points_falls_back_to_its_module(
    make_dist: MakeDist, unique: str, tmp_path: Path
) -> None:
    module = f"vally_t_plain_{unique}"
    source = grader_source("Plain", f"plain-{unique}") + REGISTER_SOLO.format(cls="Plain")
    make_dist(module, modules={f"{module}.py": source})
    session = Session(environ={})
    assert session.load_plugins("grader", [module], base_dir=tmp_path) == [f"plain-{unique}"]
