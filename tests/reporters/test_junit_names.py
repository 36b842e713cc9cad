"""junit.xml stays valid XML whatever characters names and messages hold."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from reporter_helpers import Driver, make_record, make_run

from vally_builtin.reporters.junit import JunitReporter


def test_control_characters_and_lone_surrogates_in_names_never_break_junit(
    tmp_path: Path,
) -> None:
    # Records read back by `vally grade` may come from anywhere: names are not re-validated.
    record = make_record("s", passed=False).model_copy(
        update={
            "stimulus_name": "a\x00b\x1b",
            "eval_name": "ev\x0bal",
            "variant": "v\ud800",
            "model": "m\x08",
        }
    )
    Driver(JunitReporter()).run(make_run(tmp_path, 1), [record])
    root = ET.parse(tmp_path / "junit.xml").getroot()  # parses: every character is legal
    suite = root.find("testsuite")
    assert suite is not None and suite.get("name") == "eval (v)"
    case = root.find("testsuite/testcase")
    assert case is not None and case.get("name") == "ab[m]#0"
    prop = root.find("testsuite/testcase/properties/property")
    assert prop is not None and prop.get("value") == "v"
