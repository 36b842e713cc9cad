"""Tools built on the run engine: the merge of sharded runs and the sequential gate.

Each is a library the CLI calls; none of them imports the CLI.
"""
