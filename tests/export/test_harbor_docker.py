"""Harbor tasks run under vally on the real docker engine: tasks exported from vally evals
come back with the same verdicts, and a hand-written task folder (its own Dockerfile, a
verifier that reads its own files) runs as Harbor would run it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.backends.docker_helpers import BUSYBOX, busybox_image, docker_api  # noqa: F401
from tests.export.helpers import SHELL_AGENT, Finished, vally, verdicts, write_task

BINARY = (
    "name: binary\n"
    + SHELL_AGENT
    + """stimuli:
  - name: writes-greeting
    prompt: echo hello > greeting.txt
    graders:
      - {type: file-exists, config: {path: greeting.txt}}
      - {type: run-command, config: {command: [grep, -q, hello, greeting.txt]}}
  - name: wrong-greeting
    prompt: echo bye > greeting.txt
    graders:
      - {type: file-exists, config: {path: "*.txt"}}
      - {type: run-command, config: {command: "grep -q hello greeting.txt"}}
  - name: writes-nothing
    prompt: "true"
    graders:
      - {type: file-not-exists, config: {path: greeting.txt}}
      - {type: run-command, config: {command: "cat greeting.txt", expected_exit_code: 1}}
"""
)

THRESHOLD = (
    "name: threshold\n"
    + SHELL_AGENT
    + """scoring: {threshold: 0.5}
stimuli:
  - name: half-right
    prompt: echo hello > a.txt
    graders:
      - {type: file-exists, config: {path: a.txt}}
      - {type: file-exists, config: {path: b.txt}}
  - name: required-fails
    prompt: echo hello > a.txt
    graders:
      - {type: file-exists, config: {path: a.txt}}
      - {type: file-exists, required: true, config: {path: b.txt}}
"""
)

HARBOR_PROJECT = (
    "plugin_config:\n  eval_provider:\n    harbor:\n      defaults:\n"
    '        executor: {name: command, config: {command: [sh, -c, "{prompt}"]}}\n'
)

BUSYBOX_DOCKERFILE = """\
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
RUN mkdir -p /app /tmp && chmod 1777 /tmp
WORKDIR /app
"""

VERIFIER = """\
#!/bin/bash
# A Harbor verifier: compare the agent's answer with the expected one shipped in tests/.
if [ "$(cat /app/answer.txt 2>/dev/null)" = "$(cat /tests/expected.txt)" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""


PARTIAL_VERIFIER = """\
#!/bin/sh
echo '{"reward": 0.5}' > /logs/verifier/reward.json
"""


def _harbor_run(project: Path, tasks: list[Path], out: str, user: str = "0") -> Finished:
    specs: list[str] = []
    for task in tasks:
        specs += ["--eval-spec", str(task / "task.toml")]
    dockerfile = tasks[0] / "environment" / "Dockerfile"
    return vally(
        "eval", "--eval-plugin", "harbor", *specs, "--output-dir", out,
        "--backend", "docker", "--backend-args", f"dockerfile={dockerfile}",
        "--backend-args", f"user={user}", "--backend-args", "workdir=/app",
        cwd=project,
    )  # fmt: skip


@pytest.mark.docker
def test_exported_tasks_run_back_with_the_same_verdicts(
    tmp_path: Path,
    busybox_image: str,  # noqa: F811
) -> None:
    (tmp_path / "binary.yaml").write_text(BINARY, encoding="utf-8")
    (tmp_path / "threshold.yaml").write_text(THRESHOLD, encoding="utf-8")
    original = vally(
        "eval", "-e", "binary.yaml", "-e", "threshold.yaml", "--output-dir", "original",
        "--backend", "docker", "--backend-args", f"image={busybox_image}",
        "--backend-args", "pull=never", "--backend-args", "workdir=/app", cwd=tmp_path,
    )  # fmt: skip
    assert original.code == 0, original.stderr
    expected = verdicts(tmp_path / "original")
    assert expected == {
        "writes-greeting": True,
        "wrong-greeting": False,
        "writes-nothing": True,
        "half-right": True,
        "required-fails": False,
    }
    for spec in ("binary.yaml", "threshold.yaml"):
        exported = vally(
            "export", "-e", spec, "--exporter", "harbor", "--output-dir", "tasks",
            "--", f"base_image={busybox_image}", cwd=tmp_path,
        )  # fmt: skip
        assert exported.code == 0, exported.stderr
    (tmp_path / ".vally.yaml").write_text(HARBOR_PROJECT, encoding="utf-8")
    tasks = sorted((tmp_path / "tasks").iterdir())
    assert [t.name for t in tasks] == sorted(expected)
    back = _harbor_run(tmp_path, tasks, "harbor")
    assert back.code == 0, back.stderr
    assert verdicts(tmp_path / "harbor") == expected


@pytest.mark.docker
def test_a_hand_written_harbor_task_runs_with_its_own_dockerfile(
    tmp_path: Path,
    docker_api: object,  # noqa: F811
) -> None:
    if not BUSYBOX.is_file():
        pytest.skip(f"a static busybox is needed at {BUSYBOX}")
    tasks: list[Path] = []
    for name, answer, verifier in (
        ("answer-right", "42", VERIFIER),
        ("answer-wrong", "41", VERIFIER),
        ("half-credit", "42", PARTIAL_VERIFIER),
    ):
        task = write_task(
            tmp_path / "dataset",
            name,
            instruction=f"echo {answer} > answer.txt",
            test_sh=verifier,
            toml='version = "1.0"\n[verifier]\ntimeout_sec = 60\n',
        )
        (task / "tests" / "expected.txt").write_text("42\n", encoding="utf-8")
        (task / "environment" / "Dockerfile").write_text(BUSYBOX_DOCKERFILE, encoding="utf-8")
        shutil.copy2(BUSYBOX, task / "environment" / "busybox")
        tasks.append(task)
    (tmp_path / ".vally.yaml").write_text(HARBOR_PROJECT, encoding="utf-8")
    done = _harbor_run(tmp_path, tasks, "out")
    assert done.code == 0, done.stderr
    assert verdicts(tmp_path / "out") == {
        "answer-right": True,
        "answer-wrong": False,
        "half-credit": False,
    }
    rewards = {
        record["stimulusName"]: record["gradeResult"]["details"][0]["metadata"]["reward"]
        for record in map(json.loads, next((tmp_path / "out").rglob("results.jsonl")).open())
    }
    assert rewards == {"answer-right": 1.0, "answer-wrong": 0.0, "half-credit": 0.5}
    # Not root: the tests cannot be placed at /tests, and the error says what to do.
    unprivileged = _harbor_run(tmp_path, tasks[:1], "unprivileged", user="1000")
    [results] = (tmp_path / "unprivileged").rglob("results.jsonl")
    [detail] = json.loads(results.read_text(encoding="utf-8"))["gradeResult"]["details"]
    assert unprivileged.code == 1 and detail["status"] == "error", detail
    assert "user=0" in detail["evidence"], detail
