"""Run inside a network namespace: bring ``lo`` up, start the scripted model server, run
``vally``, then save what the server received.

Usage (from :func:`tests.agents.harness.run_agent_eval`)::

    python -m tests.agents.driver SCENARIO.json -- eval -e eval.yaml ...

The scenario file holds ``{"replies": [...], "project": "<folder>", "received": "<file>"}``;
each reply is ``{"content": str|null, "tool_calls": [{"id", "name", "arguments"}],
"prompt_tokens": int, "completion_tokens": int, "cached_tokens": int}`` or ``{"status": int,
"message": str}`` for an error, or ``{"hang": seconds}`` for a reply that never comes in
time. ``__BASE_URL__`` in the project's ``.vally.yaml`` is replaced by the server's URL
before ``vally`` starts. The exit code is ``vally``'s.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.agents.netns import bring_loopback_up
from tests.llm.chat_server import ChatServer, Reply, completion, error, tool_call


def _reply(spec: dict[str, Any]) -> Reply:
    if "status" in spec:
        return error(int(spec["status"]), str(spec["message"]))
    if "hang" in spec:
        reply = completion("too late")
        reply.delay = float(spec["hang"])
        return reply
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


def main(argv: list[str]) -> int:
    scenario_path, rest = argv[0], argv[argv.index("--") + 1 :]
    scenario = json.loads(Path(scenario_path).read_text())
    bring_loopback_up()
    project = Path(scenario["project"])
    with ChatServer() as server:
        server.enqueue(*[_reply(r) for r in scenario["replies"]])
        settings = project / ".vally.yaml"
        if settings.exists():
            settings.write_text(settings.read_text().replace("__BASE_URL__", server.base_url))
        proc = subprocess.run([sys.executable, "-m", "vally", *rest], cwd=project, check=False)
        received = [{"path": r.path, "body": r.body} for r in server.requests]
    Path(scenario["received"]).write_text(json.dumps(received))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
