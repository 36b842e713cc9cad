"""The ``vally`` command line (typer). Each command lives in its own module and registers
itself through ``register(app)``; heavy libraries are imported inside the commands."""

from vally.cli import options as options  # public as vally.cli_options
