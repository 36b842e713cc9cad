"""A plugin that crashes leaves its traceback and the file:line of its own frame in the
trial's error record; ``vally --debug eval`` prints the traceback."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from .conftest import VALLY, run_vally, write_spec

BROKEN_GRADER = """\
from vally import BaseGrader, GraderMetadata


def ratio(text):
    return len(text) / 0


class RatioGrader(BaseGrader):
    metadata = GraderMetadata(name="ratio", description="Divides by zero.")

    async def grade(self, context):
        return self.result(context, passed=ratio(context.trajectory.output) > 1)


def register(registrar):
    registrar.grader(RatioGrader)
"""

SPEC = """
defaults:
  executor: {name: mock, config: {output: "hello"}}
stimuli:
  - {name: s, prompt: p, graders: [{type: ratio}]}
"""


def _setup(project: Path) -> Path:
    (project / "ratio.py").write_text(BROKEN_GRADER, encoding="utf-8")
    return write_spec(project / "evals" / "e", SPEC)


def test_the_record_keeps_the_plugin_frame_and_traceback(project: Path) -> None:
    spec = _setup(project)
    run = run_vally(["-e", str(spec), "--grader-plugin", "ratio.py"], project)
    assert run.code == 1
    where = f"{project / 'ratio.py'}:5"
    [record] = run.records()
    error = record["error"]
    assert error["phase"] == "grade" and error["code"] == "VALLY_GRADING"
    assert error["location"] == where
    assert "ZeroDivisionError: division by zero" in error["traceback"]
    assert "line 5, in ratio" in error["traceback"]
    [grader] = record["gradeResult"]["details"]
    assert grader["metadata"]["location"] == where
    assert grader["evidence"].endswith(f"raised ZeroDivisionError: division by zero (at {where})")
    assert f"(at {where})" in run.stdout
    assert "rerun with --debug for tracebacks" in run.stderr
    assert "Traceback" not in run.stderr


def test_debug_prints_the_traceback(project: Path) -> None:
    spec = _setup(project)
    proc = subprocess.run(
        [*VALLY, "--debug", "eval", "-e", str(spec), "--grader-plugin", "ratio.py", "-q"],
        cwd=project,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
        timeout=120,
    )
    assert proc.returncode == 1
    assert f"at {project / 'ratio.py'}:5:" in proc.stderr
    assert "Traceback (most recent call last):" in proc.stderr
    assert 'ratio.py", line 5, in ratio' in proc.stderr
    assert proc.stderr.rstrip().splitlines()[-1].startswith("1 trial(s) failed to run")


def test_a_crashing_executor_names_its_line(project: Path) -> None:
    (project / "boom.py").write_text(
        "import json\n"
        "from vally import BaseExecutor, ExecutorMetadata\n\n\n"
        "class Boom(BaseExecutor):\n"
        "    metadata = ExecutorMetadata(name='boom', description='Crashes.')\n\n"
        "    async def execute(self, stimulus, sandbox, options):\n"
        "        return json.loads('{')\n\n\n"
        "def register(registrar):\n"
        "    registrar.executor(Boom)\n",
        encoding="utf-8",
    )
    spec = write_spec(
        project / "evals" / "e",
        "defaults: {executor: {name: boom}}\nstimuli: [{name: s, prompt: p}]\n",
    )
    run = run_vally(["-e", str(spec), "--executor-plugin", "boom.py"], project)
    assert run.code == 1
    error = run.records()[0]["error"]
    # json raised it, but the frame reported is the executor's own line.
    assert error["location"] == f"{project / 'boom.py'}:9"
    assert "JSONDecodeError" in error["traceback"]
    assert json.loads(json.dumps(error))["code"] == "VALLY_INTERNAL"
