"""The shapes of saved trials that ``vally grade`` reads, and where a trajectory records the
shape it was read from."""

from __future__ import annotations

from typing import Literal

InputFormat = Literal["trial-result", "trajectory", "eval-outcome", "atif"]
"""The shapes :func:`vally_regrade.saved_trials.read_trials` recognises."""

FORMAT_KEY = "ingestFormat"
"""Key of ``Trajectory.metadata.extra`` recording which shape a trajectory was read from."""
