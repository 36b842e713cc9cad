"""``python -m vally``: the command line."""

from vally.cli.app import main

main()
