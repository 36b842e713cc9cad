"""Bounds on what vally reads, so that a hostile or mistaken input ends in a clear error
instead of exhausting memory, time or the Python stack.

Every limit has a default and an environment variable that changes it::

    VALLY_MAX_YAML_DEPTH=200 vally lint big.eval.yaml

The value must be a positive integer. The limits are read when they are checked, so a
process (a test, a notebook) may change them between runs. ``docs/reference/limits.md``
lists them with what each protects against.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from vally.errors import ConfigError


@dataclass(frozen=True)
class Limit:
    """One bound on an input, with the environment variable that changes it.

    Attributes:
        env: The environment variable (``VALLY_MAX_...``).
        default: The value when the variable is unset.
        what: What is counted, for messages (``nesting depth of a YAML document``).
    """

    env: str
    default: int
    what: str

    def value(self, environ: Mapping[str, str] | None = None) -> int:
        """The current limit: the environment variable when set, else the default.

        Raises:
            ConfigError: The variable is set to something other than a positive integer.
        """
        env = os.environ if environ is None else environ
        raw = env.get(self.env, "").strip()
        if not raw:
            return self.default
        try:
            number = int(raw.replace("_", ""))
        except ValueError:
            number = 0
        if number < 1:
            raise ConfigError(
                f"{self.env}={raw!r} is not a positive integer",
                hint=f"set it to the {self.what} to allow (default {self.default}), or unset it",
            )
        return number

    def hint(self, limit: int | None = None) -> str:
        """How to raise the limit: ``raise it with VALLY_MAX_...=<n> (now <limit>)``."""
        current = self.value() if limit is None else limit
        return f"if this is intended, raise the limit with {self.env}=<n> (now {current})"


YAML_DEPTH = Limit("VALLY_MAX_YAML_DEPTH", 100, "nesting depth of a YAML document")
"""Mappings and sequences nested in one YAML document (deeper documents would overflow the
parser's stack)."""

YAML_NODES = Limit(
    "VALLY_MAX_YAML_NODES", 200_000, "nodes of a YAML document with its aliases expanded"
)
"""Nodes of one YAML document counting every alias as a copy of its anchor (a few lines of
nested aliases otherwise expand to billions of values)."""

JSON_DEPTH = Limit("VALLY_MAX_JSON_DEPTH", 100, "nesting depth of one JSON value")
"""Arrays and objects nested in one JSON value an agent or a tool produced (an event line,
a grader program's verdict). Records wrap such values, so record lines may nest
:data:`RECORD_DEPTH_MARGIN` levels more."""

RECORD_DEPTH_MARGIN = 64
"""Extra nesting allowed in record lines (``results.jsonl``) over :data:`JSON_DEPTH`: the
levels of the record around an event's data."""


def json_depth_limit() -> int:
    """The deepest nesting allowed in one JSON value: :data:`JSON_DEPTH`
    (``VALLY_MAX_JSON_DEPTH``) as the environment sets it now; a caller parsing many lines
    reads it once and passes it to ``loads_bounded(text, max_depth=...)``."""
    return JSON_DEPTH.value()


def record_depth() -> int:
    """The deepest nesting allowed in a record line: :data:`JSON_DEPTH` plus
    :data:`RECORD_DEPTH_MARGIN`."""
    return JSON_DEPTH.value() + RECORD_DEPTH_MARGIN


PLAN_TRIALS = Limit(
    "VALLY_MAX_TRIALS", 100_000, "trials of one run (stimuli x models x runs x variants)"
)
"""Trials one run may plan; also the largest ``runs`` a spec may ask for."""

NAME_LENGTH = 200
"""The longest name (eval, stimulus, variant) a spec may give, in characters."""

LIMITS: tuple[Limit, ...] = (YAML_DEPTH, YAML_NODES, JSON_DEPTH, PLAN_TRIALS)
"""Every limit that an environment variable changes."""
