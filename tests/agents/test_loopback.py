"""The loopback-only namespace the agent CLIs run in: only ``lo``, and the scripted server
reachable on it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.agents.anthropic_server import Step, text
from tests.agents.loopback import run_offline

PROBE = """
import json, socket, sys, urllib.request
body = json.dumps({"model": "claude-test", "max_tokens": 5, "stream": False,
                   "messages": [{"role": "user", "content": "hi"}]}).encode()
request = urllib.request.Request(sys.argv[1] + "/v1/messages", data=body,
                                 headers={"content-type": "application/json"})
answer = json.load(urllib.request.urlopen(request, timeout=10))
print(json.dumps({"interfaces": [name for _, name in socket.if_nameindex()],
                  "text": answer["content"][0]["text"],
                  "output": answer["usage"]["output_tokens"]}))
"""


def test_namespace_has_only_loopback_and_reaches_the_server(tmp_path: Path) -> None:
    run = run_offline(
        "anthropic",
        [Step([text("pong")], output_tokens=7)],
        [sys.executable, "-c", PROBE, "__BASE_URL__"],
        env={},
        folder=tmp_path,
        model="claude-test",
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout)
    assert seen == {"interfaces": ["lo"], "text": "pong", "output": 7}
    assert [r["body"]["messages"][0]["content"] for r in run.requests] == ["hi"]
