"""A tiny deterministic question-answering "agent" in three versions, for the deciding example.

Usage: ``python3 agent.py VERSION`` with the question on standard input, where VERSION is

* ``baseline``: answers sums, products, quotients, capitals and letter counts, in a chatty
  sentence; it knows few capitals and no percentages;
* ``candidate``: answers in a word, knows more capitals and handles percentages, but drops
  the decimals of a quotient (7 / 2 gives 3): the regression the example is about;
* ``fixed``: the candidate with the quotient put right.

It prints its work as vally JSONL events (token usage and the final message) on standard
output. No model, no network: the same question and version always give the same answer.
It takes a little time per word it says, so shorter answers also come back sooner.
"""

from __future__ import annotations

import json
import re
import sys
import time

VERSIONS = ("baseline", "candidate", "fixed")
CAPITALS = {"france": "Paris", "italy": "Rome", "japan": "Tokyo", "spain": "Madrid"}
MORE_CAPITALS = {"kenya": "Nairobi", "peru": "Lima", "canada": "Ottawa"}


def emit(kind: str, **data: object) -> None:
    print(json.dumps({"type": kind, "data": data}), flush=True)


def number(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:g}"


def answer(question: str, version: str) -> tuple[str, str]:
    """The short answer and the baseline's sentence around it."""
    terse = version != "baseline"
    percent = re.search(r"(\d+(?:\.\d+)?)\s*%\s*of\s*(\d+(?:\.\d+)?)", question)
    if percent:
        if not terse:
            return "I do not know.", "I am sorry, I do not know how to answer that question."
        value = float(percent.group(1)) * float(percent.group(2)) / 100
        return number(value), ""
    sums = re.search(r"(-?\d+)\s*([-+*/])\s*(-?\d+)", question)
    if sums:
        a, op, b = int(sums.group(1)), sums.group(2), int(sums.group(3))
        if op == "/" and version == "candidate":
            value: float = a // b  # the candidate's bug: integer division
        else:
            value = {"+": a + b, "-": a - b, "*": a * b, "/": a / b}[op]
        return number(value), f"Let me work it out: {a} {op} {b} = {number(value)}."
    capital = re.search(r"capital of (\w+)", question, flags=re.IGNORECASE)
    if capital:
        country = capital.group(1).lower()
        known = {**CAPITALS, **MORE_CAPITALS} if terse else CAPITALS
        city = known.get(country)
        if city is None:
            return "I do not know.", f"I am sorry, I do not know the capital of {capital.group(1)}."
        return city, f"The capital of {capital.group(1)} is {city}, as far as I know."
    letters = re.search(r"letters (?:are )?in (?:the word )?'?(\w+)'?", question)
    if letters:
        word = letters.group(1)
        return str(len(word)), f"'{word}' has {len(word)} letters."
    return "I do not know.", "I am sorry, I do not know how to answer that question."


def main() -> int:
    version = sys.argv[1] if len(sys.argv) > 1 else "baseline"
    if version not in VERSIONS:
        print(f"unknown version {version!r}; use one of {', '.join(VERSIONS)}", file=sys.stderr)
        return 2
    question = sys.stdin.read().strip()
    short, sentence = answer(question, version)
    reply = short if version != "baseline" else sentence or short
    time.sleep(0.2 + 0.04 * len(reply.split()))
    emit(
        "token_usage",
        inputTokens=len(question.split()) * 4,
        outputTokens=len(reply.split()) * 4,
        model=f"demo-{version}",
    )
    emit("assistant_message", content=reply)
    return 0


if __name__ == "__main__":
    sys.exit(main())
