"""``vally eval`` selection and plugin flags: suites, tags, params, skill dirs, plugin
files, reporters, backends, the default output folder, and the quickstart example."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from vally.engine.records.run_folder import name_folder

from .conftest import run_vally, write_spec

PY = sys.executable
REPO = Path(__file__).resolve().parents[2]

TAGGED = """
name: {name}
tags: {{area: {area}}}
defaults:
  executor: {{name: mock, config: {{output: "ok {{prompt}}"}}}}
stimuli:
  - {{name: p0-case, prompt: a, tags: {{priority: p0}}}}
  - {{name: p1-case, prompt: b, tags: {{priority: p1}}}}
"""


def _two_evals(project: Path) -> None:
    write_spec(project / "evals" / "auth", TAGGED.format(name="auth", area="auth"))
    write_spec(project / "evals" / "db", TAGGED.format(name="db", area="db"))


def test_tag_filter_discovers_evals(project: Path) -> None:
    _two_evals(project)
    run = run_vally(["--tag", "priority=p0"], project)
    assert run.code == 0, run.stderr
    got = sorted((r["evalName"], r["stimulusName"]) for r in run.records())
    assert got == [("auth", "p0-case"), ("db", "p0-case")]
    assert {s["evalName"] for s in run.summaries()} == {"auth", "db"}


def test_suite_with_filter_and_tag_flag(project: Path) -> None:
    _two_evals(project)
    (project / ".vally.yaml").write_text(
        textwrap.dedent(
            """
            paths: {evals: [evals]}
            suites:
              auth-only: {evals: ["evals/auth/*.yaml"]}
              fast: {filter: {priority: p0}}
            """
        )
    )
    run = run_vally(["--suite", "auth-only", "--tag", "priority=p1"], project)
    assert run.code == 0, run.stderr
    assert [(r["evalName"], r["stimulusName"]) for r in run.records()] == [("auth", "p1-case")]
    fast = run_vally(["--suite", "fast"], project, output_dir=project / "fast")
    assert fast.code == 0, fast.stderr
    assert sorted(r["evalName"] for r in fast.records()) == ["auth", "db"]
    assert {r["stimulusName"] for r in fast.records()} == {"p0-case"}
    unknown = run_vally(["--suite", "nope"], project, output_dir=project / "x")
    assert unknown.code == 1 and "unknown suite" in unknown.stderr


def test_params_reach_the_spec(project: Path) -> None:
    spec = write_spec(
        project,
        """
        defaults:
          runs: ${RUNS=1}
          executor: {name: mock, config: {output: "${GREETING=hi} {prompt}"}}
        stimuli:
          - {name: s, prompt: you}
        """,
    )
    run = run_vally(["-e", str(spec), "--param", "GREETING=howdy", "--param", "RUNS=2"], project)
    assert run.code == 0, run.stderr
    records = run.records()
    assert len(records) == 2
    assert {r["trajectory"]["output"] for r in records} == {"howdy you"}


def test_skill_dir_loads_skills_for_every_trial(project: Path) -> None:
    skill = project / "skills" / "greeter"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: greeter\ndescription: Greets.\n---\nSay hi.\n")
    spec = write_spec(
        project,
        f"""
        defaults:
          executor:
            name: command
            config: {{command: [{PY}, -c, "import os; print(sorted(os.listdir('.vally/skills')))"]}}
        stimuli:
          - name: s
            prompt: p
            graders: [{{type: output-contains, config: {{substring: greeter}}}}]
        """,
    )
    run = run_vally(["-e", str(spec), "--skill-dir", "skills"], project)
    assert run.code == 0, run.stderr
    (record,) = run.records()
    assert record["gradeResult"]["passed"], record["trajectory"]["output"]
    missing = run_vally(["-e", str(spec), "--skill-dir", "nope"], project, output_dir=project / "m")
    assert missing.code == 1 and "--skill-dir" in missing.stderr


GRADER_PLUGIN = """
from vally.engine.records.run_folder import name_folder
from vally import BaseGrader, GraderMetadata


class ShoutGrader(BaseGrader):
    metadata = GraderMetadata(name="shout", description="Output is upper case.")

    async def grade(self, context):
        text = context.trajectory.output
        return self.result(context, passed=text.isupper(), evidence=f"output: {text}")


def register(registrar):
    registrar.grader(ShoutGrader)
"""

REPORTER_PLUGIN = """
from vally import BaseReporter, PluginMetadata, hookimpl


class CountReporter(BaseReporter):
    metadata = PluginMetadata(name="count", kind="reporter", description="Counts trials.")

    def __init__(self, config=None):
        super().__init__(config)
        self.count = 0

    @hookimpl
    def vally_trial_end(self, run, record):
        self.count += 1

    @hookimpl
    def vally_run_end(self, run, outcome):
        (run.run_dir / "count.txt").write_text(f"{self.count} {len(outcome.summaries)}")


def register(registrar):
    registrar.reporter(CountReporter)
"""


def test_plugin_files_relative_to_the_spec(project: Path) -> None:
    folder = project / "evals" / "shout"
    (folder / "plugins").mkdir(parents=True)
    (folder / "plugins" / "shout.py").write_text(GRADER_PLUGIN)
    (project / "count.py").write_text(REPORTER_PLUGIN)
    spec = write_spec(
        folder,
        """
        defaults:
          executor: {name: mock, config: {output: "LOUD"}}
        stimuli:
          - {name: s, prompt: p, graders: [{type: shout}]}
        """,
    )
    run = run_vally(
        [
            "-e",
            str(spec),
            "--grader-plugin",
            "plugins/shout.py",
            "--reporter-plugin",
            "count.py",
        ],
        project,
    )
    assert run.code == 0, run.stderr
    (record,) = run.records()
    assert record["gradeResult"]["details"][0]["name"] == "shout"
    assert record["gradeResult"]["passed"] is True
    assert (run.run_dir / "count.txt").read_text() == "1 1"
    plugins = run.summaries()[0]["plugins"]
    assert any("shout.py" in json.dumps(p) for p in plugins)


def test_unknown_grader_type_fails_before_running(project: Path) -> None:
    spec = write_spec(
        project,
        """
        defaults: {executor: mock}
        stimuli:
          - {name: s, prompt: p, graders: [{type: no-such-grader}]}
        """,
    )
    run = run_vally(["-e", str(spec)], project)
    assert run.code == 1
    assert "no-such-grader" in run.stderr
    assert not run.output_dir.exists()


def test_eval_plugin_selects_a_provider(project: Path) -> None:
    spec = write_spec(project, TAGGED.format(name="prov", area="x"))
    run = run_vally(["-e", str(spec), "--eval-plugin", "yaml"], project)
    assert run.code == 0, run.stderr
    assert len(run.records()) == 2
    bad = run_vally(["--suite", "s", "--eval-plugin", "yaml"], project)
    assert bad.code == 1


def test_backend_args_reach_the_backend(project: Path) -> None:
    spec = write_spec(
        project,
        f"""
        defaults:
          executor:
            name: command
            config:
              command: [{PY}, -c, "import os; print(os.environ.get('VISIBLE_VAR', 'hidden'))"]
        stimuli:
          - {{name: s, prompt: p}}
        """,
    )
    env = {"VISIBLE_VAR": "shown"}
    plain = run_vally(["-e", str(spec)], project, env=env, output_dir=project / "a")
    assert plain.code == 0, plain.stderr
    assert plain.records()[0]["trajectory"]["output"].strip() == "hidden"
    args = ["--backend", "local", "--backend-args", "env_passthrough=PATH"]
    args += ["--backend-args", "env_passthrough=VISIBLE_VAR"]
    passed = run_vally(["-e", str(spec), *args], project, env=env, output_dir=project / "b")
    assert passed.code == 0, passed.stderr
    assert passed.records()[0]["trajectory"]["output"].strip() == "shown"
    bad = run_vally(
        ["-e", str(spec), "--backend", "local", "--backend-args", "nope=1"],
        project,
        output_dir=project / "c",
    )
    assert bad.code == 1 and "nope" in bad.stderr


def test_default_output_dir_comes_from_the_project(project: Path) -> None:
    (project / ".vally.yaml").write_text("paths: {evals: [evals], results: my-results}\n")
    spec = write_spec(project / "evals" / "x", TAGGED.format(name="x", area="x"))
    run = run_vally(["-e", str(spec), "--output-dir", str(project / "my-results")], project)
    assert run.code == 0
    # without --output-dir the project's paths.results is used, from the work dir
    other = project / "elsewhere"
    other.mkdir()
    import os
    import subprocess

    from .conftest import VALLY

    proc = subprocess.run(
        [*VALLY, "eval", "-e", str(spec), "--work-dir", str(project)],
        cwd=other,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    assert len(list((project / "my-results").glob("*/results.jsonl"))) == 2
    assert not (other / "vally-results").exists()


def test_quickstart_passes_offline(tmp_path: Path) -> None:
    run = run_vally(
        ["-e", "examples/quickstart/eval.yaml", "--require-pass"],
        REPO,
        output_dir=tmp_path / "out",
    )
    assert run.code == 0, run.stderr + run.stdout
    records = run.records()
    assert len(records) == 9
    assert all(r["gradeResult"]["passed"] for r in records)
    trial = run.run_dir / name_folder("quickstart") / name_folder("create-file")
    artifacts = trial / name_folder("default") / "trial-0" / "artifacts"
    assert (artifacts / "hello.txt").read_text() == "hello world\n"
    assert "verdict: PASS" in run.stdout
    assert "Failures" not in run.stdout


def test_project_default_backend_and_workers(project: Path) -> None:
    (project / ".vally.yaml").write_text(
        textwrap.dedent(
            """
            paths: {evals: [evals]}
            defaults:
              workers: 1
              backend: {name: local, args: {env_passthrough: [PATH, VISIBLE_VAR]}}
            """
        )
    )
    spec = write_spec(
        project / "evals" / "env",
        f"""
        defaults:
          executor:
            name: command
            config:
              command: [{PY}, -c, "import os; print(os.environ.get('VISIBLE_VAR', 'hidden'))"]
        stimuli:
          - {{name: s, prompt: p}}
        """,
    )
    run = run_vally(["-e", str(spec)], project, env={"VISIBLE_VAR": "from-project"})
    assert run.code == 0, run.stderr
    assert run.records()[0]["trajectory"]["output"].strip() == "from-project"
