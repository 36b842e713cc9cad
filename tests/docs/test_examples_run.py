"""Every example of examples/ and every command block of README.md and docs/quickstart.md
runs as documented.

Commands run in a copy of the documented files (README, docs, examples, example plugins)
so their outputs never land in the checkout. Lines that install packages are skipped (the
test command installed everything already), and so is the line that runs this test suite.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.llm.chat_server import ChatServer, Received, Reply, completion, tool_call

ROOT = Path(__file__).resolve().parents[2]
DOCS_WITH_COMMANDS = ("README.md", "docs/quickstart.md")
COPIED = ("README.md", "docs", "examples", "plugins/examples")
SKIP_PATTERNS = (
    re.compile(r"^(python3? -m )?pip3? install\b"),
    re.compile(r"^python3? -m venv\b"),
    re.compile(r"^(\.|source) \S*activate$"),
    re.compile(r"^bash scripts/test\.sh\b"),
)


def bash_blocks(markdown: str) -> list[str]:
    """The bodies of the fenced ```bash blocks of a markdown text."""
    return re.findall(r"^```bash\n(.*?)^```", markdown, flags=re.DOTALL | re.MULTILINE)


def runnable_commands(block: str) -> list[str]:
    """The commands of a block, with package installs and the test-suite run dropped.

    A line of ``a && b`` keeps the parts that are not skipped.
    """
    commands: list[str] = []
    for line in block.replace("\\\n", " ").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split("&&")]
        kept = [p for p in parts if not any(s.match(p) for s in SKIP_PATTERNS)]
        if kept:
            commands.append(" && ".join(kept))
    return commands


def _copy_docs_tree(target: Path) -> Path:
    ignore = shutil.ignore_patterns(
        "__pycache__", "*.egg-info", "build", "vally-results", "vally-experiment-results"
    )
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=ignore)
        else:
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def _run(command: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command],
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1", **(env or {})},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, (
        f"documented command failed ({result.returncode}): {command}\n"
        + result.stdout[-3000:]
        + result.stderr[-3000:]
    )
    return result.stdout + result.stderr


def test_block_extraction_skips_installs_only() -> None:
    block = (
        "python3 -m venv .venv && . .venv/bin/activate\n"
        "python3 -m pip install -e . && vally eval -e x.yaml\n"
        "pip install 'vally[mcp]'\n# a comment\nbash scripts/test.sh\nvally lint a \\\n  b\n"
    )
    assert runnable_commands(block) == ["vally eval -e x.yaml", "vally lint a    b"]


def test_readme_keeps_its_set_up_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "python3 -m venv .venv && . .venv/bin/activate\n" in readme
    assert "pip install -e . && vally eval -e examples/quickstart/eval.yaml" in readme
    assert "bash scripts/test.sh" in readme


@pytest.mark.parametrize("document", DOCS_WITH_COMMANDS)
def test_documented_commands_run(document: str, tmp_path: Path) -> None:
    commands = [
        c for block in bash_blocks((ROOT / document).read_text()) for c in runnable_commands(block)
    ]
    assert commands, f"{document} has no runnable bash commands"
    tree = _copy_docs_tree(tmp_path)
    outputs = {command: _run(command, tree) for command in commands}
    if document == "docs/quickstart.md":
        # the single-file grader is loaded, and used by the eval next to it
        plugin = [out for command, out in outputs.items() if "--grader-plugin" in command]
        assert plugin and "✔ no-errors: no errors" in plugin[0], plugin
        # the streamed records are valid JSON lines
        lines = (tree / "trials.jsonl").read_text().splitlines()
        assert len(lines) == 6
        assert {json.loads(line)["type"] for line in lines} == {"trial-result"}


def _results(parent: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for results in sorted(parent.rglob("results.jsonl"))
        for line in results.read_text().splitlines()
    ]


@pytest.mark.slow
def test_deciding_example_holds_the_candidate_and_promotes_the_fix(tmp_path: Path) -> None:
    """Every command of examples/deciding/README.md runs; the candidate is held for its
    golden regression and the fixed version promoted, with the exit codes it shows."""
    tree = _copy_docs_tree(tmp_path)
    readme = (ROOT / "examples/deciding/README.md").read_text()
    outputs = []
    for command in [c for b in bash_blocks(readme) for c in runnable_commands(b)]:
        result = subprocess.run(
            ["bash", "-c", command], cwd=tree, capture_output=True, text=True, timeout=300
        )
        assert result.returncode == 0, command + result.stderr[-2000:]
        outputs.append(result.stdout)
    held, promoted = (o for o in outputs if "Promotion rules (examples/deciding/rules.yaml)" in o)
    assert "Verdict: HOLD" in held and held.rstrip().endswith("exit 1")
    assert "golden/divide" in held
    assert "Verdict: PROMOTE" in promoted and promoted.rstrip().endswith("exit 0")
    assert (tree / "vally-results/deciding/promotion.xml").read_text().count("<testcase") > 1


def test_quickstart_example(tmp_path: Path) -> None:
    tree = _copy_docs_tree(tmp_path)
    _run("vally eval -e examples/quickstart/eval.yaml --require-pass", tree)
    records = _results(tree / "vally-results")
    assert len(records) == 9
    assert all(r["gradeResult"]["passed"] for r in records)


def test_experiment_example(tmp_path: Path) -> None:
    tree = _copy_docs_tree(tmp_path)
    _run("vally experiment run examples/experiment/experiment.yaml --dry-run", tree)
    _run("vally experiment run examples/experiment/experiment.yaml --output-dir out", tree)
    records = _results(tree / "out")
    assert {r["variant"] for r in records} == {"plain", "terse"}
    assert len(records) == 8
    _run(
        "vally experiment run examples/experiment/experiment.yaml --shard 1/2 --run-id demo"
        " --output-dir shards",
        tree,
    )
    assert (tree / "shards" / "demo" / "shard-1-of-2" / "shard-manifest.json").is_file()


@pytest.mark.skipif(importlib.util.find_spec("mcp") is None, reason="needs the mcp extra")
def test_mcp_example(tmp_path: Path) -> None:
    tree = _copy_docs_tree(tmp_path)
    _run("vally eval -e examples/mcp/eval.yaml --require-pass --output-dir out", tree)
    records = _results(tree / "out")
    assert len(records) == 2 and all(r["gradeResult"]["passed"] for r in records)
    _run("vally experiment run examples/mcp/experiment.yaml --output-dir exp", tree)
    assert {r["variant"] for r in _results(tree / "exp")} == {"with-glossary", "without-glossary"}


FIB = "a, b = 0, 1\nfor _ in range(10):\n    print(a)\n    a, b = b, a + b\n"


def _scripted_agent(request: Received) -> Reply:
    """Plays a competent model for the four stimuli of examples/chat-agent/eval.yaml."""
    messages = request.messages
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    prompt = str(messages[last_user]["content"])
    step = sum(1 for m in messages[last_user:] if m["role"] == "tool")
    plans: list[tuple[str, list[tuple[str, dict[str, Any]]]]] = [
        ("hello.txt", [("write_file", {"path": "hello.txt", "content": "hello world"})]),
        (
            "fib.py",
            [
                ("write_file", {"path": "fib.py", "content": FIB}),
                ("run_command", {"command": "python3 fib.py"}),
            ],
        ),
        (
            "release notes",
            [
                ("load_skill", {"name": "release-notes"}),
                (
                    "write_file",
                    {
                        "path": "RELEASE_NOTES.md",
                        "content": "# 1.2.0\n\n- Added --json.\n- Fixed a crash on empty "
                        "input.\n\nThanks to all contributors.\n",
                    },
                ),
            ],
        ),
        ('"first"', [("write_file", {"path": "notes.txt", "content": "first\n"})]),
        ('"second"', [("write_file", {"path": "notes.txt", "content": "first\nsecond\n"})]),
    ]
    for marker, steps in plans:
        if marker in prompt:
            if step < len(steps):
                name, args = steps[step]
                return completion(None, [tool_call(name, args)], model=request.model or "m")
            return completion("Done.", model=request.model or "m")
    return completion("I do not know this task.", model=request.model or "m")


def test_chat_agent_example_against_a_local_server(tmp_path: Path) -> None:
    tree = _copy_docs_tree(tmp_path)
    with ChatServer() as server:
        server.default = _scripted_agent
        _run(
            "vally eval -e examples/chat-agent/eval.yaml --model qwen2.5-coder:7b "
            "--require-pass --output-dir out",
            tree,
            env={"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "test-key"},
        )
        models = {r.model for r in server.requests}
    assert models == {"qwen2.5-coder:7b"}
    records = _results(tree / "out")
    assert sorted(r["stimulusName"] for r in records) == [
        "run-a-script", "two-turns", "use-a-skill", "write-a-file"
    ]
    assert all(r["gradeResult"]["passed"] for r in records)
