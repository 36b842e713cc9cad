"""Records always read back: a run whose stimuli use every kind of MCP server and optional
environment field is read again by every reader of records (``read_run``, ``vally grade``,
``vally compare``), and the model round trip keeps every field."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.badinput.conftest import vally
from vally import McpServerConfig, read_run

SPEC = f"""\
name: mcp-records
defaults:
  runs: 1
  executor: {{name: mock, config: {{output: "Done"}}}}
environment:
  mcpServers:
    local: {{type: stdio, command: {json.dumps(sys.executable)}, args: [server.py]}}
    remote: {{type: http, url: "http://127.0.0.1:9/mcp", headers: {{X-Team: evals}}}}
stimuli:
  - name: s1
    prompt: hello
    graders:
      - {{ type: output-contains, config: {{ substring: Done }} }}
"""


def test_a_stdio_server_written_with_every_field_reads_back() -> None:
    server = McpServerConfig(type="stdio", command="python3", args=["s.py"])
    written = server.model_dump(mode="json", by_alias=True)
    assert written["url"] is None and written["headers"] == {}  # every field is written
    assert McpServerConfig.model_validate(written) == server
    http = McpServerConfig(type="http", url="http://127.0.0.1:9/mcp")
    assert McpServerConfig.model_validate(http.model_dump(mode="json", by_alias=True)) == http


def test_a_run_with_mcp_servers_reads_back_through_every_reader(tmp_path: Path) -> None:
    (tmp_path / "eval.yaml").write_text(SPEC, encoding="utf-8")
    run = vally("eval", "-e", "eval.yaml", "--output-dir", "out", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    [folder] = list((tmp_path / "out").iterdir())
    read = read_run(folder)
    assert [r.status for r in read.records] == ["success"]
    results = folder / "results.jsonl"
    graded = vally("grade", "-e", "eval.yaml", stdin=results.read_text(), cwd=tmp_path)
    assert graded.returncode == 0, graded.stdout + graded.stderr
    assert "cannot be used with an MCP server" not in graded.stdout + graded.stderr
    compared = vally(
        "compare", "--baseline", str(folder), "--treatment", str(folder), "--no-judge", cwd=tmp_path
    )
    assert compared.returncode == 0, compared.stdout + compared.stderr
    assert "cannot be used with an MCP server" not in compared.stdout + compared.stderr
