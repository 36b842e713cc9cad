"""Run ``vally`` against a scripted model server inside a private network namespace.

Reusable for any agent-CLI executor: write the eval files into a project folder, give the
replies the model server should send, and read back the records and the requests::

    run = run_agent_eval(tmp_path, {"eval.yaml": EVAL}, replies, ["eval", "-e", "eval.yaml"])
    assert run.returncode == 0, run.output
    [record] = run.records
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.agents.netns import require_namespace, run_isolated

REPO = Path(__file__).resolve().parents[2]

SCRUBBED_PREFIXES = ("OPENAI_", "COPILOT_", "GH_", "GITHUB_", "ANTHROPIC_", "CODEX_")
"""Variables removed from the test's environment so nothing of the host's agent setup
reaches the run."""


def reply(
    content: str | None = None,
    calls: Sequence[tuple[str, str, Mapping[str, Any]]] = (),
    *,
    prompt_tokens: int = 10,
    completion_tokens: int = 5,
) -> dict[str, Any]:
    """A scripted completion: text and ``(call id, tool name, arguments)`` tool calls."""
    return {
        "content": content,
        "tool_calls": [{"id": i, "name": n, "arguments": dict(a)} for i, n, a in calls],
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
    }


@dataclass
class AgentRun:
    """What a run left: exit code, output, the records and the server's requests."""

    returncode: int
    output: str
    project: Path
    received: list[dict[str, Any]] = field(default_factory=list)

    @property
    def records(self) -> list[dict[str, Any]]:
        """Every line of every ``results.jsonl`` under the project."""
        lines: list[dict[str, Any]] = []
        for results in sorted(self.project.glob("**/results.jsonl")):
            lines += [json.loads(x) for x in results.read_text().splitlines() if x.strip()]
        return lines

    def trial_file(self, name: str) -> Path:
        """The one file called ``name`` in the run's trial folders."""
        [path] = list(self.project.glob(f"**/{name}"))
        return path


def run_agent_eval(
    tmp_path: Path,
    files: Mapping[str, str],
    replies: Sequence[Mapping[str, Any]],
    vally_args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = 300,
) -> AgentRun:
    """Write ``files`` into a project folder, start the scripted server with ``replies``
    inside a private network namespace and run ``vally *vally_args`` there."""
    require_namespace()
    project = tmp_path / "project"
    project.mkdir()
    for name, text in files.items():
        path = project / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    scenario = tmp_path / "scenario.json"
    received = tmp_path / "received.json"
    scenario.write_text(
        json.dumps({"replies": list(replies), "project": str(project), "received": str(received)})
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith(SCRUBBED_PREFIXES)}
    base["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), base.get("PYTHONPATH")]))
    proc = run_isolated(
        [sys.executable, "-m", "tests.agents.driver", str(scenario), "--", *vally_args],
        cwd=REPO,
        env={**base, **(env or {})},
        timeout=timeout,
    )
    run = AgentRun(proc.returncode, proc.stdout + proc.stderr, project)
    if received.exists():
        run.received = json.loads(received.read_text())
    return run
