"""The attack project of the containment tests: an agent (``attack.sh``) that writes a wrong
answer and leaves a process behind (``loop.sh``) which keeps replacing the verifier with
one that always passes; the real verifier (``verify.sh``) reports whether that process
still runs. The scripts live in ``tests/fixtures/containment``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "containment"
DEADLINE = 60.0  # seconds; a failsafe for polling, never a timing assertion

ATTACKS = ["background", "nohup", "double-fork", "setsid", "setsid-double-fork", "holds-stdout"]
"""The ways ``attack.sh`` leaves its survivor behind."""

SPEC = """
name: tamper
environment:
  files: [{{src: attack.sh, dest: attack.sh}}, {{src: loop.sh, dest: loop.sh}}]
  env: {env}
defaults:
  runs: 1
  timeout: {timeout}
  executor: {{name: command, config: {{command: ["sh", "attack.sh", "{{prompt}}"]}}}}
graders:
  - type: run-command
    name: verifier
    config: {{command: "sh verify.sh", files: [{{src: verify.sh, dest: verify.sh}}]}}
stimuli:
{stimuli}
"""


def write_project(
    root: Path,
    attacks: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    timeout: str = "60s",
) -> Path:
    """Write the attack eval (one stimulus per attack) under ``root``; its path."""
    folder = root / "evals" / "tamper"
    folder.mkdir(parents=True)
    for script in ("attack.sh", "loop.sh", "verify.sh"):
        shutil.copy2(FIXTURES / script, folder / script)
    stimuli = "\n".join(f"  - {{name: {name}, prompt: {name}}}" for name in attacks)
    (folder / "eval.yaml").write_text(
        SPEC.format(env=json.dumps(env or {}), timeout=timeout, stimuli=stimuli)
    )
    (root / ".vally.yaml").write_text("paths: {evals: [evals]}\n")
    return folder / "eval.yaml"


def vally_argv(spec: Path, out: Path, *extra: str) -> list[str]:
    """The command line of ``vally eval`` for ``spec``, writing into ``out``."""
    return [
        sys.executable, "-c", "from vally.cli.app import main; main()", "eval",
        "-e", str(spec), "--output-dir", str(out), "--workers", "2", *extra,
    ]  # fmt: skip


def run_vally(
    root: Path, spec: Path, *extra: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """Run ``vally eval`` to its end; the process and the records by stimulus name."""
    out = root / "out"
    proc = subprocess.run(
        vally_argv(spec, out, *extra),
        cwd=root, capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"},
        timeout=300,
    )  # fmt: skip
    return proc, records(out)


def records(out: Path) -> dict[str, Any]:
    """The records of the only run folder under ``out``, by stimulus name."""
    runs = [p for p in out.iterdir() if p.is_dir()] if out.is_dir() else []
    if len(runs) != 1:
        return {}
    lines = (runs[0] / "results.jsonl").read_text().splitlines()
    return {r["stimulusName"]: r for r in map(json.loads, lines)}


def verifier(record: dict[str, Any]) -> dict[str, Any]:
    """The ``verifier`` grader's result of a record."""
    details = record["gradeResult"]["details"]
    return dict(next(g for g in details if g["name"] == "verifier"))


def alive(pid: int) -> bool:
    """True when ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in {"Z", "X"}


def wait_for(predicate: Callable[[], bool], what: str) -> None:
    """Poll ``predicate`` until it holds; fail after :data:`DEADLINE` seconds."""
    end = time.monotonic() + DEADLINE
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


def survivor_pids(piddir: Path) -> dict[str, int]:
    """The host pids the survivors recorded in ``piddir``, by attack."""
    return {p.stem: int(p.read_text()) for p in piddir.glob("*.pid") if p.read_text().strip()}
