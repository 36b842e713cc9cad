"""Tracing is off unless asked for: ``vally eval`` writes no span file by default, and
``--trace`` or ``.vally.yaml`` ``plugins.reporter: [otel]`` turn it on."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import run_vally, write_spec

SPEC = """
name: demo
defaults:
  executor: {name: mock, config: {output: "hello"}}
graders:
  - {type: output-contains, config: {substring: hello}}
stimuli:
  - {name: one, prompt: a}
"""


def _spans(run_dir: Path) -> list[dict[str, object]]:
    text = (run_dir / "otel-spans.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def test_a_run_writes_no_spans_by_default(project: Path) -> None:
    run = run_vally(["-e", str(write_spec(project / "evals" / "demo", SPEC))], project)
    assert run.code == 0, run.stderr
    assert (run.run_dir / "results.jsonl").is_file()
    assert not (run.run_dir / "otel-spans.jsonl").exists()
    assert not (run.run_dir / "otel-context.json").exists()


def test_trace_writes_the_spans_and_their_context(project: Path) -> None:
    spec = write_spec(project / "evals" / "demo", SPEC)
    run = run_vally(["-e", str(spec), "--trace"], project)
    assert run.code == 0, run.stderr
    context = json.loads((run.run_dir / "otel-context.json").read_text(encoding="utf-8"))
    root = next(s for s in _spans(run.run_dir) if s["name"] == "vally.eval")
    assert root["spanId"] == context["spanId"]


def test_the_project_file_can_turn_tracing_on(project: Path) -> None:
    (project / ".vally.yaml").write_text(
        "paths: {evals: [evals]}\nplugins: {reporter: [otel]}\n", encoding="utf-8"
    )
    run = run_vally(["-e", str(write_spec(project / "evals" / "demo", SPEC))], project)
    assert run.code == 0, run.stderr
    assert any(s["name"] == "vally.trial" for s in _spans(run.run_dir))
