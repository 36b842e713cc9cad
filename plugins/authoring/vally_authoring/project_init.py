"""``vally init``: start an eval project in a folder.

Writes a project file (``.vally.yaml``), an example eval (``evals/example/eval.yaml``)
with a small deterministic agent (``evals/example/agent.py``) that runs offline through the
``command`` executor, and a ``.gitignore`` for run results. Existing files are never
overwritten unless asked; nothing is written when one would be.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vally import ConfigError, OutputError

PROJECT_FILE = """\
# The vally project file: where evals, skills and results live, and project-wide
# defaults. Reference: docs/reference/project-file.md of vally.
paths:
  evals: [evals/]        # vally eval and vally lint find eval.yaml files below these
  skills: [skills/]      # SKILL.md folders vally lint checks
  results: vally-results # each run writes a timestamped folder here
"""

EXAMPLE_EVAL = """\
# An example eval: a small deterministic agent (agent.py, no model, no network) and
# graders that check what it did. Run it with `vally eval` from the project folder.
# Replace the executor with your agent (see docs/concepts.md of vally) and write your own
# stimuli.
name: example
description: A demo agent that writes a file and answers a sum, graded offline.

environment:
  files:
    - { src: agent.py, dest: agent.py }   # copied into every trial's fresh workspace

defaults:
  runs: 2
  timeout: 30s
  executor:
    name: command
    config:
      command: [python3, agent.py]        # the prompt arrives on standard input
      events: vally                       # stdout is a stream of vally JSONL events

stimuli:
  - name: create-file
    prompt: Create a file named hello.txt that says hello world.
    graders:
      - { type: file-contains, config: { path: hello.txt, value: hello world } }
      - { type: tool-calls, config: { required: [write_file] } }

  - name: add-numbers
    prompt: What is 2 + 3?
    graders:
      - { type: output-contains, config: { substring: "5" } }
"""

EXAMPLE_AGENT = '''\
"""A deterministic demo agent for the example eval: it reads the prompt on standard input,
creates the file a prompt asks for or adds two numbers, and prints what it did as vally
JSONL events (tool calls, token usage, its answer) on standard output."""

import json
import re
import sys
from pathlib import Path


def emit(kind, **data):
    print(json.dumps({"type": kind, "data": data}), flush=True)


def main():
    prompt = sys.stdin.read().strip()
    answer = "I can create files and add numbers."
    wanted = re.search(r"file named ([\\w./-]+) that says (.+?)\\.?$", prompt)
    if wanted:
        path, text = wanted.group(1), wanted.group(2)
        emit("tool_call", toolName="write_file", toolCallId="call-1", arguments={"path": path})
        Path(path).write_text(text + "\\n", encoding="utf-8")
        emit("tool_result", toolName="write_file", toolCallId="call-1", success=True, result="ok")
        answer = f"Created {path}."
    numbers = re.search(r"(-?\\d+)\\s*\\+\\s*(-?\\d+)", prompt)
    if numbers:
        answer = f"The answer is {int(numbers.group(1)) + int(numbers.group(2))}."
    emit("token_usage", inputTokens=len(prompt.split()), outputTokens=len(answer.split()))
    emit("assistant_message", content=answer)


if __name__ == "__main__":
    main()
'''

GITIGNORE = """\
vally-results/
.vally/schemas/
"""


@dataclass(frozen=True)
class InitResult:
    """What ``vally init`` wrote.

    Attributes:
        root: The project folder.
        written: The files written, in order.
        kept: Files that existed and were left alone (a ``.gitignore``).
    """

    root: Path
    written: list[Path]
    kept: list[Path]


def init_files(root: Path) -> dict[Path, str]:
    """The files ``vally init`` writes into ``root``, with their text."""
    example = root / "evals" / "example"
    return {
        root / ".vally.yaml": PROJECT_FILE,
        example / "eval.yaml": EXAMPLE_EVAL,
        example / "agent.py": EXAMPLE_AGENT,
    }


def init_project(root: Path, *, force: bool = False) -> InitResult:
    """Write a new project into ``root`` (created when missing).

    Raises:
        ConfigError: ``root`` is a file, or a file to write exists (without ``force``).
        OutputError: A file cannot be written.
    """
    if root.exists() and not root.is_dir():
        raise ConfigError(f"{root} is a file, not a folder", hint="pass a folder to vally init")
    files = init_files(root)
    existing = [path for path in files if path.exists()]
    if existing and not force:
        raise ConfigError(
            f"{root} already has {', '.join(str(p.relative_to(root)) for p in existing)}",
            hint="nothing was written; pass --force to overwrite, or init another folder",
        )
    gitignore = root / ".gitignore"
    todo = dict(files)
    kept = [gitignore] if gitignore.exists() else []
    if not kept:
        todo[gitignore] = GITIGNORE
    try:
        for path, text in todo.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise OutputError(f"cannot write {root}: {exc.strerror or exc}") from None
    return InitResult(root, list(todo), kept)
