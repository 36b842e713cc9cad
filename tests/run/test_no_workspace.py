"""Trials whose executor declares ``needs_workspace=False`` run without opening the backend
(no folder, no container) unless a grader, the environment, artifacts or ``--workspace``
need one; a workspace-free executor that still touches the sandbox gets a clear error."""

from __future__ import annotations

import textwrap
from pathlib import Path

from vally import EvalRequest, RunResult, run_eval

BACKEND = '''
from typing import Any

from vally import BaseBackend, EmptyConfig, PluginMetadata, SetupError, TrialContext


class RefusingBackend(BaseBackend[EmptyConfig]):
    """Refuses to open any sandbox."""

    metadata = PluginMetadata(name="refusing", kind="backend", description="Opens nothing.")
    Config = EmptyConfig

    async def open(self, trial: TrialContext) -> Any:
        raise SetupError("the backend was opened")


def register(registrar: Any) -> None:
    registrar.backend(RefusingBackend)
'''

EXECUTOR = '''
from typing import Any, ClassVar

from vally import BaseExecutor, EmptyConfig, ExecutorMetadata, Trajectory, TrajectoryRecorder


class ShellExecutor(BaseExecutor[EmptyConfig]):
    """Declares it needs no workspace, then runs a command in it anyway."""

    metadata: ClassVar[ExecutorMetadata] = ExecutorMetadata(
        name="sneaky", description="Uses what it said it would not.", needs_workspace=False
    )
    Config = EmptyConfig

    async def execute(self, stimulus: Any, sandbox: Any, options: Any) -> Trajectory:
        await sandbox.exec(["true"])
        return TrajectoryRecorder().trajectory(stimulus, output="ran")


def register(registrar: Any) -> None:
    registrar.executor(ShellExecutor)
'''


def _eval(tmp_path: Path, spec: str, backend: str, **request: object) -> RunResult:
    """Run the eval ``spec`` (YAML) on the backend plugin whose source is ``backend``."""
    (tmp_path / "backend.py").write_text(backend, encoding="utf-8")
    (tmp_path / "eval.yaml").write_text(textwrap.dedent(spec), encoding="utf-8")
    return run_eval(
        EvalRequest(
            eval_specs=[str(tmp_path / "eval.yaml")],
            output_dir=str(tmp_path / "out"),
            backend=str(tmp_path / "backend.py"),
            console=False,
            **request,  # type: ignore[arg-type]
        )
    )


def _run(tmp_path: Path, executor: str, graders: str = "", **request: object) -> list:
    spec = f"""
        name: free
        defaults: {{runs: 2, executor: {executor}}}
        stimuli:
          - name: s
            prompt: hello
            graders: [{{type: output-contains, config: {{substring: hello}}}}{graders}]
        """
    return list(_eval(tmp_path, spec, BACKEND, **request).records)


def test_a_workspace_free_trial_never_opens_the_backend(tmp_path: Path) -> None:
    records = _run(tmp_path, "{name: mock, config: {output: 'said {prompt}'}}")
    assert [(r.status, r.error) for r in records] == [("success", None)] * 2
    assert all(r.grade_result is not None and r.grade_result.passed for r in records)


def test_a_trial_whose_executor_writes_files_opens_the_backend(tmp_path: Path) -> None:
    records = _run(tmp_path, "{name: mock, config: {output: hello, files: {a.txt: x}}}")
    assert {r.status for r in records} == {"error"}
    assert all("the backend was opened" in r.error.message for r in records)


def test_a_grader_that_needs_the_workspace_opens_the_backend(tmp_path: Path) -> None:
    file_grader = ", {type: file-exists, config: {path: a.txt}}"
    records = _run(tmp_path, "{name: mock, config: {output: hello}}", file_grader)
    assert {r.status for r in records} == {"error"}
    assert all("the backend was opened" in r.error.message for r in records)


def test_an_executor_using_a_workspace_it_declared_it_needs_not_is_told_so(
    tmp_path: Path,
) -> None:
    (tmp_path / "sneaky.py").write_text(EXECUTOR, encoding="utf-8")
    records = _run(tmp_path, "sneaky", executor_plugins=[str(tmp_path / "sneaky.py")])
    assert {r.status for r in records} == {"error"}
    message = records[0].error.message
    assert "declares needs_workspace=False" in message and "run ['true']" in message
    assert "declare needs_workspace=True" in message  # the hint says what to change


COUNTING_BACKEND = '''
from pathlib import Path
from typing import Any

from vally import BaseBackend, EmptyConfig, PluginMetadata, SetupError, TrialContext


class CountingBackend(BaseBackend[EmptyConfig]):
    """Writes down how many sandboxes the run says it will open, then refuses them."""

    metadata = PluginMetadata(name="counting", kind="backend", description="Counts.")
    Config = EmptyConfig

    def expect_sandboxes(self, count: int) -> None:
        told = Path(__file__).with_name("told.txt")
        told.write_text(told.read_text() + f"{count}\\n" if told.exists() else f"{count}\\n")

    async def open(self, trial: TrialContext) -> Any:
        raise SetupError("the backend was opened")


def register(registrar: Any) -> None:
    registrar.backend(CountingBackend)
'''


def test_the_backend_is_told_once_how_many_sandboxes_the_run_will_open(tmp_path: Path) -> None:
    spec = """
        name: mixed
        defaults: {runs: 3, executor: {name: mock, config: {output: hello}}}
        stimuli:
          - name: free
            prompt: hello
            graders: [{type: output-contains, config: {substring: hello}}]
          - name: graded-on-files
            prompt: hello
            graders: [{type: file-exists, config: {path: a.txt}}]
          - name: graded-on-other-files
            prompt: hello
            graders: [{type: file-not-exists, config: {path: b.txt}}]
        """
    result = _eval(tmp_path, spec, COUNTING_BACKEND)
    opened = [r for r in result.records if r.status == "error"]
    assert len(opened) == 6 and all("the backend was opened" in r.error.message for r in opened)
    assert (tmp_path / "told.txt").read_text() == "6\n"  # 3 stimuli x 3 runs, 3 need none


def test_a_backend_failing_to_take_the_hint_still_runs_the_trials(tmp_path: Path) -> None:
    told = "        told = Path(__file__)"
    failing = COUNTING_BACKEND.replace(told, "        raise RuntimeError('no')\n" + told)
    spec = """
        name: hint
        defaults: {runs: 2, executor: {name: mock, config: {output: hi}}}
        stimuli: [{name: s, prompt: hi, graders: [{type: file-exists, config: {path: a}}]}]
        """
    result = _eval(tmp_path, spec, failing)
    assert result.error is None and not result.cancelled
    assert [r.error.message for r in result.records] == ["the backend was opened"] * 2
