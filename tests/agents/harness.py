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

from tests.agents.loopback import REPO, run_offline
from tests.llm.chat_server import Reply, completion, error, tool_call

__all__ = ["REPO", "SCRUBBED_PREFIXES", "AgentRun", "reply", "run_agent_eval", "scripted_reply"]

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


def scripted_reply(spec: Mapping[str, Any]) -> Reply:
    """The chat server's reply for a :func:`reply` dict, or ``{"status", "message"}`` for
    an error, or ``{"hang": seconds}`` for a reply that never comes in time."""
    if "status" in spec:
        return error(int(spec["status"]), str(spec["message"]))
    if "hang" in spec:
        late = completion("too late")
        late.delay = float(spec["hang"])
        return late
    calls = [
        tool_call(c["name"], c["arguments"], c.get("id")) for c in spec.get("tool_calls") or []
    ]
    return completion(
        spec.get("content"),
        calls or None,
        model=spec.get("model", "test-model"),
        prompt_tokens=int(spec.get("prompt_tokens", 10)),
        completion_tokens=int(spec.get("completion_tokens", 5)),
        cached_tokens=int(spec.get("cached_tokens", 0)),
    )


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
    inside a private network namespace and run ``vally *vally_args`` there
    (``__BASE_URL__`` in the project's ``.vally.yaml`` is the server's URL)."""
    project = tmp_path / "project"
    project.mkdir()
    for name, text in files.items():
        path = project / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    settings = project / ".vally.yaml"
    base = {k: v for k, v in os.environ.items() if not k.startswith(SCRUBBED_PREFIXES)}
    run = run_offline(
        "chat",
        list(replies),
        [sys.executable, "-m", "vally", *vally_args],
        env=dict(env or {}),
        folder=tmp_path,
        cwd=project,
        fill=[settings] if settings.exists() else [],
        process_env=base,
        timeout=timeout,
    )
    return AgentRun(run.returncode, run.stdout + run.stderr, project, run.requests)
