"""The input of ``vally grade``: its flags checked before any plugin loads, standard input
spooled to a temporary file (read twice without holding it in memory: once to check every
trial, once to grade them), and each saved trial matched to its stimulus."""

from __future__ import annotations

import codecs
import contextlib
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, TextIO

from vally import ConfigError
from vally_regrade.matching import match_stimulus
from vally_regrade.saved_trials import iter_trials

if TYPE_CHECKING:
    from vally import EvalSpec, Stimulus
    from vally_regrade.request import GradeOptions
    from vally_regrade.saved_trials import SavedTrial


def check_flags(opts: GradeOptions, stdin: TextIO, cwd: Path) -> tuple[Path, Path | None]:
    """The eval spec and workspace paths, checked before any plugin loads.

    Raises:
        ConfigError: A flag is invalid, or standard input is a terminal.
    """
    if opts.output not in (None, "jsonl"):
        raise ConfigError(f"--output {opts.output!r} is not supported; the only value is 'jsonl'")
    if opts.threshold is not None and not 0.0 <= opts.threshold <= 1.0:
        raise ConfigError(f"--threshold {opts.threshold} is outside 0..1")
    spec_path = (cwd / opts.eval_spec).absolute()
    if not spec_path.is_file():
        problem = "is a folder, not a file" if spec_path.is_dir() else "no such file"
        raise ConfigError(
            f"--eval-spec {opts.eval_spec}: {problem} ({spec_path})",
            hint="pass the eval spec file whose graders to apply",
        )
    workspace: Path | None = None
    if opts.workspace:
        workspace = (cwd / opts.workspace).absolute()
        if not workspace.is_dir():
            raise ConfigError(f"--workspace {opts.workspace}: not a folder ({workspace})")
    if stdin.isatty():
        raise ConfigError(
            "vally grade reads trial records from standard input, which is a terminal",
            hint="pipe them in: vally eval -e eval.yaml --output jsonl | vally grade -e "
            "eval.yaml, or vally grade -e eval.yaml < results.jsonl",
        )
    return spec_path, workspace


def input_folders(stdin: TextIO) -> list[Path]:
    """The folder of the results file standard input was redirected from, and its parent
    (an experiment's variant folder sits in the run folder), where a record's offloaded
    texts are; empty when standard input is not a file."""
    import os
    import stat

    try:
        if not stat.S_ISREG(os.fstat(stdin.fileno()).st_mode):
            return []
        source = Path(os.readlink(f"/proc/self/fd/{stdin.fileno()}"))
    except (OSError, ValueError, AttributeError):
        return []
    return [source.parent, source.parent.parent]


@contextlib.contextmanager
def spool(stdin: TextIO) -> Iterator[IO[str]]:
    """A copy of standard input in a temporary file, to read it twice without holding it
    in memory (once to check every trial, once to grade them)."""
    with tempfile.TemporaryFile("w+", encoding="utf-8", newline="\n") as copy:
        source = getattr(stdin, "buffer", None)
        if source is not None:  # the bytes, decoded strictly (stdin itself may be lenient)
            _copy_utf8(source, copy)
        else:
            try:
                shutil.copyfileobj(stdin, copy)
            except UnicodeError as exc:
                raise _not_utf8(str(exc)) from None
        copy.seek(0)
        yield copy


def _not_utf8(reason: str) -> ConfigError:
    return ConfigError(
        f"standard input is not UTF-8 text ({reason})",
        hint="pipe in a results.jsonl written by vally, or a trajectory saved as UTF-8",
    )


def _copy_utf8(source: IO[bytes], target: IO[str]) -> None:
    """Copy ``source`` into ``target``, decoding UTF-8 strictly.

    Raises:
        ConfigError: The input is not UTF-8 (naming the byte offset in the whole input).
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0  # bytes read before this chunk
    final = False
    while not final:
        chunk = source.read(1 << 16)
        final = not chunk
        pending = len(decoder.getstate()[0])  # a character the previous chunk cut
        try:
            target.write(decoder.decode(chunk, final=final))
        except UnicodeDecodeError as exc:  # its position counts from the pending bytes
            raise _not_utf8(f"{exc.reason} at byte {offset - pending + exc.start}") from None
        offset += len(chunk)


def matched_trials(
    spooled: IO[str],
    spec: EvalSpec,
    opts: GradeOptions,
    warn: Callable[[str], None] | None,
) -> Iterator[tuple[SavedTrial, Stimulus]]:
    """Each trial of the spooled input with its stimulus, read one at a time from the
    start of ``spooled``."""
    spooled.seek(0)
    for item in iter_trials(spooled, source="<stdin>", warn=warn):
        yield item, match_stimulus(item, spec, opts.stimulus, str(opts.eval_spec))


def scan(
    spooled: IO[str], spec: EvalSpec, opts: GradeOptions, warn: Callable[[str], None] | None
) -> tuple[int, list[Stimulus]]:
    """Check every trial of the input before any is graded: the number of trials and
    the stimuli they match (each once, in input order).

    Raises:
        ConfigError: The input is not JSON, holds an unknown shape or a trial of no
            stimulus, or holds no trials.
    """
    count = 0
    stimuli: dict[str, Stimulus] = {}
    for _, stimulus in matched_trials(spooled, spec, opts, warn):
        count += 1
        stimuli.setdefault(stimulus.name, stimulus)
    if not count:
        raise ConfigError(
            "no trials on standard input",
            hint="pipe the output of `vally eval --output jsonl` or a results.jsonl file",
        )
    return count, list(stimuli.values())

