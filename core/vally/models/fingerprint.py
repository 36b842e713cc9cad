"""Fingerprints of what a run measured: a case, and a suite of cases.

Two runs measure the same thing when they put the same tasks to their targets and grade
them the same way. A *case fingerprint* is the SHA-256 (16 hex digits) of the canonical
JSON of what a stimulus asks and how it is graded: its prompt or turns, rubric, graders
(type, name, config, turn, required), constraints, the files and setup commands of its
environment, and the eval-level graders that grade it. It leaves out what belongs to the
target under test (executor, model, skills, MCP servers, environment variables), so the
variants of an experiment and two runs of one eval against two models share it.

A *suite fingerprint* is the SHA-256 (16 hex digits) of the sorted ``(eval, stimulus,
case fingerprint)`` triples: it changes when a case is added, removed, renamed or changed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any

from vally.models.spec import GraderConfig, Stimulus

FINGERPRINT_CHARS = 16
"""Hex digits kept of each SHA-256."""


def _digest(document: Any) -> str:
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:FINGERPRINT_CHARS]


def _grader(grader: GraderConfig) -> dict[str, Any]:
    return {
        "type": grader.type,
        "name": grader.name,
        "config": grader.config,
        "turn": grader.turn,
        "required": grader.required,
    }


def case_document(stimulus: Stimulus, eval_graders: Sequence[GraderConfig] = ()) -> dict[str, Any]:
    """The part of a stimulus that its fingerprint covers, as plain JSON."""
    environment = stimulus.environment
    return {
        "prompt": stimulus.prompt,
        "turns": [turn.prompt for turn in stimulus.turns or []],
        "rubric": list(stimulus.rubric),
        "graders": [_grader(g) for g in (*eval_graders, *stimulus.graders)],
        "constraints": (
            stimulus.constraints.model_dump(mode="json") if stimulus.constraints else None
        ),
        "files": ([f.model_dump(mode="json") for f in environment.files] if environment else []),
        "commands": list(environment.commands) if environment else [],
    }


def case_fingerprint(stimulus: Stimulus, eval_graders: Sequence[GraderConfig] = ()) -> str:
    """The fingerprint of one case (see the module docstring)."""
    return _digest(case_document(stimulus, eval_graders))


def suite_fingerprint(cases: Iterable[tuple[str, str, str]]) -> str:
    """The fingerprint of a suite from its ``(eval, stimulus, case fingerprint)`` triples,
    in any order."""
    return _digest(sorted(set(cases)))
