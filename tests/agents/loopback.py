"""Run a command next to a scripted model server inside a network namespace that has only
the loopback interface, so an agent CLI can reach the test server and nothing else.

``run_offline`` (for tests) starts ``python -m tests.agents.loopback CASE`` under the
namespace prefix of :mod:`tests.agents.netns`. Inside, this module brings ``lo`` up, starts
the server the case names (``chat``: OpenAI Chat Completions, ``anthropic``: Messages,
``responses``: OpenAI Responses) with its scripted steps, replaces ``__BASE_URL__`` by the
server's URL in the command's arguments, its environment and the files the case lists,
runs the command, then writes the requests the server received next to the case file.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.agents.netns import bring_loopback_up, require_namespace

REPO = Path(__file__).resolve().parents[2]
PLACEHOLDER = "__BASE_URL__"


@dataclasses.dataclass
class OfflineRun:
    """The outcome of :func:`run_offline`."""

    returncode: int
    stdout: str
    stderr: str
    requests: list[dict[str, Any]]


def run_offline(
    server: str,
    steps: Sequence[Any],
    command: Sequence[str],
    *,
    env: Mapping[str, str],
    folder: Path,
    model: str = "test-model",
    cwd: Path | None = None,
    fill: Sequence[Path] = (),
    process_env: Mapping[str, str] | None = None,
    timeout: float = 300,
) -> OfflineRun:
    """Run ``command`` in a loopback-only namespace next to a scripted ``server``.

    ``steps`` are the server's steps (dataclasses, or reply dicts for ``chat``); ``env``
    is added to the command's environment (``process_env``, else this process's);
    ``__BASE_URL__`` in ``command``, ``env`` values and the ``fill`` files becomes the
    server's URL. The case and the requests are kept in ``folder``.
    """
    prefix = require_namespace()
    case = folder / "loopback-case.json"
    case.write_text(
        json.dumps(
            {
                "server": server,
                "model": model,
                "steps": [dataclasses.asdict(s) if dataclasses.is_dataclass(s) else s
                          for s in steps],
                "command": list(command),
                "env": dict(env),
                "cwd": str(cwd) if cwd is not None else None,
                "fill": [str(f) for f in fill],
            }
        )
    )
    outer = dict(process_env if process_env is not None else os.environ)
    outer["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), outer.get("PYTHONPATH")]))
    proc = subprocess.run(
        [*prefix, sys.executable, "-m", "tests.agents.loopback", str(case)],
        cwd=REPO,
        env=outer,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    seen = folder / "loopback-requests.json"
    requests = json.loads(seen.read_text()) if seen.exists() else []
    return OfflineRun(proc.returncode, proc.stdout, proc.stderr, requests)


def _server(kind: str, model: str, steps: list[dict[str, Any]]) -> Any:
    if kind == "chat":
        from tests.agents.harness import scripted_reply
        from tests.llm.chat_server import ChatServer

        chat = ChatServer()
        chat.enqueue(*[scripted_reply(s) for s in steps])
        return chat
    if kind == "anthropic":
        from tests.agents.anthropic_server import AnthropicServer, Step

        anthropic = AnthropicServer(model=model)
        anthropic.script(*(Step(**s) for s in steps))
        return anthropic
    from tests.agents.responses_server import ResponsesServer, Step as RStep

    responses = ResponsesServer(model=model)
    responses.script(*(RStep(**s) for s in steps))
    return responses


def main(case_file: str) -> int:
    """Inside the namespace: serve, run the command, save the requests; its exit code."""
    case = json.loads(Path(case_file).read_text())
    bring_loopback_up()
    server = _server(case["server"], case["model"], case["steps"])
    with server:
        url = server.base_url
        for name in case["fill"]:
            path = Path(name)
            path.write_text(path.read_text().replace(PLACEHOLDER, url))
        argv = [a.replace(PLACEHOLDER, url) for a in case["command"]]
        env = {**os.environ, **{k: v.replace(PLACEHOLDER, url) for k, v in case["env"].items()}}
        code = subprocess.run(argv, env=env, cwd=case["cwd"], check=False).returncode
        requests = [dataclasses.asdict(r) for r in server.requests]
    out = Path(case_file).with_name("loopback-requests.json")
    out.write_text(json.dumps(requests))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
