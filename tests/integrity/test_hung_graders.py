"""Grader code cannot freeze the run: a slow regular expression or a grader that never
returns errors that grader only, while other trials' timeouts and Ctrl-C keep working
(issue 17, case 5)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.integrity.conftest import VALLY, agent_script, read_records, vally, write_eval
from vally.engine.trials import isolation
from vally_builtin import graders
from vally_builtin.graders import compile_pattern

HUNG_GRADER = '''
import time
from typing import ClassVar

from vally import BaseGrader, GraderMetadata, StrictConfig


class Hangs(BaseGrader[StrictConfig]):
    """Never returns, and never yields to the event loop."""

    metadata: ClassVar[GraderMetadata] = GraderMetadata(name="hangs", description="hangs")
    Config = StrictConfig

    async def grade(self, context):
        (context.spec_dir / "grader-started").touch()
        while True:
            time.sleep(0.05)


def register(registrar):
    registrar.grader(Hangs)
'''


def _slow_and_sleepy_eval(project: Path) -> None:
    agent = _agent(project)
    write_eval(
        project,
        f"""
        name: e
        defaults:
          timeout: 2s
          executor: {{name: command, config: {{command: [sh, "{agent}", "{{prompt}}"]}}}}
        stimuli:
          - name: backtracks
            prompt: text
            graders: [{{type: output-matches, config: {{pattern: '^(\\w+\\s?)+$'}}}}]
          - name: sleeps
            prompt: sleep
        """,
    )


def _agent(project: Path) -> Path:
    """Sleeps past any timeout when the prompt is ``sleep``; else prints a line that an
    exponential pattern backtracks on."""
    return agent_script(
        project,
        """
        case "$1" in
          sleep) sleep 60 ;;
          *) printf 'a%.0s' $(seq 1 40); echo '!' ;;
        esac
        """,
    )


def test_an_exponential_regex_does_not_freeze_the_run(project: Path) -> None:
    _slow_and_sleepy_eval(project)
    out = project / "out"
    started = time.monotonic()
    done = vally(
        "eval",
        "-e",
        "evals/eval.yaml",
        "--output-dir",
        out,
        "--workers",
        "2",
        cwd=project,
        timeout=120,
    )
    assert time.monotonic() - started < 60
    records = {r["stimulusName"]: r for r in read_records(done.run_dir(out) / "results.jsonl")}
    backtracks = records["backtracks"]["gradeResult"]
    assert backtracks["passed"] is False and not backtracks["errored"]
    assert records["sleeps"]["status"] == "error"
    assert records["sleeps"]["error"]["code"] == "VALLY_TIMEOUT"


def test_a_regex_search_past_its_time_bound_errors_the_grader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(graders, "REGEX_TIMEOUT", 0.2)
    pattern = compile_pattern(r"^(\w+\s?)+$")
    started = time.monotonic()
    with pytest.raises(Exception) as caught:
        pattern.search("a" * 200_000 + "!")
    assert time.monotonic() - started < 5
    assert "took longer than 0.2s" in str(caught.value)
    assert type(caught.value).__name__ == "GradingError"


def _hung_grader_eval(project: Path) -> None:
    (project / "hangs.py").write_text(HUNG_GRADER, encoding="utf-8")
    agent = _agent(project)
    write_eval(
        project,
        f"""
        name: e
        defaults:
          timeout: 3s
          executor: {{name: command, config: {{command: [sh, "{agent}", "{{prompt}}"]}}}}
        stimuli:
          - name: hung
            prompt: text
            graders:
              - {{type: hangs, timeout: 4s}}
              - {{type: output-contains, config: {{substring: aaa}}}}
          - name: sleeps
            prompt: sleep
          - name: fine
            prompt: text
            graders: [{{type: output-contains, config: {{substring: aaa}}}}]
        """,
    )


def test_a_hung_grader_errors_only_itself(project: Path) -> None:
    _hung_grader_eval(project)
    out = project / "out"
    done = vally(
        "eval",
        "-e",
        "evals/eval.yaml",
        "--grader-plugin",
        "hangs.py",
        "--output-dir",
        out,
        "--workers",
        "3",
        cwd=project,
        timeout=120,
    )
    records = {r["stimulusName"]: r for r in read_records(done.run_dir(out) / "results.jsonl")}
    hung = records["hung"]["gradeResult"]["details"]
    assert hung[0]["status"] == "error"
    assert "did not finish within 4s" in hung[0]["evidence"]
    assert hung[1]["status"] == "success" and hung[1]["passed"] is True
    assert records["hung"]["status"] == "error"
    assert records["sleeps"]["error"]["code"] == "VALLY_TIMEOUT"
    assert records["fine"]["status"] == "success"
    assert done.code == 1


def test_ctrl_c_stops_a_run_whose_grader_hangs(project: Path) -> None:
    (project / "hangs.py").write_text(HUNG_GRADER, encoding="utf-8")
    quick = agent_script(project, "echo ok\n", "quick.sh")
    write_eval(
        project,
        f"""
        name: e
        defaults:
          executor: {{name: command, config: {{command: [sh, "{quick}"]}}}}
        stimuli:
          - name: hung
            prompt: hi
            graders: [{{type: hangs}}]
        """,
    )
    out = project / "out"
    env = {**os.environ, "NO_COLOR": "1"}
    proc = subprocess.Popen(
        [
            *VALLY,
            "eval",
            "-e",
            "evals/eval.yaml",
            "--grader-plugin",
            "hangs.py",
            "--output-dir",
            str(out),
        ],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        # Wait until the grader runs (it leaves a file next to the eval file).
        started = project / "evals" / "grader-started"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not started.exists():
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        assert started.exists()
        proc.send_signal(signal.SIGINT)
        _stdout, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert b"Traceback" not in stderr
    records = read_records(next(out.iterdir()) / "results.jsonl")
    assert [r["status"] for r in records] == ["cancelled"]


def test_isolated_code_reaches_objects_of_the_run_loop_through_a_bridge() -> None:
    class Owned:
        def __init__(self) -> None:
            self.loop: asyncio.AbstractEventLoop | None = None

        async def where(self) -> int:
            self.loop = asyncio.get_running_loop()
            return threading_ident()

    def threading_ident() -> int:
        import threading

        return threading.get_ident()

    async def main() -> tuple[int, int, bool]:
        owned = Owned()

        async def inside(home: asyncio.AbstractEventLoop) -> tuple[int, int]:
            return threading_ident(), await isolation.bridge(owned, home).where()

        thread, served = await isolation.run_isolated(inside, timeout=10)
        return thread, served, owned.loop is asyncio.get_running_loop()

    import threading

    thread, served, same_loop = asyncio.run(main())
    assert thread != threading.get_ident()
    assert served == threading.get_ident() and same_loop


def test_isolated_calls_one_after_another_reuse_one_thread_but_not_a_stuck_one() -> None:
    import threading

    gate = threading.Event()

    async def where(home: asyncio.AbstractEventLoop) -> threading.Thread:
        return threading.current_thread()

    async def stuck(home: asyncio.AbstractEventLoop) -> None:
        gate.wait(30)  # blocks its loop: cancelling cannot reach it

    async def main() -> tuple[list[threading.Thread], threading.Thread]:
        name = "vally-test-reuse"
        first = [await isolation.run_isolated(where, timeout=10, name=name) for _ in range(3)]
        with pytest.raises(isolation.IsolatedTimeout):
            await isolation.run_isolated(stuck, timeout=0.2, name=name)
        after = await isolation.run_isolated(where, timeout=10, name=name)
        gate.set()
        return first, after

    first, after = asyncio.run(main())
    assert first[0] is first[1] is first[2]  # no new thread per call
    assert after is not first[0]  # the stuck one was not lent out again
