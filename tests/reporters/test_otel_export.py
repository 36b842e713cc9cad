"""The otel reporter's exporters: the OTLP one waits a bounded time once the run has ended,
and both remember what they could not deliver."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.otlp_receiver import Receiver, unused_port_url
from vally_builtin.reporters.otel_export import (
    JsonLinesSpanExporter,
    OtlpSpanExporter,
    open_pipeline,
    otlp_traces_url,
    span_links,
    span_to_json,
)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as rec:
        yield rec


def finished_spans(*names: str) -> list[ReadableSpan]:
    tracer = TracerProvider().get_tracer("test")
    spans: list[Any] = []
    for name in names:
        span = tracer.start_span(name)
        span.end()
        spans.append(span)
    return spans


def test_traces_url() -> None:
    assert otlp_traces_url("http://c:4318") == "http://c:4318/v1/traces"
    assert otlp_traces_url("http://c:4318/") == "http://c:4318/v1/traces"
    assert otlp_traces_url("https://c/otlp/v1/traces") == "https://c/otlp/v1/traces"


def test_closing_sends_before_the_deadline_only(receiver: Receiver) -> None:
    exporter = OtlpSpanExporter(otlp_traces_url(receiver.url), timeout=5)
    assert exporter.export(finished_spans("one", "two")) == SpanExportResult.SUCCESS
    exporter.begin_closing(time.monotonic() + 60)
    assert exporter.export(finished_spans("three")) == SpanExportResult.SUCCESS
    assert exporter.problem() is None
    exporter.begin_closing(time.monotonic() - 1)  # the deadline has passed
    assert exporter.export(finished_spans("late")) == SpanExportResult.FAILURE
    exporter.shutdown()
    assert [s.name for s in receiver.spans] == ["one", "two", "three"]
    problem = exporter.problem()
    assert problem is not None
    assert "1 of 4 span(s) were not delivered" in problem.message


def test_after_a_failed_batch_closing_drops_the_rest_at_once() -> None:
    exporter = OtlpSpanExporter(otlp_traces_url(unused_port_url()), timeout=1)
    assert exporter.export(finished_spans("refused")) == SpanExportResult.FAILURE
    exporter.begin_closing(time.monotonic() + 60)
    started = time.monotonic()
    for _ in range(5):
        assert exporter.export(finished_spans("a", "b")) == SpanExportResult.FAILURE
    assert time.monotonic() - started < 0.5
    exporter.shutdown()
    problem = exporter.problem()
    assert problem is not None and "11 of 11 span(s)" in problem.message


def test_span_file_lines(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "spans.jsonl"
    exporter = JsonLinesSpanExporter(path)
    spans = finished_spans("one", "two")
    assert exporter.export(spans) == SpanExportResult.SUCCESS
    assert exporter.force_flush()
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [span_to_json(s) for s in spans]
    assert lines[0].startswith('{"name": "one", "traceId": ')
    exporter.shutdown()
    assert exporter.problem() is None


def test_span_file_is_written_in_batches_not_flushed_per_span(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    exporter = JsonLinesSpanExporter(path, flush_every=3600)
    for name in ("one", "two", "three"):
        assert exporter.export(finished_spans(name)) == SpanExportResult.SUCCESS
    assert path.read_text(encoding="utf-8") == ""  # still buffered: no write per span
    exporter.shutdown()
    names = [json.loads(line)["name"] for line in path.read_text(encoding="utf-8").splitlines()]
    assert names == ["one", "two", "three"]
    assert exporter.problem() is None


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs a full device")
def test_a_full_disk_is_remembered_when_the_buffer_is_written() -> None:
    path = Path("/dev/full")
    exporter = JsonLinesSpanExporter(path, flush_every=3600)
    assert exporter.export(finished_spans("one")) == SpanExportResult.SUCCESS  # buffered
    exporter.shutdown()
    problem = exporter.problem()
    assert problem is not None and f"cannot write the span file {path}" in problem.message


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs a full device")
def test_a_full_disk_is_remembered() -> None:
    path = Path("/dev/full")
    exporter = JsonLinesSpanExporter(path, flush_every=0)
    assert exporter.export(finished_spans("one")) == SpanExportResult.FAILURE
    assert exporter.export(finished_spans("two")) == SpanExportResult.FAILURE
    exporter.shutdown()
    problem = exporter.problem()
    assert problem is not None and f"cannot write the span file {path}" in problem.message


def test_pipeline_needs_a_destination() -> None:
    with pytest.raises(ValueError, match="span file or an endpoint"):
        open_pipeline(None, None, 1.0)


def test_links_skip_bad_ids_and_context_fields() -> None:
    good = {
        "traceId": "01" * 16,
        "spanId": "02" * 8,
        "name": "vally.experiment",
        "exporter": "jsonl",
        "attributes": {"vally.run_id": "r"},
        "vally.shard": "1/2",
        "nested": ["not", "an", "attribute"],
    }
    bad = [
        {"spanId": "02" * 8},
        {"traceId": "xyz", "spanId": "02" * 8},
        {"traceId": "0" * 32, "spanId": "0" * 16},
    ]
    (link,) = span_links([good, *bad])
    assert format(link.context.trace_id, "032x") == "01" * 16
    assert dict(link.attributes or {}) == {"vally.shard": "1/2"}


def _tree(tracer: Any) -> None:
    """The same spans, whichever tracer starts them: a linked root, a child that errs, a
    grandchild with its own times, an event and an attribute set after the start."""
    from opentelemetry import trace
    from opentelemetry.trace import Status, StatusCode

    link = {"traceId": "ab" * 16, "spanId": "cd" * 8, "vally.shard": "1/2"}
    root = tracer.start_span("root", attributes={"a": 1, "b": "x"}, links=span_links([link]))
    child = tracer.start_span("child", context=trace.set_span_in_context(root))
    child.set_attributes({"vally.status": "error", "vally.score": 0.5})
    child.add_event("note", {"k": True}, timestamp=7)
    child.set_status(Status(StatusCode.ERROR, "boom"))
    grandchild = tracer.start_span(
        "grandchild", context=trace.set_span_in_context(child), start_time=1_000
    )
    grandchild.end(end_time=2_000)
    child.end()
    child.end()  # a second end writes nothing
    root.end()


def _comparable(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The spans without ids and clock times, parents named instead."""
    names = {s["spanId"]: s["name"] for s in spans}
    out = []
    for span in spans:
        item = {k: v for k, v in span.items() if k not in ("traceId", "spanId", "parentSpanId")}
        item["parent"] = names.get(span["parentSpanId"])
        if span["name"] != "grandchild":
            item.pop("startTimeUnixNano")
            item.pop("endTimeUnixNano")
        out.append(item)
    return out


def test_the_span_file_holds_what_the_sdk_spans_would(tmp_path: Path) -> None:
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    sdk_file = tmp_path / "sdk.jsonl"
    provider = TracerProvider()
    sdk_exporter = JsonLinesSpanExporter(sdk_file)
    provider.add_span_processor(SimpleSpanProcessor(sdk_exporter))
    _tree(provider.get_tracer("test"))
    provider.shutdown()

    pipeline = open_pipeline(tmp_path / "spans.jsonl", None, 1.0)
    assert pipeline.provider is None  # the span file needs no SDK provider
    _tree(pipeline.tracer)
    assert pipeline.close(1.0) is None

    def read(path: Path) -> list[dict[str, Any]]:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]

    ours, theirs = read(tmp_path / "spans.jsonl"), read(sdk_file)
    assert _comparable(ours) == _comparable(theirs)
    assert [s["name"] for s in ours] == ["grandchild", "child", "root"]
    assert len({s["traceId"] for s in ours}) == 1 and ours[2]["parentSpanId"] is None
    assert ours[0]["parentSpanId"] == ours[1]["spanId"]
    assert ours[1]["parentSpanId"] == ours[2]["spanId"]
    assert ours[2]["links"][0]["attributes"] == {"vally.shard": "1/2"}


def test_span_file_spans_started_as_current_nest(tmp_path: Path) -> None:
    pipeline = open_pipeline(tmp_path / "spans.jsonl", None, 1.0)
    with pipeline.tracer.start_as_current_span("outer", attributes={"k": 1}) as outer:
        with pipeline.tracer.start_as_current_span("inner"):
            pass
        assert outer.is_recording()
    assert not outer.is_recording()
    assert pipeline.close(1.0) is None
    inner, outer_line = (
        json.loads(line) for line in (tmp_path / "spans.jsonl").read_text().splitlines()
    )
    assert inner["parentSpanId"] == outer_line["spanId"]
    assert outer_line["attributes"] == {"k": 1} and outer_line["parentSpanId"] is None
