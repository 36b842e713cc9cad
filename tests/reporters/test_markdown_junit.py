"""The markdown and junit reporters: content, determinism, valid XML."""

from __future__ import annotations

import random
import xml.etree.ElementTree as ET
from pathlib import Path

from reporter_helpers import Driver, make_record, make_run

from vally.models.records import TrialError, TrialResultRecord
from vally_builtin.reporters.junit import JunitConfig, JunitReporter
from vally_builtin.reporters.markdown import RENDERED_PREFIX, MarkdownReporter


def _records() -> list[TrialResultRecord]:
    error = TrialError(phase="execute", code="VALLY_EXECUTION", message="agent <crashed> & died")
    return [
        make_record("add-test"),
        make_record("sub-test", trial=0),
        make_record("sub-test", trial=1, passed=False),
        make_record("sub-test", trial=0, model="other-model", passed=False),
        make_record("boom", error=error),
        make_record("zeta", eval_name="another-eval"),
    ]


def _strip_rendered(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith(RENDERED_PREFIX))


def test_markdown_report_content(tmp_path: Path) -> None:
    Driver(MarkdownReporter()).run(make_run(tmp_path, 6), _records())
    text = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "- **Run:** `run-1`" in text
    assert "- **vally version:**" in text
    assert sum(line.startswith(RENDERED_PREFIX) for line in text.splitlines()) == 1
    assert text.index("## Eval: another-eval") < text.index("## Eval: quickstart")
    row = next(line for line in text.splitlines() if line.startswith("| sub-test | gpt-test"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2:9] == ["2", "1/2", "50.0%", "100.0% (k=2)", "25.0%", "yes", "0.75"]
    assert "### Failed graders" in text
    assert (
        "- **sub-test** [gpt-test] trial 1: `output-contains` failed — score 0.00: "
        "expected 'PASS' in output | not found"
    ) in text
    assert "### Errored trials" in text
    assert "- **boom** [gpt-test] trial 0: execute error `VALLY_EXECUTION`" in text
    assert not list(tmp_path.glob(".report.md.*"))  # no temp file left behind


def test_markdown_is_deterministic(tmp_path: Path) -> None:
    records = _records()
    shuffled = records[:]
    random.Random(4).shuffle(shuffled)
    first, second = tmp_path / "a", tmp_path / "b"
    Driver(MarkdownReporter()).run(make_run(first, 6), records)
    Driver(MarkdownReporter()).run(make_run(second, 6), shuffled)
    a = (first / "report.md").read_text(encoding="utf-8")
    b = (second / "report.md").read_text(encoding="utf-8")
    assert _strip_rendered(a) == _strip_rendered(b)
    assert len(_strip_rendered(a).splitlines()) == len(a.splitlines()) - 1


def test_junit_parses_and_counts(tmp_path: Path) -> None:
    Driver(JunitReporter()).run(make_run(tmp_path, 6), _records())
    root = ET.parse(tmp_path / "junit.xml").getroot()
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("6", "2", "1")
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert sorted(suites) == ["another-eval", "quickstart"]
    quick = suites["quickstart"]
    assert quick.get("tests") == "5"
    cases = {c.get("name"): c for c in quick.findall("testcase")}
    assert set(cases) == {
        "add-test[gpt-test]#0",
        "boom[gpt-test]#0",
        "sub-test[gpt-test]#0",
        "sub-test[gpt-test]#1",
        "sub-test[other-model]#0",
    }
    assert all(c.get("classname") == "quickstart" for c in cases.values())
    failure = cases["sub-test[gpt-test]#1"].find("failure")
    assert failure is not None
    assert failure.get("message") == "failed graders: output-contains"
    assert "expected 'PASS' in output" in (failure.text or "")
    error = cases["boom[gpt-test]#0"].find("error")
    assert error is not None and error.get("type") == "VALLY_EXECUTION"
    assert error.get("message") == "agent <crashed> & died"
    assert cases["add-test[gpt-test]#0"].find("failure") is None


def test_junit_strips_characters_xml_cannot_hold(tmp_path: Path) -> None:
    record = make_record(passed=False)
    details = record.grade_result.details if record.grade_result else []
    details[1] = details[1].model_copy(update={"evidence": "bad \x00\x1b byte"})
    Driver(JunitReporter(JunitConfig(path="ci/junit.xml"))).run(make_run(tmp_path, 1), [record])
    root = ET.parse(tmp_path / "ci" / "junit.xml").getroot()
    failure = root.find("testsuite/testcase/failure")
    assert failure is not None and "bad  byte" in (failure.text or "")


def test_no_run_dir_writes_nothing(tmp_path: Path) -> None:
    Driver(JunitReporter(), MarkdownReporter()).run(make_run(None, 1), [make_record()])
    assert list(tmp_path.iterdir()) == []


def test_ungraded_and_cancelled_trials_are_skipped(tmp_path: Path) -> None:
    skipped = make_record("a").model_copy(update={"grade_result": None})
    cancelled = make_record("b").model_copy(update={"status": "cancelled"})
    Driver(JunitReporter(), MarkdownReporter()).run(make_run(tmp_path, 2), [skipped, cancelled])
    root = ET.parse(tmp_path / "junit.xml").getroot()
    assert (root.get("tests"), root.get("skipped"), root.get("failures")) == ("2", "2", "0")
    reasons = [s.get("message") for s in root.iter("skipped")]
    assert reasons == ["not graded", "cancelled"]
    text = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "| 0 | 0 | 0 | 1 | 1 |" in text  # overview: 1 cancelled, 1 not graded


def test_markdown_row_names_the_model_the_agent_reported(tmp_path: Path) -> None:
    record = make_record("add-test", model=None)
    assert record.trajectory is not None
    metadata = record.trajectory.metadata.model_copy(update={"model": "gpt-reported"})
    trajectory = record.trajectory.model_copy(update={"metadata": metadata})
    Driver(MarkdownReporter()).run(
        make_run(tmp_path, 1), [record.model_copy(update={"trajectory": trajectory})]
    )
    text = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert any(line.startswith("| add-test | gpt-reported |") for line in text.splitlines())


def test_names_in_the_report_are_never_html(tmp_path: Path) -> None:
    hostile = "<img src=x onerror=alert(1)>"
    error = TrialError(phase="execute", code="VALLY_EXECUTION", message="<script>x</script>")
    records = [
        make_record(hostile, passed=False, model="<b>m</b>", eval_name="<i>ev</i>"),
        make_record("ok", error=error, eval_name="<i>ev</i>"),
    ]
    Driver(MarkdownReporter()).run(make_run(tmp_path, 2), records)
    text = (tmp_path / "report.md").read_text(encoding="utf-8")
    for raw in ("<img", "<b>", "<i>", "<script>"):
        assert raw not in text, raw
    assert "## Eval: &lt;i&gt;ev&lt;/i&gt;" in text
    assert "**&lt;img src=x onerror=alert(1)&gt;** [&lt;b&gt;m&lt;/b&gt;] trial 0" in text
    assert "&lt;script&gt;x&lt;/script&gt;" in text
