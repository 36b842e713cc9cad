"""A tiny, deterministic stand-in for an agent CLI, with its own output format.

It reads the prompt from standard input (or from its arguments), does what it understands,
and prints one line per action::

    STEP tool=write_file args={"path": "hello.txt", "content": "hello world"}
    RESULT ok
    TOKENS in=42 out=7
    ANSWER I wrote hello.txt.

What it understands (case-insensitive):

- ``create a file named PATH that says TEXT`` / ``... containing TEXT``: writes the file;
- ``what is A + B``: answers with the sum;
- ``fail``: prints ``ERROR ...`` and exits 3;
- anything else: answers ``I cannot help with: <prompt>``.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

FILE_PATTERN = re.compile(
    r"create a file named (?P<path>\S+?)\s+(?:that says|containing|with)\s+(?P<text>.+?)\.?$",
    re.IGNORECASE,
)
SUM_PATTERN = re.compile(r"what is (-?\d+)\s*\+\s*(-?\d+)", re.IGNORECASE)


def respond(prompt: str, workdir: Path) -> tuple[list[str], int]:
    """The output lines for ``prompt`` and the exit code; files are written in ``workdir``."""
    prompt = prompt.strip()
    lines = [f"TOKENS in={len(prompt.split())} out=5"]
    if prompt.lower().startswith("fail"):
        return [*lines, "ERROR asked to fail"], 3
    match = FILE_PATTERN.search(prompt)
    if match:
        path, text = match["path"], match["text"].strip("\"' ")
        target = workdir / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text + "\n", encoding="utf-8")
        args = json.dumps({"path": path, "content": text})
        step = f"STEP tool=write_file args={args}"
        return [*lines, step, "RESULT ok", f"ANSWER I wrote {path}."], 0
    match = SUM_PATTERN.search(prompt)
    if match:
        total = int(match[1]) + int(match[2])
        return [*lines, f"ANSWER The answer is {total}."], 0
    return [*lines, f"ANSWER I cannot help with: {prompt}"], 0


def main(argv: list[str] | None = None) -> int:
    """Read the prompt, act in the current folder, print the protocol lines."""
    args = sys.argv[1:] if argv is None else argv
    prompt = " ".join(args) if args else sys.stdin.read()
    lines, code = respond(prompt, Path.cwd())
    for line in lines:
        print(line, flush=True)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
