"""``vally experiment run`` end to end: layout, records, report, flags and exit codes."""

from __future__ import annotations

import json
import re
from pathlib import Path

from vally.engine.records.run_folder import name_folder

from .conftest import make_project, only_run_dir, read_jsonl, vally, write


def test_layout_records_summaries_and_report(project: Path) -> None:
    res = vally("experiment", "run", "experiment.yaml", "--output-dir", "out", "--trace",
                cwd=project)
    assert res.code == 0, res.text
    run_dir = only_run_dir(project / "out")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z", run_dir.name)
    for name in ("report.md", "otel-spans.jsonl", "otel-context.json"):
        assert (run_dir / name).is_file(), name
    hashes = {}
    for variant in ("base", "quiet"):
        records = read_jsonl(run_dir / variant / "results.jsonl")
        assert sorted(r["stimulusName"] for r in records) == ["alpha", "beta"]
        for record in records:
            block = record["experiment"]
            assert block["runId"] == record["runId"]
            assert block["experiment"] == "greet"
            assert block["variant"] == variant == record["variant"]
            assert block["baseline"] == "base"
            assert block["shard"] is None
            assert re.fullmatch(r"[0-9a-f]{16}", block["evalHash"])
            assert re.fullmatch(r"[0-9a-f]{16}", block["configHash"])
            hashes[variant] = (block["evalHash"], block["configHash"])
            trial = run_dir / variant / name_folder("one") / name_folder(record["stimulusName"])
            trial = trial / name_folder("default") / "trial-0"
            assert json.loads((trial / "metadata.json").read_text())["variant"] == variant
        (summary,) = read_jsonl(run_dir / variant / "run-summary.jsonl")
        assert summary["variant"] == variant and summary["trials"] == 2
        assert summary["verdict"] == ("pass" if variant == "base" else "fail")
    assert hashes["base"][0] == hashes["quiet"][0]  # same eval
    assert hashes["base"][1] != hashes["quiet"][1]  # different resolved config
    report = (run_dir / "report.md").read_text()
    assert "# Experiment report: greet" in report
    # Every trial of quiet fails, but two stimuli cannot support a label: no test rejects.
    assert "no detectable difference (too few stimuli to detect any)" in report
    assert "No detectable difference from the baseline: quiet." in res.stdout
    assert "-100.0 pts" in res.stdout
    context = json.loads((run_dir / "otel-context.json").read_text())
    spans = read_jsonl(run_dir / "otel-spans.jsonl")
    root = [s for s in spans if s["name"] == "vally.experiment"]
    assert root and root[0]["spanId"] == context["spanId"]
    trials = [s for s in spans if s["name"] == "vally.trial"]
    assert len(trials) == 4
    assert {s["attributes"]["vally.variant"] for s in trials} == {"base", "quiet"}
    assert {s["attributes"]["vally.verdict"] for s in trials} == {"pass", "fail"}
    assert all("vally.tokens.total" in s["attributes"] for s in trials)
    assert any(s["name"].startswith("vally.grader") for s in spans)
    assert any(s["name"] == "vally.executor" for s in spans)
    variants = {s["spanId"]: s for s in spans if s["name"] == "vally.variant"}
    assert {v["attributes"]["vally.variant"] for v in variants.values()} == {"base", "quiet"}
    assert all(v["parentSpanId"] == context["spanId"] for v in variants.values())
    assert all(t["parentSpanId"] in variants for t in trials)
    assert len({s["traceId"] for s in spans}) == 1


def test_dry_run_prints_plan_and_runs_nothing(project: Path) -> None:
    res = vally("experiment", "run", "experiment.yaml", "--dry-run", "-o" if False else
                "--output-dir", "out", cwd=project)
    assert res.code == 0, res.text
    lines = res.stdout.splitlines()
    assert lines[0] == "Experiment: greet"
    assert lines[1] == "Baseline:   base"
    assert lines[2] == "Plans:      2"
    assert "── base (baseline) ──" in lines and "── quiet ──" in lines
    assert "  Eval:        one" in lines
    configs = [ln for ln in lines if ln.startswith("  Config hash: ")]
    evals = [ln for ln in lines if ln.startswith("  Eval hash:   ")]
    assert len(set(configs)) == 2 and len(set(evals)) == 1
    assert not (project / "out").exists()
    spec = project / "evals" / "one" / "eval.yaml"
    spec.write_text(spec.read_text().replace("substring: hello", "substrin: hello", 1))
    bad = vally("experiment", "run", "experiment.yaml", "--dry-run", cwd=project)
    assert bad.code == 1 and "substrin" in bad.stderr


def test_drift_outside_vary_is_a_plan_error(tmp_path: Path) -> None:
    make_project(tmp_path, experiment="""
        name: drift
        evals: [evals/*/eval.yaml]
        vary: [/defaults/model]
        baseline: a
        variants:
          a: {}
          b: {defaults: {runs: 3}}
        """)
    res = vally("experiment", "run", "experiment.yaml", "--output-dir", "out", cwd=tmp_path)
    assert res.code == 1
    assert "drift" in res.stderr and "/defaults/runs" in res.stderr and "a, b" in res.stderr
    assert not (tmp_path / "out").exists()


def test_eval_globs_and_filters(tmp_path: Path) -> None:
    make_project(tmp_path, evals=("one", "two"), experiment="""
        name: filt
        evals: [evals/*/eval.yaml, "nothing/*.yaml"]
        vary: [/defaults/executor/config/output]
        baseline: base
        variants: {base: {}, other: {}}
        """)
    res = vally("experiment", "run", "experiment.yaml", "--dry-run",
                "--eval-filter", "evals/two/*.yaml", cwd=tmp_path)
    assert res.code == 0, res.text
    assert "  Eval:        two" in res.stdout and "  Eval:        one" not in res.stdout
    stale = vally("experiment", "run", "experiment.yaml", "--dry-run",
                  "--eval-filter", "evals/two/*.yaml", "--eval-filter", "evals/TWO/*",
                  cwd=tmp_path)
    assert stale.code == 1 and "'evals/TWO/*' matches none" in stale.stderr
    write(tmp_path / "none.yaml", """
        name: none
        evals: [missing/*.yaml, also-missing.yaml]
        vary: [/defaults/model]
        baseline: a
        variants: {a: {}, b: {}}
        """)
    res = vally("experiment", "run", "none.yaml", "--dry-run", cwd=tmp_path)
    assert res.code == 1 and "match no eval file" in res.stderr


def test_flag_dependencies(project: Path) -> None:
    cases = [
        (["--shard", "1/2"], "--shard needs --run-id"),
        (["--backend-args", "a=b"], "--backend-args needs --backend"),
        (["--judge-model", "m"], "--judge-model needs --compare"),
        (["--judge-timeout", "1m"], "--judge-timeout needs --compare"),
        (["--judge-reasoning-effort", "low"], "--judge-reasoning-effort needs --compare"),
        (["--shard", "3/2", "--run-id", "r"], "between 1 and the total"),
        (["--variant", "nope"], "unknown variant 'nope'"),
        (["--otlp-endpoint", "localhost:4318"], "is not an http(s) URL"),
        (["--workers", "0"], "--workers must be at least 1"),
        (["--run-id", "a/b"], "cannot be used as a folder name"),
        (["--shard-strategy", "no-such-strategy", "--shard", "1/2", "--run-id", "r"],
         "no-such-strategy"),
    ]
    for args, message in cases:
        res = vally("experiment", "run", "experiment.yaml", "--dry-run", *args, cwd=project)
        assert res.code == 1, args
        assert message in res.stderr, (args, res.stderr)


def test_single_variant_comparison_unavailable_and_compare_skipped(project: Path) -> None:
    res = vally("experiment", "run", "experiment.yaml", "--variant", "quiet", "--compare",
                "--verbose", "--output-dir", "out", cwd=project)
    assert res.code == 0, res.text
    assert "      output: bye a" in res.stdout  # --verbose shows agent output and evidence
    assert "      ✘ " in res.stdout
    assert "Comparison unavailable: the baseline variant 'base' did not run." in res.stdout
    assert "Comparison skipped: only one variant ran" in res.stdout
    run_dir = only_run_dir(project / "out")
    assert not (run_dir / "base").exists()
    assert (run_dir / "quiet" / "results.jsonl").is_file()


def test_require_pass_gates_the_verdict(project: Path) -> None:
    res = vally("experiment", "run", "experiment.yaml", "--require-pass", "--output-dir", "out",
                cwd=project)
    assert res.code == 1 and "--require-pass" in res.stderr
    ok = vally("experiment", "run", "experiment.yaml", "--variant", "base", "--require-pass",
               "--output-dir", "out2", cwd=project)
    assert ok.code == 0, ok.text


def test_variant_folder_that_cannot_be_written_exits_1(tmp_path: Path) -> None:
    # A variant whose folder would be where the shard's plan snapshot already is: the
    # per-variant results cannot be created, a required-artifact write error.
    make_project(tmp_path, experiment="""
        name: blocked
        evals: [evals/*/eval.yaml]
        vary: [/defaults/executor/config/output]
        baseline: base
        variants: {base: {}, plan-snapshot.json: {}}
        """)
    res = vally("experiment", "run", "experiment.yaml", "--shard", "1/1", "--run-id", "r1",
                "--output-dir", "out", cwd=tmp_path)
    assert res.code == 1
    assert "cannot create the results file of variant 'plan-snapshot.json'" in res.stderr
    manifest = json.loads((tmp_path / "out/r1/shard-1-of-1/shard-manifest.json").read_text())
    assert manifest["finished"] is False


def test_named_environment_is_patched_by_variants(tmp_path: Path) -> None:
    write(tmp_path / ".vally.yaml", """
        environments:
          shared: {env: {GREETING: hello}}
        """)
    write(tmp_path / "evals/env/eval.yaml", """
        name: env
        environment: shared
        defaults:
          executor: {name: mock, config: {output: "ok"}}
        stimuli:
          - name: s
            prompt: p
            graders: [{type: output-contains, config: {substring: ok}}]
        """)
    write(tmp_path / "experiment.yaml", """
        name: env
        evals: [evals/env/eval.yaml]
        vary: [/environment/env/GREETING]
        baseline: a
        variants:
          a: {}
          b: {environment: {env: {GREETING: bye}}}
        """)
    res = vally("experiment", "run", "experiment.yaml", "--dry-run", cwd=tmp_path)
    assert res.code == 0, res.text
    configs = [ln for ln in res.stdout.splitlines() if ln.startswith("  Config hash")]
    assert len(set(configs)) == 2


def test_reporter_failure_is_a_warning(project: Path) -> None:
    write(project / "plugins" / "boom.py", """
        from vally import hookimpl
        from vally.contracts.bases import BaseReporter, EmptyConfig
        from vally.contracts.metadata import PluginMetadata


        class Boom(BaseReporter[EmptyConfig]):
            metadata = PluginMetadata(name="boom", kind="reporter", description="raises")

            @hookimpl
            def vally_trial_end(self, run, record):
                raise RuntimeError("reporter exploded")


        def register(registrar):
            registrar.reporter(Boom)
        """)
    res = vally("experiment", "run", "experiment.yaml", "--variant", "base",
                "--reporter-plugin", "plugins/boom.py", "--output-dir", "out", cwd=project)
    assert res.code == 0, res.text
    assert "reporter exploded" in res.stderr and "warning" in res.stderr
    run_dir = only_run_dir(project / "out")
    assert len(read_jsonl(run_dir / "base" / "results.jsonl")) == 2


def test_example_runs_offline(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "experiment" / "experiment.yaml"
    res = vally("experiment", "run", str(example), "--output-dir", str(tmp_path / "out"),
                cwd=tmp_path)
    assert res.code == 0, res.text
    run_dir = only_run_dir(tmp_path / "out")
    for variant in ("plain", "terse"):
        records = read_jsonl(run_dir / variant / "results.jsonl")
        assert len(records) == 4 and all(r["status"] == "success" for r in records)
    assert "Tie: every variant matches the baseline." in res.stdout


def test_workspace_backend_args_and_params(project: Path) -> None:
    spec = project / "evals" / "one" / "eval.yaml"
    spec.write_text(spec.read_text().replace('"hello {prompt}"', '"hello ${WHO}"'))
    res = vally("experiment", "run", "experiment.yaml", "--workspace", "ws", "--backend",
                "local", "--backend-args", "env_passthrough=PATH",
                "--backend-args", "env_passthrough=HOME", "--param", "WHO=param-value",
                "--workers", "1", "--output-dir", "out", cwd=project)
    assert res.code == 0, res.text
    for variant in ("base", "quiet"):  # keyed by (variant, stimulus): no collisions
        for stimulus in ("alpha", "beta"):
            folder = project / "ws" / variant / name_folder("one") / name_folder(stimulus)
            assert (folder / "trial-0").is_dir()
    run_dir = only_run_dir(project / "out")
    record = read_jsonl(run_dir / "base" / "results.jsonl")[0]
    assert "param-value" in record["trajectory"]["output"]
    bad = vally("experiment", "run", "experiment.yaml", "--backend", "local",
                "--backend-args", "nope=1", "--param", "WHO=x", "--output-dir", "out",
                cwd=project)
    assert bad.code == 1 and "nope" in bad.stderr


def test_plugins_relative_to_the_experiment_file_and_additive(tmp_path: Path) -> None:
    write(tmp_path / "plugins" / "short.py", """
        from vally import BaseGrader, GraderMetadata
        from vally.contracts.bases import EmptyConfig


        class Short(BaseGrader[EmptyConfig]):
            metadata = GraderMetadata(
                name="short-answer", description="output under 20 chars",
                determinism="static", cost_profile="free", portability="t1-universal",
            )
            Config = EmptyConfig

            async def grade(self, context):
                short = len(context.trajectory.output) < 20
                return self.result(context, passed=short, evidence="len")


        def register(registrar):
            registrar.grader(Short)
        """)
    write(tmp_path / "plugins" / "broken.py", """
        from vally.contracts.metadata import PluginMetadata
        from vally_builtin.executors.mock import MockExecutor


        class Broken(MockExecutor):
            metadata = PluginMetadata(
                name="broken-shutdown", kind="executor", description="fails to shut down"
            )

            async def shutdown(self):
                raise RuntimeError("cannot let go")


        def register(registrar):
            registrar.executor(Broken)
        """)
    write(tmp_path / ".vally.yaml", "plugins: {grader: [plugins/short.py]}\n")
    write(tmp_path / "evals/e/eval.yaml", """
        name: e
        defaults:
          executor: {name: mock, config: {output: hi}}
        stimuli:
          - name: s
            prompt: p
            graders: [{type: short-answer}]
        """)
    write(tmp_path / "exp/experiment.yaml", """
        name: plugged
        evals: [../evals/*/eval.yaml]
        vary: [/defaults/executor/config/output]
        baseline: a
        variants: {a: {}, b: {overrides: {executor: {config: {output: "a much longer answer"}}}}}
        """)
    # the same grader file named by the project and (relative to exp/) by the flag: loads once
    res = vally("experiment", "run", "exp/experiment.yaml", "--grader-plugin",
                "../plugins/short.py", "--output-dir", "out", cwd=tmp_path)
    assert res.code == 0, res.text
    run_dir = only_run_dir(tmp_path / "out")
    (a,) = read_jsonl(run_dir / "a" / "results.jsonl")
    (b,) = read_jsonl(run_dir / "b" / "results.jsonl")
    assert a["gradeResult"]["passed"] is True and b["gradeResult"]["passed"] is False

    # an executor that fails to shut down is a cleanup error: exit 1, results kept
    spec = tmp_path / "evals/e/eval.yaml"
    spec.write_text(spec.read_text().replace("name: mock", "name: broken-shutdown"))
    res = vally("experiment", "run", "exp/experiment.yaml", "--executor-plugin",
                "../plugins/broken.py", "--output-dir", "out2", cwd=tmp_path)
    assert res.code == 1
    assert "cannot let go" in res.stderr
    run_dir = only_run_dir(tmp_path / "out2")
    assert len(read_jsonl(run_dir / "a" / "results.jsonl")) == 1
    assert (run_dir / "report.md").is_file()


def test_matrix_cells_and_variant_selection(tmp_path: Path) -> None:
    make_project(tmp_path, experiment="""
        name: grid
        evals: [evals/*/eval.yaml]
        matrix:
          out:
            path: /defaults/executor/config/output
            values: {hi: "hello {prompt}", bye: "bye {prompt}"}
          runs:
            path: /defaults/runs
            values: {one: 1, two: 2}
        baseline: {out: hi, runs: one}
        """)
    res = vally("experiment", "run", "experiment.yaml", "--dry-run", cwd=tmp_path)
    assert res.code == 0, res.text
    assert "Baseline:   out=hi,runs=one" in res.stdout
    assert "── out=bye,runs=two ──" in res.stdout and "Plans:      4" in res.stdout
    res = vally("experiment", "run", "experiment.yaml", "--variant", "out=bye,runs=two",
                "--output-dir", "out", cwd=tmp_path)
    assert res.code == 0, res.text
    run_dir = only_run_dir(tmp_path / "out")
    records = read_jsonl(run_dir / "out=bye,runs=two" / "results.jsonl")
    assert len(records) == 4 and {r["variant"] for r in records} == {"out=bye,runs=two"}


def test_eval_plugin_selects_the_provider(project: Path) -> None:
    res = vally("experiment", "run", "experiment.yaml", "--dry-run", "--eval-plugin", "yaml",
                cwd=project)
    assert res.code == 0, res.text
    assert "  Eval:        one" in res.stdout
    res = vally("experiment", "run", "experiment.yaml", "--dry-run", "--eval-plugin",
                "./missing_provider.py", cwd=project)
    assert res.code == 1 and "missing_provider.py" in res.stderr


def test_stimulus_flag_selects_stimuli_of_every_variant(project: Path) -> None:
    res = vally(
        "experiment",
        "run",
        "experiment.yaml",
        "--output-dir",
        "out",
        "--stimulus",
        "al*",
        cwd=project,
    )
    assert res.code == 0, res.text
    run_dir = only_run_dir(project / "out")
    records = [r for v in ("base", "quiet") for r in read_jsonl(run_dir / v / "results.jsonl")]
    assert sorted((r["variant"], r["stimulusName"]) for r in records) == [
        ("base", "alpha"),
        ("quiet", "alpha"),
    ]
    missing = vally(
        "experiment",
        "run",
        "experiment.yaml",
        "--output-dir",
        "out2",
        "--stimulus",
        "gamma",
        cwd=project,
    )
    assert missing.code == 1
    assert "--stimulus 'gamma' matches no stimulus" in missing.stderr
    assert "alpha, beta" in missing.stderr
