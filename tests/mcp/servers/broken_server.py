"""A server that fails at start with a message on stderr."""

import sys

print("broken server: DATABASE_URL is not set", file=sys.stderr, flush=True)
sys.exit(2)
