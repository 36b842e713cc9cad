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
