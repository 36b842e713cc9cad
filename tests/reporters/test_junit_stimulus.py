"""junit.xml with one test case per stimulus: its pass rate against the required one, a
flaky stimulus one red case, errors and skips, and the properties the schema documents."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from reporter_helpers import Driver, make_record, make_run

from vally.models.records import TrialError
from vally_builtin.reporters.junit import JunitConfig, JunitReporter


def _cases(tmp_path: Path, records: list, **config: object) -> dict[str, ET.Element]:  # type: ignore[type-arg]
    Driver(JunitReporter(JunitConfig(cases="stimulus", **config))).run(
        make_run(tmp_path, len(records)), records
    )
    root = ET.parse(tmp_path / "junit.xml").getroot()
    return {str(case.get("name")): case for case in root.iter("testcase")}


def _props(case: ET.Element) -> dict[str, str]:
    return {str(p.get("name")): str(p.get("value")) for p in case.iter("property")}


def test_one_case_per_stimulus_and_a_flaky_one_is_red(tmp_path: Path) -> None:
    error = TrialError(phase="execute", code="VALLY_EXECUTION", message="agent crashed")
    records = [make_record("steady", trial=i) for i in range(3)]
    records += [make_record("flaky", trial=i, passed=i != 1) for i in range(3)]
    records += [make_record("broken", trial=0), make_record("broken", trial=1, error=error)]
    cases = _cases(tmp_path, records)
    assert sorted(cases) == ["broken[gpt-test]", "flaky[gpt-test]", "steady[gpt-test]"]
    steady, flaky, broken = (cases[f"{n}[gpt-test]"] for n in ("steady", "flaky", "broken"))
    assert list(steady.iter("failure")) == [] and list(steady.iter("error")) == []
    assert _props(steady) == {
        "trials": "3",
        "passed": "3",
        "failed": "0",
        "errored": "0",
        "passRate": "1.0000",
        "requiredPassRate": "1.0000",
    }
    [failure] = flaky.iter("failure")
    message = str(failure.get("message"))
    assert message.startswith("pass rate 66.7% (2/3) < 100.0% (flaky: some trials passed)")
    assert "most common: 1 with output-contains: expected 'PASS'" in message
    [err] = broken.iter("error")
    assert str(err.get("message")).startswith("1 of 2 trial(s) errored")
    root = ET.parse(tmp_path / "junit.xml").getroot()
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("3", "1", "1")


def test_the_required_pass_rate_decides_the_case(tmp_path: Path) -> None:
    records = [make_record("flaky", trial=i, passed=i != 1) for i in range(3)]
    cases = _cases(tmp_path, records, pass_rate=0.6)
    assert list(cases["flaky[gpt-test]"].iter("failure")) == []
    assert _props(cases["flaky[gpt-test]"])["requiredPassRate"] == "0.6000"


def test_trial_cases_stay_the_default(tmp_path: Path) -> None:
    records = [make_record("flaky", trial=i, passed=i != 1) for i in range(3)]
    Driver(JunitReporter()).run(make_run(tmp_path, 3), records)
    names = [c.get("name") for c in ET.parse(tmp_path / "junit.xml").getroot().iter("testcase")]
    assert names == ["flaky[gpt-test]#0", "flaky[gpt-test]#1", "flaky[gpt-test]#2"]
