"""The run directory: where one ``vally eval`` (or experiment) run writes its files, and the
secret scrubbing applied to everything written there.

Layout of one run::

    <output-dir>/<timestamp like 2026-06-09T20-41-10-885Z>/
      results.jsonl            one TrialResultRecord per finished trial (jsonl reporter)
      run-summary.jsonl        one RunSummaryRecord per eval (and variant)
      report.md                markdown report (markdown reporter)
      junit.xml                with --junit
      run-plan.json            the run id and a fingerprint per planned trial (for --resume)
      results.superseded.jsonl lines a resumed run replaced (cancelled, retried trials)
      [<variant>/]<eval>-<hash>/<stimulus>-<hash>/<model>-<hash>/trial-<n>/
        metadata.json          always written
        events.jsonl           the executor's session log (or the trajectory's events)
        artifacts/             copied stimulus artifacts
        texts/                 whole texts too long for the record (see ``offloaded``)
      [<variant>/]<eval>-<hash>/<stimulus>-<hash>/<model>-<hash>/trial-<n>.superseded-<k>/
                               a resumed trial's earlier folder

Folder names are made safe for every file system: characters other than letters, digits,
``.``, ``_``, ``-``, ``=`` and ``,`` become ``_``. Eval, stimulus and model folders also
carry a short hash of the real name (:func:`name_folder`), so names that differ only in
such characters never share a folder; :func:`find_trial_dir` also finds the folders of
runs written before (without the hash).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import sys
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, TypeVar

from vally.contracts.protocols import TrialKey
from vally.errors import ConfigError, OutputError, VallyError
from vally.models.base import RecordModel
from vally.models.jsontext import JsonTooDeepError, loads_bounded
from vally.models.limits import record_depth
from vally.models.records import TrialResultRecord

RESULTS_FILE = "results.jsonl"
SUMMARY_FILE = "run-summary.jsonl"
METADATA_FILE = "metadata.json"
EVENTS_FILE = "events.jsonl"
ARTIFACTS_DIR = "artifacts"
TRACE_CONTEXT_FILE = "otel-context.json"
"""A run's root span identity (written by the trace reporter; read by ``experiment merge``
to link the merged trace to each shard's)."""

_UNSAFE = re.compile(r"[^A-Za-z0-9._=,-]+")

R = TypeVar("R", bound=RecordModel)


def safe_name(value: str) -> str:
    """``value`` as one path segment: unsafe characters become ``_``; never empty, ``.`` or
    ``..``."""
    cleaned = _UNSAFE.sub("_", value).strip("_") or "_"
    return "_" + cleaned if cleaned in {".", ".."} else cleaned


def run_timestamp(now: datetime | None = None) -> str:
    """The run folder name: UTC time with milliseconds, ``:`` and ``.`` replaced by ``-``
    (``2026-06-09T20-41-10-885Z``)."""
    moment = now or datetime.now(UTC)
    return moment.strftime("%Y-%m-%dT%H-%M-%S-") + f"{moment.microsecond // 1000:03d}Z"


def check_output_dir(output_dir: Path) -> None:
    """Refuse an output directory that cannot hold runs.

    Raises:
        OutputError: ``output_dir`` (or one of its parents) is a file.
    """
    for candidate in (output_dir, *output_dir.parents):
        if candidate.exists() and not candidate.is_dir():
            raise OutputError(
                f"output directory {output_dir} cannot be created: {candidate} is a file",
                hint="pass another --output-dir, or move the file away",
            )
        if candidate.exists():
            break


def create_run_dir(output_dir: Path, *, name: str | None = None) -> Path:
    """Create and return a fresh run folder inside ``output_dir``.

    Args:
        output_dir: The parent folder (created when missing).
        name: The folder name; default: the current UTC timestamp. A ``-2``, ``-3``, ...
            suffix is added when it exists already.

    Raises:
        OutputError: The folder cannot be created (``output_dir`` is a file, no permission).
    """
    check_output_dir(output_dir)
    base = name or run_timestamp()
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
        for attempt in range(1, 1000):
            candidate = output_dir / (base if attempt == 1 else f"{base}-{attempt}")
            try:
                candidate.mkdir()
            except FileExistsError:
                continue
            return candidate
    except OSError as exc:
        raise OutputError(
            f"cannot create a run folder in {output_dir}: {exc.strerror or exc}",
            hint="check that the output directory is writable, or pass another --output-dir",
        ) from exc
    raise OutputError(f"cannot create a unique run folder in {output_dir}")


SLUG_LENGTH = 48
"""The longest readable part of a name folder (:func:`name_folder`)."""


def name_folder(value: str) -> str:
    """A folder name that is safe everywhere and unique per name: the name made safe
    (:func:`safe_name`) and cut to :data:`SLUG_LENGTH` characters, a ``-`` and the first
    8 hex digits of the SHA-256 of the real name (``auth login`` -> ``auth_login-1c5e8f3a``).

    Names that differ only in unsafe characters (``a b``, ``a?b``, ``a_b``) or in case get
    different folders, and no name makes a folder name too long for the file system.
    """
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{safe_name(value)[:SLUG_LENGTH]}-{digest}"


def trial_relpath(key: TrialKey) -> Path:
    """The trial's folder relative to the run folder:
    ``[<variant>/]<eval>/<stimulus>/<model>/trial-<n>``, the eval, stimulus and model
    folders named by :func:`name_folder`; the variant folder is ``safe_name(variant)``."""
    parts = [name_folder(key.eval_name), name_folder(key.stimulus), name_folder(key.model)]
    if key.variant:
        parts.insert(0, safe_name(key.variant))
    return Path(*parts, f"trial-{key.trial}")


def legacy_trial_relpath(key: TrialKey) -> Path:
    """The trial's folder as runs before name hashing wrote it:
    ``[<variant>/]<eval>/<stimulus>/<model>/trial-<n>`` with plain :func:`safe_name`
    folders (names differing only in unsafe characters shared one folder)."""
    parts = [safe_name(key.eval_name), safe_name(key.stimulus), safe_name(key.model)]
    if key.variant:
        parts.insert(0, safe_name(key.variant))
    return Path(*parts, f"trial-{key.trial}")


def find_trial_dir(run_dir: Path, key: TrialKey) -> Path:
    """The folder of trial ``key`` in a run folder written by any vally version: the
    current layout (:func:`trial_relpath`) when it exists, else the older one
    (:func:`legacy_trial_relpath`) when that exists, else the current one."""
    current = run_dir / trial_relpath(key)
    if current.is_dir():
        return current
    legacy = run_dir / legacy_trial_relpath(key)
    return legacy if legacy.is_dir() else current


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to a temp file next to ``path`` and rename it into place.

    The file gets the mode a plain ``open()`` gives (0666 minus the umask), so people and
    tools other than the writer can read it."""
    write_pieces_atomic(path, (text,))


def write_pieces_atomic(path: Path, pieces: Iterable[str]) -> None:
    """:func:`write_text_atomic` of the text of ``pieces``, each written as it comes, so a
    long text is never held whole. The file appears whole or not at all: when ``pieces``
    raises, nothing is written and the error propagates."""
    with _replaced(path) as handle:
        for piece in pieces:
            handle.write(piece)


WRITE_PIECE = 1 << 16
"""Characters of a long piece of a line :func:`write_jsonl` encodes and writes at a time."""


def _write_long(handle: IO[str], text: str) -> None:
    """Write ``text``, :data:`WRITE_PIECE` characters at a time when it is longer."""
    if len(text) <= WRITE_PIECE:
        handle.write(text)
        return
    for start in range(0, len(text), WRITE_PIECE):
        handle.write(text[start : start + WRITE_PIECE])


@contextlib.contextmanager
def _replaced(path: Path) -> Iterator[IO[str]]:
    """A text file to write ``path``'s new content to: a temp file next to it, renamed
    into place when the block ends without an error (removed otherwise)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8") as handle:
            yield handle
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


# --------------------------------------------------------------------------- secrets

SECRET_NAME = re.compile(r"(_KEY|_TOKEN|_SECRET)$|PASSWORD|^(API_?KEY|TOKEN|SECRET)$", re.I)
"""Environment variable names whose values are secrets."""

MIN_SECRET_LENGTH = 4
"""Shorter values are not scrubbed (they would mangle ordinary text)."""

MIN_PASSED_LENGTH = 8
"""Values of variables passed into the sandbox whose names do not look secret are scrubbed
from this length on (shorter ones, like ``true`` or ``fast``, are words of ordinary text)."""

PUBLIC_VARIABLES = frozenset(
    {"PATH", "HOME", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TERM", "TMPDIR", "USER",
     "LOGNAME", "SHELL", "PWD", "TZ"}
)  # fmt: skip
"""Variables whose values are never secret (a backend's default pass-through)."""

REDACTED = "[REDACTED]"


def secret_values(environ: Mapping[str, str] | None = None, *extra: Mapping[str, str]) -> set[str]:
    """The values of every secret-looking variable of ``environ`` (default: this process's
    environment) and of the ``extra`` mappings (e.g. ``environment.env`` of specs)."""
    sources = [os.environ if environ is None else environ, *extra]
    found: set[str] = set()
    for source in sources:
        for name, value in source.items():
            if value and len(value) >= MIN_SECRET_LENGTH and SECRET_NAME.search(name):
                found.add(value)
    return found


def passed_values(passed: Iterable[Mapping[str, str]], public: Iterable[str] = ()) -> set[str]:
    """The values of the variables passed into sandboxes that are to be scrubbed: all of
    them (from :data:`MIN_PASSED_LENGTH` characters, or :data:`MIN_SECRET_LENGTH` for
    secret-looking names) except those of :data:`PUBLIC_VARIABLES` and of ``public``."""
    open_names = PUBLIC_VARIABLES | set(public)
    found: set[str] = set()
    for source in passed:
        for name, value in source.items():
            if not value or name in open_names:
                continue
            if SECRET_NAME.search(name):
                if len(value) >= MIN_SECRET_LENGTH:
                    found.add(value)
            elif len(value) >= MIN_PASSED_LENGTH and not _WORDS.fullmatch(value):
                found.add(value)
    return found


_WORDS = re.compile(r"[A-Za-z _-]+")
"""Values made of words only (``production``, ``max_turns``) are not scrubbed unless their
variable's name looks secret: they are ordinary text, and words vally itself writes."""


def _encodings(secret: str) -> set[str]:
    """The forms a secret is commonly printed in besides itself: base64 (standard and
    URL-safe, with and without padding)."""
    raw = secret.encode("utf-8")
    forms = set()
    for encoded in (base64.b64encode(raw), base64.urlsafe_b64encode(raw)):
        text = encoded.decode("ascii")
        forms.update({text, text.rstrip("=")})
    return {f for f in forms if len(f) >= MIN_SECRET_LENGTH}


class Scrubber:
    """Replaces secret values with ``[REDACTED]`` in everything vally writes: texts,
    records, and the files and file names of trial folders. Each secret is also hidden in
    its base64 forms.

    Args:
        secrets: The literal values to hide.
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        plain = {s for s in secrets if len(s) >= MIN_SECRET_LENGTH}
        encoded = {form for s in plain for form in _encodings(s)}
        # Longest first so that a secret containing another is replaced whole.
        values = sorted(plain | encoded, key=len, reverse=True)
        self.secrets: tuple[str, ...] = tuple(values)
        escaped = {json.dumps(s, ensure_ascii=False)[1:-1] for s in values}
        self._json_forms: tuple[str, ...] = tuple(
            sorted(escaped | set(values), key=len, reverse=True)
        )

    @classmethod
    def from_env(cls, *extra: Mapping[str, str]) -> Scrubber:
        """A scrubber for the process environment plus ``extra`` variable mappings."""
        return cls(secret_values(None, *extra))

    @classmethod
    def for_run(cls, passed: Iterable[Mapping[str, str]], public: Iterable[str] = ()) -> Scrubber:
        """A scrubber for a run: secret-looking variables of this process's environment,
        and every variable passed into the sandboxes (see :func:`passed_values`)."""
        sources = list(passed)
        return cls(secret_values(None, *sources) | passed_values(sources, public))

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def text(self, value: str) -> str:
        """``value`` with every secret replaced."""
        if not self.secrets:
            return value
        for secret in self._json_forms:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value

    def data(self, value: Any) -> Any:
        """A JSON-like structure with every string scrubbed (keys included)."""
        if not self.secrets:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.data(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.data(v) for v in value]
        return value

    def record(self, record: R) -> R:
        """``record`` itself when it holds no secret, else a scrubbed copy. Only values are
        replaced, never the JSON around them (a secret that is also a key or a literal,
        like ``status``, leaves the record valid)."""
        if not self.secrets:
            return record
        line = record.to_json_line()
        clean = self.text(line)
        if clean == line:
            return record
        try:
            return type(record).model_validate_json(clean)
        except ValueError:  # a secret also spelled a number or a key: scrub values only
            return type(record).model_validate(self._values(record.to_json_dict()))

    def _values(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self._values(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._values(v) for v in value]
        return value


def write_jsonl(
    path: Path, records: Iterable[RecordModel], scrubber: Scrubber | None = None
) -> None:
    """Write records as JSON lines (temp file, then rename), each in its pieces
    (:meth:`~vally.models.base.RecordModel.json_pieces`) as they come, a long piece
    :data:`WRITE_PIECE` characters at a time: no line is joined, encoded or held whole
    (a run summary of many stimuli is a line of megabytes); a secret is scrubbed within a
    piece (a JSON text never spans two)."""
    scrub = scrubber or Scrubber()
    with _replaced(path) as handle:
        for record in records:
            for piece in record.json_pieces():
                _write_long(handle, scrub.text(piece))
            handle.write("\n")


def write_json(path: Path, data: Any, scrubber: Scrubber | None = None) -> None:
    """Write ``data`` as indented JSON (temp file, then rename), scrubbed."""
    scrub = scrubber or Scrubber()
    write_text_atomic(path, json.dumps(scrub.data(data), indent=2, ensure_ascii=False) + "\n")


Warn = Callable[[str], None]
"""Receives a warning for the user (one line, no ``warning:`` prefix)."""


def _warn_on_stderr(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


def results_file(path: Path) -> Path:
    """The results file of ``path``: a run directory's ``results.jsonl``, or ``path``.

    Raises:
        ConfigError: There is no such file (the hint names variant folders when ``path``
            is an experiment directory).
    """
    file = path / RESULTS_FILE if path.is_dir() else path
    if file.is_file():
        return file
    variants = (
        sorted(c.name for c in path.iterdir() if (c / RESULTS_FILE).is_file())
        if path.is_dir() and not file.exists()
        else []
    )
    hint = (
        f"{path} looks like an experiment directory (variants: {', '.join(variants)}): "
        f"pass it as 'vally compare {path}', or pass one variant folder, e.g. "
        f"{path / variants[0]}"
        if variants
        else "pass a run directory holding results.jsonl, or a results JSONL file"
    )
    problem = "is not a file" if file.exists() else "does not exist"
    what = f"no results at {path}" if file == path else f"no results in {path}"
    raise ConfigError(f"{what}: {file} {problem}", hint=hint)


def torn_line_warning(where: str, number: int, size: int) -> str:
    """The warning for a final line that a killed writer left incomplete."""
    return (
        f"{where}:{number}: the last line is incomplete ({size:,} bytes, no line end: the "
        "run that wrote it was killed while writing it); it is skipped, the lines before "
        "it are read"
    )


def iter_json_lines(
    handle: IO[str], where: str, warn: Warn | None = None
) -> Iterator[tuple[int, Any]]:
    """``(line number, parsed JSON)`` for each non-blank line of ``handle``, one at a time.

    A last line that is not JSON and has no line end is what a killed writer leaves: it
    is skipped with a warning. Any other line that is not JSON is an error.

    Raises:
        ConfigError: A line (other than a torn last one) is not JSON.
    """
    for number, _line, data in iter_raw_json_lines(handle, where, warn):
        yield number, data


def iter_raw_json_lines(
    handle: IO[str], where: str, warn: Warn | None = None
) -> Iterator[tuple[int, str, Any]]:
    """``(line number, line text, parsed JSON)`` for each non-blank line of ``handle`` (see
    :func:`iter_json_lines`); the text is kept so a reader can pass the line on unchanged.

    Raises:
        ConfigError: A line (other than a torn last one) is not JSON.
    """
    depth = record_depth()
    for number, line in enumerate(handle, 1):
        if not line or line.isspace():  # a blank line (strip() would copy every line)
            continue
        try:
            data = loads_bounded(line, max_depth=depth)
        except JsonTooDeepError as exc:
            raise ConfigError(
                f"{where}:{number}: {exc}",
                hint="each line must be one JSON trial record as written by vally eval; "
                "remove that line, or raise the limit (docs/limits.md)",
            ) from None
        except json.JSONDecodeError as exc:
            if not line.endswith("\n"):
                (warn or _warn_on_stderr)(torn_line_warning(where, number, len(line)))
                return
            raise ConfigError(
                f"{where}:{number}: not JSON: {exc.msg}",
                hint="each line must be one JSON trial record as written by vally eval; fix "
                "or remove that line",
            ) from None
        yield number, line, data


def iter_records(path: Path, warn: Warn | None = None) -> Iterator[TrialResultRecord]:
    """The trial records of a run directory (its ``results.jsonl``) or a JSONL file, read
    one line at a time (memory does not grow with the file). Lines of other types
    (``run-summary``) are skipped; so is a torn last line, with a warning.

    Raises:
        ConfigError: The path does not exist, or a line is not a trial record.
    """
    for _line, record in iter_record_lines(path, warn):
        yield record


@contextlib.contextmanager
def reading_results(path: Path) -> Iterator[IO[str]]:
    """``path`` opened for reading results lines; a file that cannot be read or is not UTF-8
    (while it is open, too) becomes a :class:`~vally.errors.ConfigError` naming it."""
    try:
        with path.open(encoding="utf-8", newline="\n") as handle:
            yield handle
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})",
            hint="pass a results.jsonl written by vally eval or vally experiment run",
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from exc


def iter_record_lines(
    path: Path, warn: Warn | None = None
) -> Iterator[tuple[str, TrialResultRecord]]:
    """``(line text, record)`` for each trial record of a run directory or a JSONL file (see
    :func:`iter_records`), so a reader can pass the original line on unchanged.

    Raises:
        ConfigError: The path does not exist, or a line is not a trial record.
    """
    file = results_file(path)
    bad_line_hint = "each line must be one JSON trial record as written by vally eval"
    with reading_results(file) as handle:
        for number, line, data in iter_raw_json_lines(handle, str(file), warn):
            if not isinstance(data, dict):
                raise ConfigError(
                    f"{file}:{number}: holds a JSON {type(data).__name__}, "
                    "not a trial record object",
                    hint=bad_line_hint,
                )
            if data.get("type") != "trial-result":
                continue
            try:
                record = TrialResultRecord.model_validate(data)
            except Exception as exc:
                raise ConfigError(f"{file}:{number}: not a trial-result record: {exc}") from None
            yield line, record


def load_records(path: Path, warn: Warn | None = None) -> list[TrialResultRecord]:
    """Every trial record of a run directory or a JSONL file (see :func:`iter_records`).

    Args:
        path: A run directory or a results file.
        warn: Receives the warning about a torn last line (default: standard error).

    Raises:
        ConfigError: The path does not exist, holds no results, or has a bad line.
    """
    return list(iter_records(path, warn))


@contextlib.contextmanager
def output_errors(what: str, *, hint: str | None = None) -> Iterator[None]:
    """Turn an :class:`OSError` raised while writing ``what`` into an :class:`OutputError`
    that names it (``cannot write <what>: <reason>``), with ``hint``."""
    try:
        yield
    except OSError as exc:
        raise OutputError(f"cannot write {what}: {exc.strerror or exc}", hint=hint) from exc


def require_directory(
    path: Path, what: str, *, hint: str, error: type[VallyError] = ConfigError
) -> None:
    """Fail unless ``path`` is a folder: ``<what> <path> does not exist`` (or is a file).

    Raises:
        VallyError: Of type ``error``, with ``hint``.
    """
    if not path.is_dir():
        problem = "is a file, not a directory" if path.exists() else "does not exist"
        raise error(f"{what} {path} {problem}", hint=hint)


DEFAULT_MODEL_LABEL = "default"
"""The model part of a trial key (and its folder) when no model is chosen."""


def model_label(model: str | None) -> str:
    """The model as it appears in keys and folders (``default`` for None)."""
    return model if model else DEFAULT_MODEL_LABEL
