"""Run a command next to a scripted model server inside a network namespace that has only
the loopback interface, so an agent CLI can reach the test server and nothing else.

``run_offline`` (for tests) starts ``python -m tests.agents.loopback`` under
``unshare -n`` (``unshare -rn`` when not root). Inside, this module brings ``lo`` up, starts
the server named by the case file (``anthropic`` or ``responses``) with its scripted steps,
runs the command with ``{base_url}`` replaced in its arguments and environment, then writes
the requests the server received next to the case file.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.agents.netns import bring_loopback_up

REPO = Path(__file__).resolve().parents[2]


@dataclasses.dataclass
class OfflineRun:
    """The outcome of :func:`run_offline`."""

    returncode: int
    stdout: str
    stderr: str
    requests: list[dict[str, Any]]


def namespace_prefix() -> list[str] | None:
    """The ``unshare`` argv that gives a private network namespace, or None when this
    machine cannot make one."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    argv = [unshare, "-n"] if os.geteuid() == 0 else [unshare, "-rn"]
    probe = subprocess.run([*argv, "true"], capture_output=True, check=False)
    return argv if probe.returncode == 0 else None


def run_offline(
    server: str,
    steps: list[Any],
    command: list[str],
    *,
    env: dict[str, str],
    folder: Path,
    model: str,
    timeout: float = 300,
) -> OfflineRun:
    """Run ``command`` in a loopback-only namespace next to a scripted ``server``.

    ``steps`` are the server's dataclass steps; ``{base_url}`` in ``command`` and ``env``
    values becomes the server's URL.
    """
    prefix = namespace_prefix()
    assert prefix is not None, "no network namespace available"
    case = folder / "loopback-case.json"
    case.write_text(
        json.dumps(
            {
                "server": server,
                "model": model,
                "steps": [dataclasses.asdict(s) for s in steps],
                "command": command,
                "env": env,
            }
        )
    )
    proc = subprocess.run(
        [*prefix, sys.executable, "-m", "tests.agents.loopback", str(case)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    seen = folder / "loopback-requests.json"
    requests = json.loads(seen.read_text()) if seen.exists() else []
    return OfflineRun(proc.returncode, proc.stdout, proc.stderr, requests)


def _server(kind: str, model: str, steps: list[dict[str, Any]]) -> Any:
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
        argv = [a.replace("{base_url}", url) for a in case["command"]]
        env = {**os.environ, **{k: v.replace("{base_url}", url) for k, v in case["env"].items()}}
        code = subprocess.run(argv, env=env, check=False).returncode
        requests = [dataclasses.asdict(r) for r in server.requests]
    out = Path(case_file).with_name("loopback-requests.json")
    out.write_text(json.dumps(requests))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
