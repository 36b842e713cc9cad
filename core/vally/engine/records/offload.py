"""Keeping trial records small: texts too long to keep inline live in the trial's folder.

An agent can print hundreds of megabytes; copied into ``results.jsonl`` (its output, and
again in its last message event) that makes lines no reader can hold. :func:`offload_texts`
cuts every string of a record's trajectory longer than :data:`INLINE_TEXT_LIMIT` to its
start, writes the whole string to ``texts/`` in the trial's folder, and lists it in the
record's ``offloaded`` (a JSON Pointer to the cut string, the file relative to the run
folder, its length and SHA-256). Equal texts share one file. :func:`restore_texts` puts
the whole texts back, for readers that need them (``vally grade``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from vally.models.records import OffloadedText, TrialResultRecord

__all__ = ["INLINE_TEXT_LIMIT", "TEXTS_DIR", "offload_texts", "restore_texts"]

INLINE_TEXT_LIMIT = 64 * 1024
"""Characters of one text kept inline in a trial record."""

TEXTS_DIR = "texts"
"""Folder of a trial's folder holding its offloaded texts."""


def escape_token(token: str) -> str:
    """``token`` as one JSON-pointer token (``~`` and ``/`` escaped)."""
    return token.replace("~", "~0").replace("/", "~1")


def unescape_token(token: str) -> str:
    """The text of one JSON-pointer token."""
    return token.replace("~1", "/").replace("~0", "~")


def _long_strings(value: Any, pointer: str) -> Iterable[tuple[str, Any, Any, str]]:
    """(pointer, container, key, text) of each string longer than the limit."""
    items: Iterable[tuple[Any, Any]]
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return
    for key, child in items:
        where = f"{pointer}/{escape_token(str(key))}"
        if isinstance(child, str):
            if len(child) > INLINE_TEXT_LIMIT:
                yield where, value, key, child
        else:
            yield from _long_strings(child, where)


def offload_texts(record: TrialResultRecord, trial_dir: Path, run_dir: Path) -> TrialResultRecord:
    """``record`` with each over-long text of its trajectory moved to a file of
    ``trial_dir`` (see the module docs); ``record`` itself when nothing is too long.

    Raises:
        OSError: A text file cannot be written.
    """
    if record.trajectory is None or not _any_long(record):
        return record
    data = record.to_json_dict()
    folder = trial_dir / TEXTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    written: dict[str, str] = {}
    offloaded: list[OffloadedText] = []
    for pointer, container, key, text in list(_long_strings(data["trajectory"], "/trajectory")):
        raw = text.encode("utf-8")
        digest = hashlib.sha256(raw).hexdigest()
        if digest not in written:
            file = folder / f"{digest[:16]}.txt"
            file.write_bytes(raw)
            written[digest] = file.relative_to(run_dir).as_posix()
        container[key] = text[:INLINE_TEXT_LIMIT]
        offloaded.append(
            OffloadedText(pointer=pointer, path=written[digest], chars=len(text), sha256=digest)
        )
    data["offloaded"] = [entry.to_json_dict() for entry in [*record.offloaded, *offloaded]]
    return TrialResultRecord.model_validate(data)


def _any_long(record: TrialResultRecord) -> bool:
    """A cheap look for over-long texts where they occur (output, events, diff) before
    serialising the whole record. A record whose whole line is within the limit holds no
    longer text (each text is in the line, escaped, so no shorter): a trial's record has
    that line already (:meth:`TrialResultRecord.writable` kept it)."""
    trajectory = record.trajectory
    if trajectory is None:
        return False
    if len(record.to_json_line()) <= INLINE_TEXT_LIMIT:
        return False
    if len(trajectory.output) > INLINE_TEXT_LIMIT or len(trajectory.diff or "") > INLINE_TEXT_LIMIT:
        return True
    return (
        any(len(event.model_dump_json()) > INLINE_TEXT_LIMIT for event in trajectory.events)
        or len(trajectory.metadata.model_dump_json()) > INLINE_TEXT_LIMIT
    )


def restore_texts(
    record: TrialResultRecord,
    folders: Iterable[Path],
    warn: Callable[[str], None] | None = None,
) -> TrialResultRecord:
    """``record`` with its offloaded texts put back whole, read from the first of
    ``folders`` (candidate run folders) holding each file with the right SHA-256. A text
    whose file is not found stays cut, with a warning to ``warn``."""
    if not record.offloaded:
        return record
    data = record.to_json_dict()
    missing: list[OffloadedText] = []
    kept: list[OffloadedText] = []
    for entry in record.offloaded:
        text = _read_text(entry, folders)
        if text is None or not _put(data, entry.pointer, text):
            missing.append(entry)
            kept.append(entry)
    if missing and warn is not None:
        warn(
            f"trial {record.trial_id}: {len(missing)} text(s) cut at {INLINE_TEXT_LIMIT:,} "
            f"characters were not found whole (e.g. {missing[0].path}); graders see them "
            "cut. Run vally grade from the run folder, or with results.jsonl as its input file"
        )
    data["offloaded"] = [entry.to_json_dict() for entry in kept]
    return TrialResultRecord.model_validate(data)


def _read_text(entry: OffloadedText, folders: Iterable[Path]) -> str | None:
    for folder in folders:
        file = folder / entry.path
        try:
            raw = file.read_bytes()
        except OSError:
            continue
        if hashlib.sha256(raw).hexdigest() == entry.sha256:
            return raw.decode("utf-8", errors="replace")
    return None


def _put(data: Any, pointer: str, text: str) -> bool:
    """Set the string at ``pointer`` (RFC 6901) of ``data``; False when it is not there."""
    tokens = [unescape_token(t) for t in pointer.split("/")[1:]]
    node = data
    try:
        for token in tokens[:-1]:
            node = node[int(token)] if isinstance(node, list) else node[token]
        last = tokens[-1]
        if isinstance(node, list):
            node[int(last)] = text
        elif isinstance(node, dict) and last in node:
            node[last] = text
        else:
            return False
    except (KeyError, IndexError, ValueError, TypeError):
        return False
    return True
