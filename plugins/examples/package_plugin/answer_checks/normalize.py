"""Text normalisation shared by the package's graders."""

from __future__ import annotations


def normalize(text: str) -> str:
    """Lower case, single spaces, no trailing full stop."""
    return " ".join(text.lower().split()).rstrip(".")
