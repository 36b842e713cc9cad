"""Tools built on the run engine: compare, statistics, lint, ingest and scaffolding.

Each is a library the CLI calls; none of them imports the CLI.
"""
