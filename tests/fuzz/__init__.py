"""Property-based fuzzing of what vally parses from outside: YAML files and event streams."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

# Deterministic and bounded: the same examples on every machine, a few seconds per test.
settings.register_profile(
    "fuzz",
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=150,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
FUZZ = settings.get_profile("fuzz")
"""The settings of every fuzz test (use as a decorator: ``@FUZZ``)."""
