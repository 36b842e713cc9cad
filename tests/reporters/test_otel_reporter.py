"""The otel reporter driven through a real session: the span file, OTLP export to a local
receiver, links, error status, endpoint validation, and a collector that is not there."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from reporter_helpers import make_record

from tests.otlp_receiver import Receiver, protobuf_attributes, silent_collector, unused_port_url
from vally.contracts.events import RunInfo, RunOutcome
from vally.contracts.protocols import TrialKey
from vally.errors import ConfigError, OutputError
from vally.models.records import TrialError, TrialResultRecord
from vally.plugins.session import Session
from vally.testing import make_session
from vally_builtin.reporters import otel_export
from vally_builtin.reporters.otel import CONTEXT_FILE, SPANS_FILE, OtelReporter

ERROR = TrialError(phase="execute", code="VALLY_EXECUTION", message="agent crashed")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as rec:
        yield rec


def new_session(config: dict[str, Any] | None = None) -> tuple[Session, OtelReporter]:
    """A session with the reporter created by name and registered as ``otel``."""
    session = make_session(OtelReporter)
    reporter = session.create("reporter", "otel", config or {}, where="--otlp-endpoint")
    session.register_observer(reporter, "otel")
    return session, reporter


def make_run(run_dir: Path | None, command: str = "eval", **fields: Any) -> RunInfo:
    return RunInfo(
        run_id="run-1",
        command=command,
        run_dir=run_dir,
        planned_trials=fields.pop("planned_trials", 2),
        started_at="2026-01-01T00:00:00.000Z",
        **fields,
    )


def key_of(record: TrialResultRecord) -> TrialKey:
    return TrialKey(
        record.variant or "",
        record.eval_name,
        record.stimulus_name,
        record.model or "default",
        record.trial_index,
    )


def drive(
    session: Session,
    run: RunInfo,
    records: Sequence[TrialResultRecord],
    *,
    unfinished: Sequence[TrialKey] = (),
    cancelled: bool = False,
    error: str | None = None,
) -> None:
    """Emit a whole run: each trial's start, grader results and end, then the run end."""
    emit = session.emitter.emit
    emit("vally_run_start", run=run)
    for key in unfinished:
        emit("vally_trial_start", run=run, key=key)
    for record in records:
        key = key_of(record)
        emit("vally_trial_start", run=run, key=key)
        for result in record.grade_result.details if record.grade_result else []:
            emit("vally_grader_result", run=run, key=key, result=result)
        emit("vally_trial_end", run=run, record=record)
    outcome = RunOutcome(records=list(records), summaries=[], cancelled=cancelled, error=error)
    emit("vally_run_end", run=run, outcome=outcome)


def read_spans(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / SPANS_FILE).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def test_span_file_holds_the_run_tree(tmp_path: Path) -> None:
    session, reporter = new_session()
    run = make_run(tmp_path, evals=("quickstart", "other"))
    passed = make_record("a")
    errored = make_record("b", error=ERROR)
    drive(session, run, [passed, errored])
    assert session.emitter.failures == []

    spans = read_spans(tmp_path)
    (root,) = [s for s in spans if s["name"] == "vally.eval"]
    assert root["attributes"] == {
        "vally.run_id": "run-1",
        "vally.evals": "quickstart,other",
        "vally.planned_trials": 2,
    }
    assert root["parentSpanId"] is None and root["status"] == "UNSET"
    assert spans[-1]["spanId"] == root["spanId"]  # the root ends last
    assert {s["traceId"] for s in spans} == {root["traceId"]}

    trials = {s["attributes"]["vally.stimulus"]: s for s in spans if s["name"] == "vally.trial"}
    assert set(trials) == {"a", "b"}
    assert all(t["parentSpanId"] == root["spanId"] for t in trials.values())
    assert trials["a"]["attributes"] == {
        "vally.eval": "quickstart",
        "vally.stimulus": "a",
        "vally.model": "gpt-test",
        "vally.trial": 0,
        "vally.status": "success",
        "vally.verdict": "pass",
        "vally.score": 1.0,
        "vally.tokens.input": 100,
        "vally.tokens.output": 20,
        "vally.tokens.total": 120,
    }
    assert trials["b"]["attributes"]["vally.verdict"] == "error"
    assert (trials["b"]["status"], trials["b"]["statusDescription"]) == ("ERROR", "agent crashed")

    graders = [s for s in spans if s["name"].startswith("vally.grader ")]
    names = {s["name"] for s in graders}
    assert names == {"vally.grader file-exists", "vally.grader output-contains"}
    assert all(s["parentSpanId"] == trials["a"]["spanId"] for s in graders)
    grader = next(s for s in graders if s["name"] == "vally.grader output-contains")
    assert grader["attributes"]["vally.grader.passed"] is True
    assert grader["attributes"]["vally.verdict"] == "pass"
    (executor,) = [s for s in spans if s["name"] == "vally.executor"]  # only the finished one
    assert executor["parentSpanId"] == trials["a"]["spanId"]
    assert executor["attributes"]["vally.executor"] == "mock"
    assert executor["attributes"]["vally.tool_calls"] == 1

    context = json.loads((tmp_path / CONTEXT_FILE).read_text(encoding="utf-8"))
    assert context == {
        "traceId": root["traceId"],
        "spanId": root["spanId"],
        "name": "vally.eval",
        "exporter": "jsonl",
        "attributes": root["attributes"],
    }
    assert reporter.context() is None  # the run is over


def test_each_span_is_written_as_it_ends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(otel_export, "FLUSH_SECONDS", 0.0)  # flush on every export
    session, reporter = new_session()
    run = make_run(tmp_path)
    record = make_record("a")
    session.emitter.emit("vally_run_start", run=run)
    assert (tmp_path / SPANS_FILE).read_text(encoding="utf-8") == ""
    context = json.loads((tmp_path / CONTEXT_FILE).read_text(encoding="utf-8"))
    assert reporter.context() == {"traceId": context["traceId"], "spanId": context["spanId"]}
    session.emitter.emit("vally_trial_start", run=run, key=key_of(record))
    session.emitter.emit("vally_trial_end", run=run, record=record)
    assert [s["name"] for s in read_spans(tmp_path)] == ["vally.executor", "vally.trial"]
    session.emitter.emit("vally_run_end", run=run, outcome=RunOutcome([record], []))
    assert [s["name"] for s in read_spans(tmp_path)][-1] == "vally.eval"


def test_experiment_variants_and_an_interrupted_run(tmp_path: Path) -> None:
    session, _ = new_session()
    run = make_run(
        tmp_path, "experiment", experiment="greet", baseline="base", shard="1/2", planned_trials=3
    )
    records = [make_record("a", variant="base"), make_record("a", variant="quiet", passed=False)]
    left_open = TrialKey("quiet", "quickstart", "b", "gpt-test", 0)
    drive(session, run, records, unfinished=[left_open], cancelled=True)

    spans = read_spans(tmp_path)
    (root,) = [s for s in spans if s["name"] == "vally.experiment"]
    assert root["attributes"] == {
        "vally.run_id": "run-1",
        "vally.experiment": "greet",
        "vally.baseline": "base",
        "vally.shard": "1/2",
        "vally.planned_trials": 3,
    }
    assert (root["status"], root["statusDescription"]) == ("ERROR", "run interrupted")
    variants = {s["attributes"]["vally.variant"]: s for s in spans if s["name"] == "vally.variant"}
    assert set(variants) == {"base", "quiet"}
    assert all(v["parentSpanId"] == root["spanId"] for v in variants.values())
    trials = [s for s in spans if s["name"] == "vally.trial"]
    assert len(trials) == 3
    for trial in trials:
        variant = trial["attributes"]["vally.variant"]
        assert trial["parentSpanId"] == variants[variant]["spanId"]
    # the trial that never finished is ended at the run's end, without a verdict
    (unfinished,) = [t for t in trials if t["attributes"]["vally.stimulus"] == "b"]
    assert "vally.verdict" not in unfinished["attributes"]
    verdicts = {
        t["attributes"]["vally.variant"]: t["attributes"].get("vally.verdict")
        for t in trials
        if t is not unfinished
    }
    assert verdicts == {"base": "pass", "quiet": "fail"}


def test_run_error_sets_error_status_on_the_root(tmp_path: Path) -> None:
    session, _ = new_session()
    drive(session, make_run(tmp_path), [make_record()], error="cannot write results.jsonl")
    (root,) = [s for s in read_spans(tmp_path) if s["name"] == "vally.eval"]
    assert (root["status"], root["statusDescription"]) == ("ERROR", "cannot write results.jsonl")


def test_merge_links_each_shard(tmp_path: Path) -> None:
    shard_contexts = []
    for index in (1, 2):
        shard_dir = tmp_path / f"shard-{index}"
        session, _ = new_session()
        drive(session, make_run(shard_dir, "experiment", shard=f"{index}/2"), [make_record()])
        context = json.loads((shard_dir / CONTEXT_FILE).read_text(encoding="utf-8"))
        shard_contexts.append({**context, "vally.shard": f"{index}/2"})
    broken = {"traceId": "not-hex", "spanId": "00", "vally.shard": "3/2"}

    merged = tmp_path / "merged"
    session, _ = new_session()
    run = make_run(merged, "experiment.merge", experiment="greet", links=[*shard_contexts, broken])
    drive(session, run, [])
    assert session.emitter.failures == []
    (root,) = [s for s in read_spans(merged) if s["name"] == "vally.experiment.merge"]
    links = sorted(root["links"], key=lambda link: link["attributes"]["vally.shard"])
    assert links == [
        {"traceId": c["traceId"], "spanId": c["spanId"], "attributes": {"vally.shard": shard}}
        for c, shard in zip(shard_contexts, ("1/2", "2/2"), strict=True)
    ]
    context = json.loads((merged / CONTEXT_FILE).read_text(encoding="utf-8"))
    assert context["name"] == "vally.experiment.merge" and context["spanId"] == root["spanId"]


def test_export_to_a_local_receiver(tmp_path: Path, receiver: Receiver) -> None:
    session, _ = new_session({"endpoint": receiver.url, "timeout": "5s"})
    link = {"traceId": "ab" * 16, "spanId": "cd" * 8, "vally.shard": "1/2"}
    run = make_run(tmp_path, "experiment", experiment="greet", links=[link])
    records = [make_record("a", variant="base"), make_record("b", variant="base", error=ERROR)]
    drive(session, run, records, error="stopped early")
    assert session.emitter.failures == []

    assert not (tmp_path / SPANS_FILE).exists()
    context = json.loads((tmp_path / CONTEXT_FILE).read_text(encoding="utf-8"))
    assert context["exporter"] == "otlp" and context["name"] == "vally.experiment"
    assert set(receiver.paths) == {"/v1/traces"}
    (root,) = receiver.named("vally.experiment")
    assert (root.trace_id.hex(), root.span_id.hex()) == (context["traceId"], context["spanId"])
    assert root.status.code == 2 and root.status.message == "stopped early"  # ERROR
    (received_link,) = root.links
    assert (received_link.trace_id.hex(), received_link.span_id.hex()) == ("ab" * 16, "cd" * 8)
    assert protobuf_attributes(received_link.attributes) == {"vally.shard": "1/2"}
    assert receiver.attributes(root)["vally.experiment"] == "greet"

    (variant,) = receiver.named("vally.variant")
    assert variant.parent_span_id == root.span_id
    trials = {receiver.attributes(s)["vally.stimulus"]: s for s in receiver.named("vally.trial")}
    assert all(t.parent_span_id == variant.span_id for t in trials.values())
    assert receiver.attributes(trials["a"])["vally.verdict"] == "pass"
    assert trials["b"].status.code == 2 and trials["b"].status.message == "agent crashed"
    graders = [s for s in receiver.spans if s.name.startswith("vally.grader ")]
    assert len(graders) == 2 and all(g.parent_span_id == trials["a"].span_id for g in graders)
    assert {s.trace_id for s in receiver.spans} == {root.trace_id}


def test_endpoint_without_a_run_folder_exports_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, receiver: Receiver
) -> None:
    monkeypatch.chdir(tmp_path)
    session, _ = new_session({"endpoint": receiver.url + "/"})
    drive(session, make_run(None), [make_record()])
    assert session.emitter.failures == []
    assert [s.name for s in receiver.named("vally.eval")] == ["vally.eval"]
    assert list(tmp_path.iterdir()) == []


def test_no_run_folder_and_no_endpoint_does_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    session, reporter = new_session()
    run = make_run(None)
    session.emitter.emit("vally_run_start", run=run)
    assert reporter.context() is None
    drive(session, run, [make_record()])
    assert session.emitter.failures == []
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("endpoint", ["localhost:4318", "ftp://collector:4318", "http://"])
def test_bad_endpoint_is_rejected_at_creation(endpoint: str) -> None:
    session = make_session(OtelReporter)
    with pytest.raises(ConfigError) as info:
        session.create("reporter", "otel", {"endpoint": endpoint}, where="--otlp-endpoint")
    message = info.value.message
    assert "reporter 'otel' at --otlp-endpoint" in message
    assert f"endpoint: {endpoint!r} is not an http(s) URL" in message
    assert "e.g. http://localhost:4318" in message


def test_timeout_must_be_a_positive_duration() -> None:
    session = make_session(OtelReporter)
    for timeout in ("0s", "10"):
        with pytest.raises(ConfigError, match="timeout"):
            session.create("reporter", "otel", {"timeout": timeout})
    assert session.create("reporter", "otel", {"timeout": "250ms"}).config.timeout == 0.25


def assert_export_warning(session: Session, url: str, caplog: pytest.LogCaptureFixture) -> None:
    (failure,) = session.emitter.failures
    assert (failure.observer, failure.hook, failure.critical) == ("otel", "vally_run_end", False)
    assert isinstance(failure.error, OutputError)
    assert f"trace export to {url}/v1/traces failed" in failure.error.message
    assert "span(s) were not delivered" in failure.error.message
    assert any(
        r.levelno == logging.WARNING and "reporter otel failed in vally_run_end" in r.getMessage()
        for r in caplog.records
    )


def test_unreachable_collector_is_a_bounded_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = unused_port_url()
    session, _ = new_session({"endpoint": url, "timeout": "1s"})
    started = time.monotonic()
    drive(session, make_run(tmp_path), [make_record("a"), make_record("b")])
    assert time.monotonic() - started < 6
    assert_export_warning(session, url, caplog)
    assert json.loads((tmp_path / CONTEXT_FILE).read_text(encoding="utf-8"))["exporter"] == "otlp"


def test_silent_collector_does_not_hang_the_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with silent_collector() as url:
        session, _ = new_session({"endpoint": url, "timeout": "500ms"})
        started = time.monotonic()
        drive(session, make_run(tmp_path), [make_record("a")])
        assert time.monotonic() - started < 5
    assert_export_warning(session, url, caplog)


def test_unwritable_span_file_is_a_warning_not_a_failed_run(tmp_path: Path) -> None:
    (tmp_path / SPANS_FILE).mkdir()  # a folder where the file should be
    session, reporter = new_session()
    drive(session, make_run(tmp_path), [make_record()])
    (failure,) = session.emitter.failures
    assert (failure.hook, failure.critical) == ("vally_run_start", False)
    assert isinstance(failure.error, OutputError)
    assert f"cannot open the span file {tmp_path / SPANS_FILE}" in failure.error.message
    assert reporter.context() is None
    assert not (tmp_path / CONTEXT_FILE).exists()


def test_importing_the_reporter_does_not_import_opentelemetry() -> None:
    code = (
        "import sys, vally_builtin.reporters.otel as otel; otel.OtelReporter(); "
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
