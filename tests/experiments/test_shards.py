"""Sharded runs and ``vally experiment merge``: layout, manifests, validation, report."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from .conftest import make_project, only_run_dir, read_jsonl, vally

RUN_ID = "3f1c6a52-0d8e-4b8e-9c1e-6f2a1b7c9d10"


@pytest.fixture
def sharded(tmp_path: Path) -> Path:
    """A project with two evals x two stimuli x two trials x two variants (16 trials)."""
    make_project(tmp_path, evals=("one", "two"), runs=2)
    return tmp_path


def run_shard(root: Path, index: int, total: int, *extra: str, run_id: str = RUN_ID) -> Path:
    res = vally("experiment", "run", "experiment.yaml", "--shard", f"{index}/{total}",
                "--run-id", run_id, "--output-dir", "out", *extra, cwd=root)
    assert res.code == 0, res.text
    assert f"partial: shard {index} of {total}" in res.stdout
    assert "Best:" not in res.stdout and "Δ vs baseline" not in res.stdout
    width = len(str(total))
    return root / "out" / run_id / f"shard-{index:0{width}d}-of-{total:0{width}d}"


def without_render_line(text: str) -> str:
    return "\n".join(ln for ln in text.splitlines() if not ln.startswith("Rendered: "))


def test_shards_merge_to_the_unsharded_report(sharded: Path) -> None:
    shards = [run_shard(sharded, i, 3, "--trace") for i in (1, 2, 3)]
    snapshots = [(s / "plan-snapshot.json").read_text() for s in shards]
    assert len(set(snapshots)) == 1
    assert str(sharded) not in snapshots[0] and "/work" not in snapshots[0]
    snapshot = json.loads(snapshots[0])
    assert {e["file"] for e in snapshot["evals"]} == {"evals/one/eval.yaml", "evals/two/eval.yaml"}
    assert len(snapshot["trials"]) == 16
    selected = []
    for index, shard in enumerate(shards, start=1):
        assert not (shard / "report.md").exists()
        assert (shard / "otel-context.json").is_file() and (shard / "otel-spans.jsonl").is_file()
        manifest = json.loads((shard / "shard-manifest.json").read_text())
        assert manifest["runId"] == RUN_ID and manifest["experiment"] == "greet"
        assert manifest["shard"] == {"index": index, "total": 3, "label": f"{index}/3"}
        assert manifest["strategy"] == "round-robin" and manifest["finished"] is True
        assert manifest["planDigest"].startswith("sha256:")
        assert manifest["completedKeys"] == manifest["selectedKeys"]
        selected += manifest["selectedKeys"]
        for variant in ("base", "quiet"):
            for record in read_jsonl(shard / variant / "results.jsonl"):
                assert record["experiment"]["shard"] == f"{index}/3"
                assert record["runId"] == RUN_ID
    assert sorted(selected) == sorted(snapshot["trials"])

    merged = vally("experiment", "merge", *(str(s) for s in shards), "-o", "merged", cwd=sharded)
    assert merged.code == 0, merged.text
    target = sharded / "merged"
    for name in ("report.md", "plan-snapshot.json", "experiment-manifest.json",
                 "otel-spans.jsonl", "otel-context.json"):
        assert (target / name).is_file(), name
    manifest = json.loads((target / "experiment-manifest.json").read_text())
    assert manifest["runId"] == RUN_ID and len(manifest["shards"]) == 3
    assert len(read_jsonl(target / "base" / "results.jsonl")) == 8
    summaries = read_jsonl(target / "quiet" / "run-summary.jsonl")
    assert [s["evalName"] for s in summaries] == ["one", "two"]
    assert all(s["trials"] == 4 and s["verdict"] == "fail" for s in summaries)
    merge_spans = read_jsonl(target / "otel-spans.jsonl")
    root = next(s for s in merge_spans if s["name"] == "vally.experiment.merge")
    shard_contexts = {json.loads((s / "otel-context.json").read_text())["spanId"] for s in shards}
    assert {link["spanId"] for link in root["links"]} == shard_contexts

    full = vally("experiment", "run", "experiment.yaml", "--run-id", RUN_ID,
                 "--output-dir", "full", cwd=sharded)
    assert full.code == 0, full.text
    unsharded = (only_run_dir(sharded / "full") / "report.md").read_text()
    assert without_render_line((target / "report.md").read_text()) == without_render_line(
        unsharded
    )

    # --require-pass gates the merged verdict (the 'quiet' variant fails)
    gated = vally("experiment", "merge", *(str(s) for s in shards), "-o", "merged2",
                  "--require-pass", cwd=sharded)
    assert gated.code == 1 and "--require-pass" in gated.stderr

    # re-running a lost shard reproduces its slice
    before = json.loads((shards[1] / "shard-manifest.json").read_text())["selectedKeys"]
    shutil.rmtree(shards[1])
    again = run_shard(sharded, 2, 3)
    assert json.loads((again / "shard-manifest.json").read_text())["selectedKeys"] == before


def test_merge_validation_errors(sharded: Path) -> None:
    s1, s2 = (run_shard(sharded, i, 2, "--shard-strategy", "by-stimulus") for i in (1, 2))

    def merge(*dirs: Path | str) -> str:
        res = vally("experiment", "merge", *(str(d) for d in dirs), "-o", "m", cwd=sharded)
        assert res.code == 1, res.text
        return res.stderr

    assert "missing shard(s): 2/2" in merge(s1)
    assert "is given twice" in merge(s1, s1, s2)
    copy = sharded / "copy-of-1"
    shutil.copytree(s1, copy)
    assert "shard 1/2 is given twice" in merge(s1, copy, s2)
    assert "no shard-manifest.json" in merge(s1, sharded / "evals")
    assert "does not exist" in merge(s1, sharded / "nope")

    other = run_shard(sharded, 2, 2, "--shard-strategy", "by-stimulus", run_id="other-run")
    assert "different runs" in merge(s1, other)

    manifest_path = s2 / "shard-manifest.json"
    original = manifest_path.read_text()
    data = json.loads(original)
    data["finished"] = False
    manifest_path.write_text(json.dumps(data))
    assert "did not finish" in merge(s1, s2)
    data["finished"] = True
    data["completedKeys"] = data["completedKeys"][:-1]
    manifest_path.write_text(json.dumps(data))
    assert "did not finish" in merge(s1, s2)
    manifest_path.write_text(original)

    snapshot_path = s2 / "plan-snapshot.json"
    snap = json.loads(snapshot_path.read_text())
    snap["baseline"] = "quiet"
    snapshot_path.write_text(json.dumps(snap))
    assert "plan snapshot" in merge(s1, s2)


def test_shard_partition_must_cover_the_plan(sharded: Path) -> None:
    s1, s2 = (run_shard(sharded, i, 2) for i in (1, 2))
    data = json.loads((s2 / "shard-manifest.json").read_text())
    dropped = data["selectedKeys"].pop()
    data["completedKeys"].remove(dropped)
    (s2 / "shard-manifest.json").write_text(json.dumps(data))
    res = vally("experiment", "merge", str(s1), str(s2), "-o", "m", cwd=sharded)
    assert res.code == 1 and "do not cover the plan" in res.stderr


def test_dry_run_with_shard_shows_the_slice(sharded: Path) -> None:
    res = vally("experiment", "run", "experiment.yaml", "--dry-run", "--shard", "2/5",
                "--run-id", RUN_ID, cwd=sharded)
    assert res.code == 0, res.text
    assert "Shard 2/5 (round-robin): 3 of 16 planned trial(s)" in res.stdout


def test_merge_reports_reconstructed_execution_errors(tmp_path: Path) -> None:
    make_project(tmp_path, experiment="""
        name: errs
        evals: [evals/*/eval.yaml]
        vary: [/defaults/executor/config]
        baseline: ok
        variants:
          ok: {}
          broken: {defaults: {executor: {config: {output: null, error: agent crashed}}}}
        """)
    shards = []
    for index in (1, 2):
        res = vally("experiment", "run", "experiment.yaml", "--shard", f"{index}/2",
                    "--run-id", "e", "--output-dir", "out", cwd=tmp_path)
        assert res.code == 1 and "failed to run" in res.stderr  # the shard's own errors
        shards.append(tmp_path / "out" / "e" / f"shard-{index}-of-2")
    merged = vally("experiment", "merge", *map(str, shards), "-o", "m", cwd=tmp_path)
    assert merged.code == 1 and "failed to run" in merged.stderr
    assert (tmp_path / "m" / "report.md").is_file()
    assert "agent crashed" in (tmp_path / "m" / "report.md").read_text()


def test_custom_strategy_module_relative_to_the_experiment(sharded: Path) -> None:
    (sharded / "strategies").mkdir()
    (sharded / "strategies" / "first.py").write_text(
        "from vally.contracts.bases import EmptyConfig, Plugin\n"
        "from vally.contracts.metadata import PluginMetadata\n\n\n"
        "class AllOnFirst(Plugin[EmptyConfig]):\n"
        "    metadata = PluginMetadata(name='all-on-first', kind='shard_strategy',\n"
        "                              description='everything on shard 1')\n\n"
        "    def select(self, keys, index, total):\n"
        "        return list(keys) if index == 1 else []\n\n\n"
        "def register(registrar):\n"
        "    registrar.shard_strategy(AllOnFirst)\n"
    )
    dirs = [run_shard(sharded, i, 2, "--shard-strategy", "strategies/first.py") for i in (1, 2)]
    manifests = [json.loads((d / "shard-manifest.json").read_text()) for d in dirs]
    assert manifests[0]["strategy"] == "all-on-first"
    assert len(manifests[0]["selectedKeys"]) == 16 and manifests[1]["selectedKeys"] == []
    merged = vally("experiment", "merge", *map(str, dirs), "-o", "m", cwd=sharded)
    assert merged.code == 0, merged.text
    assert len(read_jsonl(sharded / "m" / "quiet" / "results.jsonl")) == 8


def test_untraced_shards_merge_without_span_files(sharded: Path) -> None:
    """Tracing is off by default: neither the shards nor their merge write span files, and
    the merge still succeeds, linking nothing; asking the merge for --trace traces it."""
    shards = [run_shard(sharded, i, 2) for i in (1, 2)]
    for shard in shards:
        assert not (shard / "otel-spans.jsonl").exists()
        assert not (shard / "otel-context.json").exists()
    merged = vally("experiment", "merge", *(str(s) for s in shards), "-o", "merged", cwd=sharded)
    assert merged.code == 0, merged.text
    target = sharded / "merged"
    assert (target / "report.md").is_file()
    assert not (target / "otel-spans.jsonl").exists()
    assert not (target / "otel-context.json").exists()
    manifest = json.loads((target / "experiment-manifest.json").read_text())
    assert [shard["otelContext"] for shard in manifest["shards"]] == [None, None]

    traced = vally("experiment", "merge", *(str(s) for s in shards), "-o", "traced",
                   "--trace", cwd=sharded)
    assert traced.code == 0, traced.text
    spans = read_jsonl(sharded / "traced" / "otel-spans.jsonl")
    root = next(s for s in spans if s["name"] == "vally.experiment.merge")
    assert root["links"] == []
