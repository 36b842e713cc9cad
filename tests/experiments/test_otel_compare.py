"""OTLP/HTTP export to a real local receiver, and ``--compare`` against a local judge."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.llm.chat_server import ChatServer, completion, error
from tests.otlp_receiver import Receiver

from .conftest import EXPERIMENT, make_project, only_run_dir, read_jsonl, vally, write


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as rec:
        yield rec


def test_otlp_export_to_a_local_collector(tmp_path: Path, receiver: Receiver) -> None:
    make_project(tmp_path)
    res = vally("experiment", "run", "experiment.yaml", "--otlp-endpoint", receiver.url,
                "--output-dir", "out", cwd=tmp_path)
    assert res.code == 0, res.text
    run_dir = only_run_dir(tmp_path / "out")
    assert not (run_dir / "otel-spans.jsonl").exists()
    context = json.loads((run_dir / "otel-context.json").read_text())
    assert context["exporter"] == "otlp"
    assert set(receiver.paths) == {"/v1/traces"}
    names = [s.name for s in receiver.spans]
    assert "vally.experiment" in names and names.count("vally.trial") == 4
    root = next(s for s in receiver.spans if s.name == "vally.experiment")
    assert root.span_id.hex() == context["spanId"] and root.trace_id.hex() == context["traceId"]
    trials = [receiver.attributes(s) for s in receiver.spans if s.name == "vally.trial"]
    assert {(t["vally.variant"], t["vally.stimulus"], t["vally.verdict"]) for t in trials} == {
        ("base", "alpha", "pass"), ("base", "beta", "pass"),
        ("quiet", "alpha", "fail"), ("quiet", "beta", "fail"),
    }
    assert all(t["vally.trial"] == 0 and "vally.tokens.total" in t for t in trials)
    graders = [s for s in receiver.spans if s.name.startswith("vally.grader")]
    assert len(graders) == 4 and all(s.trace_id == root.trace_id for s in graders)

    # merge exports its own span, linked to every shard's experiment span
    shards = []
    for index in (1, 2):
        res = vally("experiment", "run", "experiment.yaml", "--shard", f"{index}/2",
                    "--run-id", "r", "--output-dir", "sh", "--trace", cwd=tmp_path)
        assert res.code == 0, res.text
        shards.append(tmp_path / "sh" / "r" / f"shard-{index}-of-2")
    receiver.spans.clear()
    res = vally("experiment", "merge", *map(str, shards), "-o", "merged",
                "--otlp-endpoint", receiver.url, cwd=tmp_path)
    assert res.code == 0, res.text
    assert not (tmp_path / "merged" / "otel-spans.jsonl").exists()
    (merge_span,) = [s for s in receiver.spans if s.name == "vally.experiment.merge"]
    linked = {link.span_id.hex() for link in merge_span.links}
    expected = {json.loads((s / "otel-context.json").read_text())["spanId"] for s in shards}
    assert linked == expected


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as chat:
        yield chat


def judged(server: ChatServer, root: Path, *args: str) -> Any:
    write(root / ".vally.yaml", "paths: {evals: [evals]}\nllm:\n  max_retries: 0\n")
    env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-test",
           "EVAL_JUDGE_MODEL": ""}
    return vally("experiment", "run", "experiment.yaml", "--output-dir", "out", *args,
                 cwd=root, env=env)


def verdict(request: Any) -> Any:
    return completion(json.dumps({"winner": "A", "magnitude": "much", "reasoning": "r"}))


def test_compare_runs_the_judge_with_the_flag_model(
    tmp_path: Path, server: ChatServer
) -> None:
    make_project(tmp_path)
    server.default = verdict
    res = judged(server, tmp_path, "--compare", "--judge-model", "judge-x")
    assert res.code == 0, res.text
    assert server.requests and all(r.model == "judge-x" for r in server.requests)
    assert "Win rate" in res.stdout
    run_dir = only_run_dir(tmp_path / "out")
    assert len(read_jsonl(run_dir / "quiet" / "results.jsonl")) == 2


def test_compare_failure_exits_1_but_keeps_results(tmp_path: Path, server: ChatServer) -> None:
    make_project(tmp_path)
    server.default = error(500, "judge down")
    res = judged(server, tmp_path, "--compare", "--judge-model", "judge-x")
    assert res.code == 1
    run_dir = only_run_dir(tmp_path / "out")
    assert len(read_jsonl(run_dir / "base" / "results.jsonl")) == 2


def test_conflicting_judge_settings(tmp_path: Path, server: ChatServer) -> None:
    make_project(tmp_path, evals=("one", "two"))
    spec = tmp_path / "evals" / "two" / "eval.yaml"
    spec.write_text(spec.read_text().replace("  runs: 1\n", "  runs: 1\n  judge_model: other\n"))
    server.default = verdict
    res = judged(server, tmp_path, "--compare")
    assert res.code == 1
    assert "judge_model differs" in res.stderr
    assert not server.requests
    assert len(read_jsonl(only_run_dir(tmp_path / "out") / "base" / "results.jsonl")) == 4
    # the flag settles the model conflict
    shutil_out = tmp_path / "out"
    import shutil

    shutil.rmtree(shutil_out)
    res = judged(server, tmp_path, "--compare", "--judge-model", "chosen")
    assert res.code == 0, res.text
    assert server.requests and {r.model for r in server.requests} == {"chosen"}


def test_compare_skipped_for_sharded_runs(tmp_path: Path, server: ChatServer) -> None:
    make_project(tmp_path, experiment=EXPERIMENT)
    res = judged(server, tmp_path, "--compare", "--shard", "1/2", "--run-id", "r")
    assert res.code == 0, res.text
    assert "Comparison skipped: sharded runs" in res.stdout
    assert not server.requests
