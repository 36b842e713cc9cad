"""Evidence a judge may read: one folder per run holding ``output.md``, ``timeline.jsonl``
and ``metrics.json``, read through read-only tools confined to the evidence root with a
read budget per pass."""

from __future__ import annotations

import hashlib
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


TIMES = frozenset({"timestamp", "wallTimeMs"})
"""Keys of the evidence's JSON objects that say when, not what: left out of its digest."""


def _timeless(name: str, content: bytes) -> bytes:
    """``content`` of a ``.json`` or ``.jsonl`` evidence file without the :data:`TIMES` keys
    of its objects (as canonical JSON); any other file, or one that does not parse, as it is."""
    if not name.endswith((".json", ".jsonl")):
        return content
    try:
        text = content.decode("utf-8")
        if name.endswith(".json"):
            documents = [json.loads(text)]
        else:
            documents = [json.loads(line) for line in text.splitlines() if line.strip()]
    except (UnicodeDecodeError, ValueError, RecursionError):
        return content
    kept = [
        {k: v for k, v in doc.items() if k not in TIMES} if isinstance(doc, dict) else doc
        for doc in documents
    ]
    return json.dumps(kept, sort_keys=True, ensure_ascii=False).encode("utf-8", "surrogatepass")


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

    def digest(self) -> str:
        """A digest of all the evidence the judge may read: every file's path and content,
        with the times left out of the JSON files (:func:`_timeless`), so that two runs that
        differ only in when they ran share a judge's answer."""
        whole = hashlib.sha256()
        for name in self.files():
            content = _timeless(name, (self.root / name).read_bytes())
            digest = hashlib.sha256(content).hexdigest()
            whole.update(f"{name}\0{digest}\n".encode("utf-8", "surrogatepass"))
        return "sha256:" + whole.hexdigest()

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
