"""Evidence a judge may read: one folder per run holding ``output.md``, ``timeline.jsonl``
and ``metrics.json``, read through read-only tools confined to the evidence root with a
read budget per pass."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vally import ToolSpec, Trajectory

EVIDENCE_FILES = ("output.md", "timeline.jsonl", "metrics.json")
DEFAULT_READ_LIMIT = 16_000
"""Characters returned by one ``read_evidence`` call unless the judge asks for fewer."""
INLINE_CAP = 24_000
"""Characters of evidence per run in inline delivery."""

TOOLS = (
    ToolSpec(
        name="list_evidence",
        description="List the evidence files you may read (paths relative to the evidence root).",
        parameters={"type": "object", "properties": {}, "additionalProperties": False},
    ),
    ToolSpec(
        name="read_evidence",
        description=(
            "Read part of one evidence file. Returns at most `limit` characters starting at "
            "character `offset`, and tells whether more remains."
        ),
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "A path from list_evidence."},
                "offset": {"type": "integer", "minimum": 0, "default": 0},
                "limit": {"type": "integer", "minimum": 1, "default": DEFAULT_READ_LIMIT},
            },
            "required": ["path"],
            "additionalProperties": False,
        },
    ),
)


def write_trajectory_evidence(folder: Path, trajectory: Trajectory, status: str = "") -> None:
    """Write one run's evidence files into ``folder`` (created)."""
    folder.mkdir(parents=True, exist_ok=False)
    (folder / "output.md").write_text(trajectory.output, encoding="utf-8")
    with (folder / "timeline.jsonl").open("w", encoding="utf-8") as handle:
        for event in trajectory.events:
            handle.write(event.to_json_line() + "\n")
    metrics = trajectory.metrics.to_json_dict()
    metrics["endReason"] = trajectory.end_reason
    if status:
        metrics["status"] = status
    (folder / "metrics.json").write_text(json.dumps(metrics, indent=2), encoding="utf-8")


@dataclass
class EvidenceReader:
    """Executes the judge's read-only tools over ``root``, counting reads against a budget."""

    root: Path
    budget: int
    reads: int = 0
    listed: list[str] = field(default_factory=list)

    def files(self) -> list[str]:
        """Every regular file below the root, relative, sorted; links are not followed."""
        out = []
        for path in sorted(self.root.rglob("*")):
            if path.is_file() and not path.is_symlink():
                out.append(path.relative_to(self.root).as_posix())
        return out

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        """Run one tool call; returns (success, text for the model)."""
        if name == "list_evidence":
            return True, "\n".join(self.files())
        if name != "read_evidence":
            return False, f"unknown tool {name!r}; use list_evidence or read_evidence"
        if self.reads >= self.budget:
            return False, "read budget exhausted: give your final answer now"
        path = arguments.get("path")
        if not isinstance(path, str) or not path:
            return False, "read_evidence needs a 'path' string"
        offset = arguments.get("offset", 0)
        limit = arguments.get("limit", DEFAULT_READ_LIMIT)
        if not isinstance(offset, int) or not isinstance(limit, int) or offset < 0 or limit < 1:
            return False, "offset must be an integer >= 0 and limit an integer >= 1"
        target = (self.root / path).resolve()
        root = self.root.resolve()
        if root not in target.parents or target.is_symlink() or not target.is_file():
            return False, f"no evidence file {path!r}; call list_evidence"
        self.reads += 1
        text = target.read_text(encoding="utf-8", errors="replace")
        limit = min(limit, DEFAULT_READ_LIMIT)
        chunk = text[offset : offset + limit]
        rest = len(text) - (offset + len(chunk))
        suffix = f"\n[... {rest} more characters; read again with offset={offset + len(chunk)}]"
        return True, chunk + (suffix if rest > 0 else "")


def inline_evidence(folder: Path, cap: int = INLINE_CAP) -> str:
    """One run's evidence as text for inline delivery, capped at ``cap`` characters."""
    parts = []
    for name in EVIDENCE_FILES:
        path = folder / name
        if path.is_file():
            parts.append(f"### {name}\n{path.read_text(encoding='utf-8', errors='replace')}")
    text = "\n\n".join(parts)
    if len(text) > cap:
        text = text[:cap] + f"\n[... evidence truncated at {cap} characters]"
    return text
