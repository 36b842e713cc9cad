"""A tiny deterministic demo "agent" for the quickstart.

It reads the prompt from standard input, does what simple prompts ask (create a file, add
two numbers, list what it did), and prints its work as vally JSONL events on standard
output: a tool call and result for each file it writes, token usage, and a final assistant
message. No model, no network: the same prompt always gives the same run.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path


def emit(kind: str, **data: object) -> None:
    print(json.dumps({"type": kind, "data": data}), flush=True)


def write_file(path: str, content: str, call: int) -> None:
    call_id = f"call-{call}"
    emit(
        "tool_call",
        toolName="write_file",
        toolCallId=call_id,
        arguments={"path": path, "content": content},
    )
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content, encoding="utf-8")
    emit(
        "tool_result",
        toolName="write_file",
        toolCallId=call_id,
        success=True,
        result=f"wrote {len(content)} bytes to {path}",
    )


def main() -> int:
    prompt = sys.stdin.read().strip()
    answer = "I am a demo agent: I can create files and add numbers."
    calls = 0

    wanted = re.search(r"file (?:named|called) ([\w./-]+)", prompt)
    if wanted:
        says = re.search(r"(?:says|containing|with the text) [\"']?([^\"'.]+)", prompt)
        content = (says.group(1).strip() if says else "hello") + "\n"
        calls += 1
        write_file(wanted.group(1), content, calls)
        answer = f"Created {wanted.group(1)} containing: {content.strip()}"

    numbers = re.search(r"(-?\d+)\s*\+\s*(-?\d+)", prompt)
    if numbers:
        total = int(numbers.group(1)) + int(numbers.group(2))
        answer = f"The answer is {total}."

    emit(
        "token_usage",
        inputTokens=len(prompt.split()) * 4,
        outputTokens=len(answer.split()) * 4,
        model="demo-agent",
    )
    emit("assistant_message", content=answer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
