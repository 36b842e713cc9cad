"""The public names are written once, in the ``if TYPE_CHECKING:`` block of a package's
``__init__.py``; :func:`vally.type_checking_exports` reads that block into the map from
each name to where it lives, and :func:`vally.lazy_attributes` resolves names through it."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import pytest

import vally
from vally import type_checking_exports


def _init(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "__init__.py"
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


def test_every_import_form_of_the_block_is_read(tmp_path: Path) -> None:
    path = _init(
        tmp_path,
        """
        from typing import TYPE_CHECKING

        from pkg.early import NotExported  # before the block: not a public name

        if TYPE_CHECKING:  # pragma: no cover
            from pkg import sub as sub_module
            from pkg.a import (
                One as One,
                two as two,  # a comment
                Renamed as Other,
            )
            from pkg.b import Three as Three, four as four
            from pkg.c import Five
            from vally.models import *  # what vally.models imports
            from pkg.d import thing as _thing

            # a private import re-exported under another name
            public_thing = _thing

        from pkg.after import Later
        """,
    )
    found = type_checking_exports(path)
    assert found.pop("EvalSpec") == "vally.models.spec"
    assert found.pop("TrialResultRecord") == "vally.models.records"
    found = {name: where for name, where in found.items() if not where.startswith("vally.")}
    assert found == {
        "sub_module": "pkg:sub",
        "One": "pkg.a",
        "two": "pkg.a",
        "Other": "pkg.a:Renamed",
        "Three": "pkg.b",
        "four": "pkg.b",
        "Five": "pkg.c",
        "public_thing": "pkg.d:thing",
    }


def test_a_file_without_the_block_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        type_checking_exports(_init(tmp_path, "import os\n"))


@pytest.mark.parametrize("package", ["vally", "vally_compare", "vally_backends.docker"])
def test_each_public_name_is_the_object_its_module_defines(package: str) -> None:
    module = importlib.import_module(package)
    exports = type_checking_exports(Path(str(module.__file__)))
    assert exports, f"{package} exports nothing"
    for name, target in exports.items():
        where, _, attribute = target.partition(":")
        source = importlib.import_module(where)
        expected = getattr(source, attribute or name, None)
        if expected is None:  # a submodule
            expected = importlib.import_module(f"{where}.{attribute or name}")
        assert getattr(module, name) is expected, f"{package}.{name} is not {target}"
    assert sorted(module.__all__) == module.__all__
    assert set(exports) <= set(module.__all__) <= set(dir(module))


def test_the_kernel_exports_are_read_once_and_cached() -> None:
    sys.modules["vally"].__dict__.pop("run_eval", None)
    assert vally.run_eval is vally.run_eval
    assert "run_eval" in vars(vally)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        _ = vally.not_a_name  # type: ignore[attr-defined]
