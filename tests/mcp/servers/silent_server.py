"""A process that reads stdin and never answers: an MCP server stuck before ``initialize``."""

import sys

print("silent server: waiting forever", file=sys.stderr, flush=True)
for _line in sys.stdin:
    pass
