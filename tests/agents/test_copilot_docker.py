"""The copilot executor on the ``docker`` backend: the real CLI runs inside the trial's
container, on an internal docker network (no route out), against the scripted model server
listening on that network's gateway address."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agents.copilot_cli import copilot_cli
from tests.agents.copilot_image import build_copilot_image
from tests.agents.harness import REPO, SCRUBBED_PREFIXES
from tests.backends.docker_helpers import docker_api
from tests.llm.chat_server import ChatServer, completion, tool_call

__all__ = ["docker_api"]

pytestmark = [pytest.mark.docker, pytest.mark.slow]

EVAL = """\
name: copilot-docker
defaults:
  timeout: 120s
  model: test-model
  executor: copilot
stimuli:
  - name: write-in-the-container
    prompt: Write hello.txt.
    graders:
      - {type: file-contains, config: {path: hello.txt, value: hello from the container}}
      - {type: tool-calls, config: {required: [create]}}
"""


@pytest.fixture
def internal_network(docker_api: Any) -> Iterator[tuple[str, str]]:
    """A docker network with no route out; yields (name, gateway address on the host)."""
    name = f"vally-test-copilot-{uuid.uuid4().hex[:8]}"
    docker_api.create_network(name, driver="bridge", internal=True)
    try:
        config = docker_api.inspect_network(name)["IPAM"]["Config"][0]
        yield name, config["Gateway"]
    finally:
        docker_api.remove_network(name)


def test_the_cli_runs_inside_the_trials_container(
    docker_api: Any, internal_network: tuple[str, str], tmp_path: Path
) -> None:
    image = build_copilot_image(docker_api, copilot_cli(), tmp_path)
    network, gateway = internal_network
    project = tmp_path / "project"
    project.mkdir()
    (project / "eval.yaml").write_text(EVAL)
    with ChatServer(host=gateway) as server:
        server.enqueue(
            completion(
                None,
                [
                    tool_call(
                        "create",
                        {"path": "hello.txt", "file_text": "hello from the container\n"},
                        "c1",
                    )
                ],
                prompt_tokens=21,
                completion_tokens=4,
            ),
            completion("Wrote it.", prompt_tokens=30, completion_tokens=3),
        )
        (project / ".vally.yaml").write_text(f"llm:\n  base_url: {server.base_url}\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith(SCRUBBED_PREFIXES)}
        env["PYTHONPATH"] = str(REPO)
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "vally",
                "eval",
                "-e",
                "eval.yaml",
                "--backend",
                "docker",
                "--backend-args",
                f"image={image}",
                "--backend-args",
                f"network={network}",
                "--backend-args",
                "memory=2g",
                "--backend-args",
                "pull=never",
            ],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert len(server.requests) == 2
    [results] = list(project.glob("**/results.jsonl"))
    [record] = [json.loads(line) for line in results.read_text().splitlines()]
    assert record["gradeResult"]["passed"] is True
    events = record["trajectory"]["events"]
    [call] = [e["data"] for e in events if e["type"] == "tool_call"]
    assert (call["toolName"], call["arguments"]["path"]) == ("create", "hello.txt")
    usage = [
        (e["data"]["inputTokens"], e["data"]["outputTokens"])
        for e in events
        if e["type"] == "token_usage"
    ]
    assert usage == [(21, 4), (30, 3)]
    [raw] = list(project.glob("**/copilot-events.jsonl"))
    start = next(
        json.loads(x)
        for x in raw.read_text().splitlines()
        if json.loads(x)["type"] == "session.start"
    )
    assert start["data"]["context"]["cwd"] == "/workspace"
